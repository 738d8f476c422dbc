/*
 * decode_loop: a small decode loop on the installed gem library.
 *
 * One attention layer of the Gemma 4 full-attention shape (32 query heads over
 * 4 KV heads, head dimension 512, scale 1.0) decodes `steps` tokens: each step
 * appends the new token's K and V rows to a gem KV cache, then runs gem_decode
 * on the cache in place with the tuned default route, and checks the output
 * against a direct softmax computed here in double precision.
 *
 *   cc decode_loop.c $(pkg-config --cflags --libs gem) -o decode_loop
 *   ./decode_loop [steps]          (default 64; prints one line per 16 steps)
 *
 * This runs on the CPU backend. On CUDA the calls are the same with
 * GEM_BACKEND_CUDA, device pointers for q, the rows and the output, a
 * cudaMalloc'd workspace and a cudaStream_t as the last argument of gem_decode.
 * Exit status 0 when every step agrees with the reference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gem/decode.h>

#define NQ 32
#define NKV 4
#define D 512

/* A reproducible value in [-1, 1) for element i of stream s. */
static float value(uint64_t s, uint64_t i)
{
    uint64_t z = s * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

/* out[h] = softmax(q[h] . k[g, t]) . v[g, t] over t < live, in double.
 * q (NQ, D); k, v (NKV, cap, D) head-major; out (NQ, D). */
static void reference(const float *q, const float *k, const float *v, int64_t live, int64_t cap,
                      double *out)
{
    double *w = malloc((size_t)live * sizeof *w);
    for (int h = 0; h < NQ; h++) {
        const int g = h / (NQ / NKV);
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < live; t++) {
            double s = 0;
            for (int i = 0; i < D; i++)
                s += (double)q[h * D + i] * k[((size_t)g * cap + t) * D + i];
            w[t] = s;
            mx = s > mx ? s : mx;
        }
        for (int64_t t = 0; t < live; t++)
            sum += (w[t] = exp(w[t] - mx));
        for (int i = 0; i < D; i++) {
            double a = 0;
            for (int64_t t = 0; t < live; t++)
                a += w[t] * v[((size_t)g * cap + t) * D + i];
            out[h * D + i] = a / sum;
        }
    }
    free(w);
}

static int fail(const char *what, gem_status st)
{
    fprintf(stderr, "decode_loop: %s: %s\n", what, gem_status_str(st));
    return 1;
}

int main(int argc, char **argv)
{
    const int64_t steps = argc > 1 ? atoll(argv[1]) : 64;
    if (steps < 1 || steps > 4096) {
        fprintf(stderr, "usage: decode_loop [steps in 1..4096]\n");
        return 2;
    }
    const gem_decode_shape shape = {NQ, NKV, D, D, 1.0f};
    gem_decode_ctx *ctx = NULL;
    gem_status st = gem_decode_ctx_create(GEM_BACKEND_CPU, 0, &ctx);
    if (st != GEM_OK)
        return fail("context", st);
    const gem_kv_cache_desc desc = {GEM_BACKEND_CPU, NKV, D, D, steps,
                                    GEM_DTYPE_F32, GEM_DTYPE_F32, 0};
    gem_kv_cache *cache = NULL;
    if ((st = gem_kv_cache_create(&desc, &cache)) != GEM_OK)
        return fail("cache", st);
    /* the workspace is sized once, at the cache's capacity: it covers every step */
    size_t ws_bytes = 0;
    if ((st = gem_decode_workspace_bytes(ctx, &shape, steps, NULL, &ws_bytes)) != GEM_OK)
        return fail("workspace size", st);
    void *ws = aligned_alloc(GEM_DECODE_WORKSPACE_ALIGN,
                             (ws_bytes + GEM_DECODE_WORKSPACE_ALIGN - 1) /
                                 GEM_DECODE_WORKSPACE_ALIGN * GEM_DECODE_WORKSPACE_ALIGN);
    float *q = malloc(NQ * D * sizeof *q), *out = malloc(NQ * D * sizeof *out);
    float *k_row = malloc(NKV * D * sizeof *k_row), *v_row = malloc(NKV * D * sizeof *v_row);
    double *ref = malloc(NQ * D * sizeof *ref);
    if (!ws || !q || !out || !k_row || !v_row || !ref)
        return fail("memory", GEM_ERR_NOMEM);
    printf("decode_loop: %s\n", gem_decode_ctx_describe(ctx));
    double worst = 0;
    for (int64_t step = 0; step < steps; step++) {
        for (int i = 0; i < NKV * D; i++) {
            k_row[i] = value(2 * (uint64_t)step, (uint64_t)i);
            v_row[i] = value(2 * (uint64_t)step + 1, (uint64_t)i);
        }
        for (int i = 0; i < NQ * D; i++)
            q[i] = value(1000000 + (uint64_t)step, (uint64_t)i) * 0.1f;
        if ((st = gem_kv_cache_append(cache, k_row, v_row, 1, NULL)) != GEM_OK)
            return fail("append", st);
        gem_kv_view view;
        gem_kv_cache_view(cache, &view);
        if ((st = gem_decode(ctx, &shape, q, &view, out, ws, ws_bytes, NULL, NULL)) != GEM_OK)
            return fail("decode", st);
        reference(q, view.k, view.v, view.live, view.capacity, ref);
        double num = 0, den = 0;
        for (int i = 0; i < NQ * D; i++) {
            num += (out[i] - ref[i]) * (out[i] - ref[i]);
            den += ref[i] * ref[i];
        }
        const double nmse = num / den;
        worst = nmse > worst ? nmse : worst;
        if ((step + 1) % 16 == 0 || step + 1 == steps)
            printf("step %4lld: %lld tokens in the cache, NMSE against double %.2e\n",
                   (long long)step + 1, (long long)view.live, nmse);
    }
    const int ok = worst <= 1e-10;
    printf("decode_loop: %lld steps, worst NMSE %.2e: %s\n", (long long)steps, worst,
           ok ? "agree" : "DISAGREE");
    free(ws);
    free(q);
    free(out);
    free(k_row);
    free(v_row);
    free(ref);
    gem_kv_cache_destroy(cache);
    gem_decode_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
