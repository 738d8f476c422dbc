/*
 * Check support: seeded inputs, comparison figures, SHA-256 digests and
 * poisoned, guarded buffers (include/gem/check.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "gem/check.h"
#include "gem/file.h"

/* ---- seeded inputs ------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void gem_fill_uniform(uint64_t seed, float lo, float hi, float *dst, size_t n)
{
    if (!dst)
        return;
    const float span = hi - lo;
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = splitmix64(seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull);
        const float u = (float)(r >> 40) * 0x1.0p-24f; /* exact: 24 bits */
        dst[i] = lo + span * u;
    }
}

gem_input_seeds gem_input_seeds_from(uint64_t seed)
{
    gem_input_seeds s = {seed ^ 0x51u, seed ^ 0x4Bu, seed ^ 0x56u};
    return s;
}

static void *alloc_aligned(size_t elems, size_t elem_size)
{
    size_t bytes;
    if (gem_mul_size(elems, elem_size, &bytes) != GEM_OK)
        return NULL;
    /* aligned_alloc wants a multiple of the alignment. */
    if (gem_add_size(bytes, 63, &bytes) != GEM_OK)
        return NULL;
    bytes &= ~(size_t)63;
    if (bytes == 0)
        bytes = 64;
    return aligned_alloc(64, bytes);
}

gem_status gem_inputs_make(const gem_attn_shape *shape, uint64_t seed, gem_owned_inputs *out)
{
    if (!out)
        return GEM_ERR_NULL;
    memset(out, 0, sizeof *out);
    size_t nq, nk, nv;
    gem_status st = gem_attn_shape_elems(shape, &nq, &nk, &nv, NULL);
    if (st != GEM_OK)
        return st;
    float *q = alloc_aligned(nq, sizeof(float));
    float *k = alloc_aligned(nk, sizeof(float));
    float *v = alloc_aligned(nv, sizeof(float));
    if (!q || !k || !v) {
        free(q);
        free(k);
        free(v);
        return GEM_ERR_NOMEM;
    }
    out->seeds = gem_input_seeds_from(seed);
    gem_fill_uniform(out->seeds.q, -1.0f, 1.0f, q, nq);
    gem_fill_uniform(out->seeds.k, -1.0f, 1.0f, k, nk);
    gem_fill_uniform(out->seeds.v, -1.0f, 1.0f, v, nv);
    out->q = q;
    out->k = k;
    out->v = v;
    out->in = (gem_attn_inputs){q, k, v, nq, nk, nv};
    return GEM_OK;
}

gem_status gem_inputs_sha256(const gem_owned_inputs *in, char hex[3][65])
{
    if (!in || !hex)
        return GEM_ERR_NULL;
    const float *bufs[3] = {in->in.q, in->in.k, in->in.v};
    const size_t elems[3] = {in->in.q_elems, in->in.k_elems, in->in.v_elems};
    for (int i = 0; i < 3; i++) {
        size_t bytes;
        gem_status st = gem_mul_size(elems[i], sizeof(float), &bytes);
        if (st == GEM_OK)
            st = gem_sha256_hex(bufs[i], bytes, hex[i]);
        if (st != GEM_OK)
            return st;
    }
    return GEM_OK;
}

void gem_inputs_free(gem_owned_inputs *in)
{
    if (!in)
        return;
    free(in->q);
    free(in->k);
    free(in->v);
    memset(in, 0, sizeof *in);
}

/* ---- comparison ---------------------------------------------------------------- */

/* Figures of got against a reference given either as doubles (ref_d) or as
 * floats (ref_f); exactly one of the two is non-NULL. Means first, then
 * centred sums: stable for correlations very close to 1. */
static gem_status compare(const float *got, const double *ref_d, const float *ref_f, size_t n,
                          gem_compare *out)
{
    if (!got || (!ref_d && !ref_f) || !out)
        return GEM_ERR_NULL;
    if (n == 0)
        return GEM_ERR_PARAM;
#define REF(i) (ref_d ? ref_d[i] : (double)ref_f[i])
    double mg = 0, mr = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(REF(i))) {
            nonfinite++;
            continue;
        }
        mg += got[i];
        mr += REF(i);
    }
    out->n = n;
    out->nonfinite = nonfinite;
    if (nonfinite) {
        out->correlation = out->nmse = out->max_abs = NAN;
        out->ref_var = out->ref_mean_square = NAN;
        return GEM_OK;
    }
    mg /= (double)n;
    mr /= (double)n;
    double sgg = 0, srr = 0, sgr = 0, se = 0, sref2 = 0, maxabs = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], r = REF(i), e = g - r;
        sgg += (g - mg) * (g - mg);
        srr += (r - mr) * (r - mr);
        sgr += (g - mg) * (r - mr);
        se += e * e;
        sref2 += r * r;
        if (fabs(e) > maxabs)
            maxabs = fabs(e);
    }
#undef REF
    double corr;
    if (sgg <= 0.0 || srr <= 0.0)
        corr = (se == 0.0) ? 1.0 : 0.0; /* a constant vector */
    else
        corr = sgr / sqrt(sgg * srr);
    /* Mathematically in [-1, 1]; rounding can step past by an ulp. */
    out->correlation = corr > 1.0 ? 1.0 : corr < -1.0 ? -1.0 : corr;
    out->nmse = sref2 > 0.0 ? se / sref2 : se;
    out->max_abs = maxabs;
    out->ref_var = srr / (double)n;
    out->ref_mean_square = sref2 / (double)n;
    return GEM_OK;
}

gem_status gem_compare_f32_f64(const float *got, const double *ref, size_t n, gem_compare *out)
{
    if (!ref)
        return GEM_ERR_NULL;
    return compare(got, ref, NULL, n, out);
}

gem_status gem_compare_f32_f32(const float *got, const float *ref, size_t n, gem_compare *out)
{
    if (!ref)
        return GEM_ERR_NULL;
    return compare(got, NULL, ref, n, out);
}

gem_status gem_gate_compare(const gem_compare *c, double min_correlation, double max_nmse,
                            gem_gate *out)
{
    if (!c || !out)
        return GEM_ERR_NULL;
    if (!(min_correlation >= -1.0 && min_correlation <= 1.0) || !(max_nmse >= 0.0) ||
        !isfinite(max_nmse))
        return GEM_ERR_PARAM;
    gem_gate g = {0, 0, 0, 0, 0};
    g.finite = c->nonfinite == 0 && isfinite(c->correlation) && isfinite(c->nmse) &&
               isfinite(c->max_abs) && isfinite(c->ref_var) && isfinite(c->ref_mean_square);
    if (g.finite) {
        g.near_constant = c->ref_var <= GEM_GATE_NEAR_CONSTANT * c->ref_mean_square;
        g.nmse_ok = c->nmse <= max_nmse;
        if (g.near_constant)
            g.shape_ok = c->max_abs <= sqrt(1.0 - min_correlation) * sqrt(c->ref_mean_square);
        else
            g.shape_ok = c->correlation >= min_correlation;
        g.pass = g.nmse_ok && g.shape_ok;
    }
    *out = g;
    return GEM_OK;
}

/* ---- digests --------------------------------------------------------------------- */

static void to_hex(const unsigned char *md, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

gem_status gem_sha256_hex(const void *data, size_t bytes, char hex[65])
{
    if (!hex || (!data && bytes))
        return GEM_ERR_NULL;
    unsigned char md[32];
    unsigned int len = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return GEM_ERR_NOMEM;
    int ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             (bytes == 0 || EVP_DigestUpdate(ctx, data, bytes) == 1) &&
             EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return GEM_ERR_IO;
    to_hex(md, hex);
    return GEM_OK;
}

gem_status gem_sha256_file_hex(const char *path, char hex[65])
{
    if (!path || !hex)
        return GEM_ERR_NULL;
    gem_file_digest d;
    gem_status st = gem_file_digest_path(path, GEM_FILE_MAX_DIGEST_BYTES, &d, NULL, 0);
    if (st != GEM_OK)
        return st == GEM_ERR_NOMEM ? st : GEM_ERR_IO;
    memcpy(hex, d.sha256, 65);
    return GEM_OK;
}

/* ---- poisoned, guarded buffers ------------------------------------------------------ */

float *gem_guard_alloc(size_t n)
{
    size_t bytes;
    if (gem_mul_size(n, sizeof(float), &bytes) != GEM_OK ||
        gem_add_size(bytes, GEM_GUARD_BYTES, &bytes) != GEM_OK)
        return NULL;
    float *p = alloc_aligned(bytes, 1);
    if (p)
        gem_guard_poison(p, n);
    return p;
}

void gem_guard_poison(float *p, size_t n)
{
    if (!p)
        return;
    const uint32_t bits = GEM_POISON_BITS;
    for (size_t i = 0; i < n; i++)
        memcpy(p + i, &bits, sizeof bits);
    memset(p + n, 0xA5, GEM_GUARD_BYTES);
}

void gem_guard_check(const float *p, size_t n, size_t *unwritten, int *guard_ok)
{
    if (!p) {
        if (unwritten)
            *unwritten = n;
        if (guard_ok)
            *guard_ok = 0;
        return;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, p + i, sizeof bits);
        count += (bits == GEM_POISON_BITS);
    }
    const unsigned char *g = (const unsigned char *)(p + n);
    int ok = 1;
    for (size_t i = 0; i < GEM_GUARD_BYTES; i++)
        ok &= (g[i] == 0xA5);
    if (unwritten)
        *unwritten = count;
    if (guard_ok)
        *guard_ok = ok;
}

void gem_guard_free(float *p) { free(p); }

/* ---- memory ---------------------------------------------------------------------- */

/* The first unsigned number in the file at path ("max" gives 0 and *unlimited). */
static int read_u64_file(const char *path, uint64_t *v, int *unlimited)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[64];
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    *unlimited = strncmp(buf, "max", 3) == 0;
    if (*unlimited) {
        *v = 0;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (errno || end == buf)
        return -1;
    *v = (uint64_t)x;
    return 0;
}

gem_status gem_mem_available(uint64_t *bytes)
{
    if (!bytes)
        return GEM_ERR_NULL;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return GEM_ERR_UNSUPPORTED;
    char line[256];
    uint64_t avail = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long kib = 0;
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
            found = 1;
            avail = kib > UINT64_MAX / 1024 ? UINT64_MAX : (uint64_t)kib * 1024;
        }
    }
    fclose(f);
    if (!found)
        return GEM_ERR_UNSUPPORTED;
    /* A cgroup limit can be far below what the machine has free. */
    static const char *const limits[2][2] = {
        {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
         "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
    for (int i = 0; i < 2; i++) {
        uint64_t lim = 0, used = 0;
        int unl = 0, unl2 = 0;
        if (read_u64_file(limits[i][0], &lim, &unl) != 0 ||
            read_u64_file(limits[i][1], &used, &unl2) != 0)
            continue;
        if (!unl && lim < ((uint64_t)1 << 62)) { /* v1 writes a huge number for "none" */
            const uint64_t room = lim > used ? lim - used : 0;
            if (room < avail)
                avail = room;
        }
        break;
    }
    *bytes = avail;
    return GEM_OK;
}

gem_status gem_mem_check(uint64_t need, uint64_t *available)
{
    uint64_t avail = 0;
    gem_status st = gem_mem_available(&avail);
    if (st != GEM_OK)
        return st;
    if (available)
        *available = avail;
    return need <= avail ? GEM_OK : GEM_ERR_NOMEM;
}
