/*
 * The device matrix kernels of model_cuda.h in a build without nvcc: no type is
 * supported and every entry answers GEM_ERR_NO_DEVICE without reading its arguments.
 */
#include "model/cuda/model_cuda.h"

int gem_dmv_supported(gem_gguf_type type, int64_t cols)
{
    (void)type;
    (void)cols;
    return 0;
}

int gem_dmatrix_tiles_ok(gem_gguf_type type, int64_t rows, int64_t cols)
{
    (void)type;
    (void)rows;
    (void)cols;
    return 0;
}

gem_status gem_dmatrix_tile(gem_dmatrix *w, const void *src, void *stream)
{
    (void)w;
    (void)src;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

size_t gem_dmv_xq_bytes(int64_t cols)
{
    (void)cols;
    return 0;
}

gem_status gem_dmv(const gem_dmatrix *w, const float *x, float *y, void *xq, void *stream)
{
    (void)w;
    (void)xq;
    (void)x;
    (void)y;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_dmv_multi(int n, const gem_dmatrix *const *w, const float *x, float *const *y,
                         void *xq, void *stream)
{
    (void)xq;
    (void)n;
    (void)w;
    (void)x;
    (void)y;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_dmv_geglu(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x, float *y,
                         void *xq, void *stream)
{
    (void)xq;
    (void)wg;
    (void)wu;
    (void)x;
    (void)y;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_dmv_multi_prepared(int n, const gem_dmatrix *const *w, const float *x,
                                  float *const *y, void *xq, void *stream)
{
    return gem_dmv_multi(n, w, x, y, xq, stream);
}

gem_status gem_dmv_geglu_prepared(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x,
                                  float *y, void *xq, void *stream)
{
    return gem_dmv_geglu(wg, wu, x, y, xq, stream);
}

gem_status gem_dmv_row(const gem_dmatrix *w, int64_t row, float scale, float *y, void *stream)
{
    (void)w;
    (void)row;
    (void)scale;
    (void)y;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_dmv_row_at(const gem_dmatrix *w, const int32_t *drow, float scale, float *y,
                          void *stream)
{
    (void)w;
    (void)drow;
    (void)scale;
    (void)y;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_dmatrix_fill_random(const gem_dmatrix *w, uint64_t seed, float amp, void *stream)
{
    (void)w;
    (void)seed;
    (void)amp;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

size_t gem_dargmax_scratch_bytes(int64_t n)
{
    /* argmax.cu's: one 8-byte partial per 2,048 values, 1 to 256 of them */
    const int64_t nb = (n + 2047) / 2048;
    return n >= 1 && n <= INT32_MAX ? (size_t)(nb > 256 ? 256 : nb) * 8 : 0;
}

gem_status gem_dargmax(const float *x, int64_t n, int32_t *idx, void *scratch, void *stream)
{
    (void)x;
    (void)n;
    (void)idx;
    (void)scratch;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}
