/* PLACEHOLDER until the backend lands: every operation answers "no device". */
#include "backend.h"
static gem_status create(int64_t t, void **impl) { (void)t; *impl = 0; return GEM_ERR_NO_DEVICE; }
static void destroy(void *impl) { (void)impl; }
static int64_t threads(const void *impl) { (void)impl; return 0; }
static const char *describe(const void *impl) { (void)impl; return "unavailable"; }
static gem_status load(void *i, const gem_attn_shape *s, const gem_attn_inputs *in, int64_t c)
{ (void)i; (void)s; (void)in; (void)c; return GEM_ERR_NO_DEVICE; }
static gem_status run(void *i, gem_route r, const gem_route_params *p, double *sec)
{ (void)i; (void)r; (void)p; (void)sec; return GEM_ERR_NO_DEVICE; }
static gem_status output(void *i, float *o, size_t n, gem_output_audit *a)
{ (void)i; (void)o; (void)n; (void)a; return GEM_ERR_NO_DEVICE; }
static gem_status bw(void *i, size_t b, int64_t r, double *x)
{ (void)i; (void)b; (void)r; (void)x; return GEM_ERR_NO_DEVICE; }
static gem_status scratch(const void *i, gem_route r, const gem_route_params *p, size_t *b)
{ (void)i; (void)r; (void)p; (void)b; return GEM_ERR_NO_DEVICE; }
const gem_backend_ops gem_cuda_backend_ops = {create, destroy, threads, describe, load, run, output, bw, scratch};
