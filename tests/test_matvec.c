/*
 * Matrix-vector products of the model: for every element type, each output is
 * bit for bit the dot product of the row's gem_gguf_dequant values with x,
 * accumulated with fused multiply-adds in 64 lanes in element order (element e
 * in lane e % 64) and summed by the fixed tree 32, 16, ..., 1; and the pool gives
 * the same bits for 1, 2 and 3 threads. Row lengths 512 and, for the plain types, 500 (a partial group).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/matvec.h"
#include "cpu_pool.h"
#include "tcheck.h"

static float ref_dot(const float *w, const float *x, int64_t n)
{
    float acc[64] = {0};
    for (int64_t e = 0; e < n; e++)
        acc[e % 64] = fmaf(w[e], x[e], acc[e % 64]);
    for (int width = 32; width > 0; width /= 2)
        for (int l = 0; l < width; l++)
            acc[l] += acc[l + width];
    return acc[0];
}

int main(void)
{
    static const gem_gguf_type types[] = {GEM_GGUF_F32,  GEM_GGUF_F16,  GEM_GGUF_BF16,
                                          GEM_GGUF_Q8_0, GEM_GGUF_Q4_0, GEM_GGUF_Q4_K,
                                          GEM_GGUF_Q6_K};
    const int64_t rows = 37, max_cols = 512;
    float *src = malloc((size_t)(rows * max_cols) * 4), *x = malloc((size_t)max_cols * 4);
    float *row = malloc((size_t)max_cols * 4), *y = malloc((size_t)rows * 4);
    float *y2 = malloc((size_t)rows * 4);
    uint8_t *q = malloc((size_t)(rows * max_cols) * 4);
    for (int64_t i = 0; i < rows * max_cols; i++)
        src[i] = sinf((float)i * 0.731f) * 0.1f * (float)(1 + i % 5);
    for (int64_t i = 0; i < max_cols; i++)
        x[i] = cosf((float)i * 0.37f);
    cpu_pool *p1 = NULL, *p3 = NULL;
    TCHECK_STATUS(cpu_pool_create(1, &p1), GEM_OK);
    TCHECK_STATUS(cpu_pool_create(3, &p3), GEM_OK);
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            const int64_t cols = pass ? 500 : 512;
            size_t rb;
            if (gem_gguf_row_bytes(types[k], cols, &rb) != GEM_OK)
                continue; /* 500 is not a multiple of a quantized block */
            for (int64_t r = 0; r < rows; r++)
                gem_gguf_quantize(types[k], src + r * cols, q + (size_t)r * rb, cols);
            gem_matrix w = {q, types[k], rows, cols, rb};
            mv(p1, &w, x, y);
            int bad = 0;
            for (int64_t r = 0; r < rows; r++) {
                gem_gguf_dequant(types[k], q + (size_t)r * rb, row, cols);
                float want = ref_dot(row, x, cols);
                bad += memcmp(&want, &y[r], 4) != 0;
            }
            if (!TCHECK(bad == 0))
                fprintf(stderr, "     type %s: %d rows differ\n", gem_gguf_type_name(types[k]),
                        bad);
            mv(p3, &w, x, y2);
            TCHECK(memcmp(y, y2, (size_t)rows * 4) == 0);
            mv_row_f32(&w, 5, row);
            float dq[512];
            gem_gguf_dequant(types[k], q + 5 * rb, dq, cols);
            TCHECK(memcmp(row, dq, (size_t)cols * 4) == 0);
        }
    cpu_pool_destroy(p1);
    cpu_pool_destroy(p3);
    free(src);
    free(x);
    free(row);
    free(y);
    free(y2);
    free(q);
    return tcheck_summary("test_matvec");
}
