/*
 * The device decoder in a build without CUDA: every entry answers
 * GEM_ERR_NO_DEVICE (gem_model_upload, and so every CUDA session, is refused).
 */
#include <stdio.h>

#include "model_internal.h"

gem_status gem_model_dev_create(const gem_model *m, uint64_t random_seed, gem_model_dev **out,
                                char *err, size_t errlen)
{
    (void)m;
    (void)random_seed;
    *out = NULL;
    if (err && errlen)
        snprintf(err, errlen, "this build of gem has no CUDA backend");
    return GEM_ERR_NO_DEVICE;
}

void gem_model_dev_free(gem_model_dev *d) { (void)d; }
size_t gem_model_dev_bytes(const gem_model_dev *d)
{
    (void)d;
    return 0;
}
uint64_t gem_model_dev_random_seed(const gem_model_dev *d)
{
    (void)d;
    return 0;
}

gem_status gem_dev_alloc(size_t bytes, void **out)
{
    (void)bytes;
    *out = NULL;
    return GEM_ERR_NO_DEVICE;
}

void gem_dev_free(void *p) { (void)p; }

gem_status gem_dev_copy(gem_session *s, void *dst, const void *src, size_t bytes)
{
    (void)s;
    (void)dst;
    (void)src;
    (void)bytes;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_session_dev_create(gem_session *s, char *err, size_t errlen)
{
    (void)s;
    if (err && errlen)
        snprintf(err, errlen, "this build of gem has no CUDA backend");
    return GEM_ERR_NO_DEVICE;
}

void gem_session_dev_free(gem_session *s) { (void)s; }

gem_decode_ctx *gem_session_dev_decode_ctx(gem_session *s) { return s->dctx; }

gem_status gem_session_dev_eval(gem_session *s, int32_t token, float *logits, int32_t *argmax)
{
    (void)s;
    (void)token;
    (void)logits;
    (void)argmax;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_session_dev_enqueue(gem_session *s, int32_t token, int want_logits,
                                   int want_argmax)
{
    (void)s;
    (void)token;
    (void)want_logits;
    (void)want_argmax;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_session_dev_enqueue_at(gem_session *s, const int32_t *dtoken, int want_logits,
                                      int want_argmax)
{
    (void)s;
    (void)dtoken;
    (void)want_logits;
    (void)want_argmax;
    return GEM_ERR_NO_DEVICE;
}

const int32_t *gem_session_dev_argmax(gem_session *s)
{
    (void)s;
    return NULL;
}

gem_status gem_session_dev_greedy(gem_session *s, int32_t token, int64_t n, int32_t *out,
                                  int64_t *made, int (*on_token)(void *user, int32_t token),
                                  void *user)
{
    (void)s;
    (void)token;
    (void)n;
    (void)out;
    (void)on_token;
    (void)user;
    *made = 0;
    return GEM_ERR_NO_DEVICE;
}

void *gem_session_dev_stream(gem_session *s)
{
    (void)s;
    return NULL;
}

gem_status gem_session_dev_finish(gem_session *s, float *logits, int32_t *argmax, int timed)
{
    (void)s;
    (void)logits;
    (void)argmax;
    (void)timed;
    return GEM_ERR_NO_DEVICE;
}
