/*
tiles_timeline: where a Q4_0 tile product's time goes in a chain of calls, block by block, at
the Gemma 4 31B shapes: the library's scratch kernel and product (src/model/cuda/matvec_tiles.cu,
the same arithmetic and split) with the GPU's global timer read in every block.

H200 runs 107, 109 and 111: the layer matrices' products take 1.5-2.5x their bytes' time, and
neither deeper DRAM requests (an L2 prefetch), the matrix already in the L2 (80-90% of the cold
time), nor one wave of warps (stream-K, slower) is what holds them. This program measures the
call itself. For call 10 of a chain of 20 (copies rotating past the L2, as tiles_bench.h does),
every block of the scratch kernel stamps its start and end, and every block of the product its
start, the return of its launch wait (griddepcontrol.wait), the arrival of its first batch of
weights (after the first chunk is computed) and its end (after y is written). It prints, in us
from the scratch kernel's first block start:
  - the scratch kernel's span;
  - the product's first block start, its first and last wait return, its last block end;
  - the product's blocks: duration (start to end), wait to end, and start times (median, p90,
    max), and how many start after the first block has ended (a second wave);
  - the gap from the product's last block end to the next call's first scratch block start.
The stamps do not change the arithmetic: every call's y is checked bit for bit against the
library's gem_dmv on the same matrix first. Each stamp is stored when it is taken, and the
product is held to 64 registers (16 bytes of spills) so that an SM holds as many of its blocks
as of the library's (61-63 registers): run 113's first build had 77 and held fewer (4 blocks of
6 warps an SM instead of 5, 1 of 16 warps instead of 2); its figures for o and down do not stand
for the library's.

./tiles_timeline
*/
#include "tiles_bench.h"

__device__ __forceinline__ uint64_t gtimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The library's scratch kernel with a start and end stamp a block (thread 0). */
__global__ void xq_stamped(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq,
                           uint64_t *__restrict__ st)
{
    const uint64_t t0 = gtimer();
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b < nblk)
        gem_tiles_xq_block(x[32 * b + (threadIdx.x & 31)], b, xq, threadIdx.x & 31);
    __syncthreads();
    if (threadIdx.x == 0) {
        st[2 * blockIdx.x] = t0;
        st[2 * blockIdx.x + 1] = gtimer();
    }
}

#define TL_BATCH 4

/* The library's q4t_kernel (one matrix) with four stamps a block (module comment). */
__global__ void __launch_bounds__(MAX_WARPS * 32, 2) q4t_stamped(const TileParams p, uint64_t *st)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    uint64_t *const stb = st + 4 * blockIdx.x; /* each stamp stored when taken: no register held */
    if (threadIdx.x == 0)
        stb[0] = gtimer();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const size_t tile_bytes = (size_t)p.nchunks * CHUNK_BYTES;
    const unsigned char *w0 = p.mat[0].data + (size_t)tile * tile_bytes;
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const size_t wlane = (size_t)16 * lane, dlane = (size_t)(512 + 8 * (4 * h + t));
    uint4 wq[TL_BATCH];
    uint2 dd[TL_BATCH];
    auto load = [&](int64_t c0) {
#pragma unroll
        for (int k = 0; k < TL_BATCH; k++) {
            if (c0 + k < ce) {
                const size_t off = (size_t)(c0 + k) * CHUNK_BYTES;
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w0 + off + wlane));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w0 + off + dlane));
            }
        }
    };
    pdl_trigger();
    load(cb);
    pdl_wait();
    if (threadIdx.x == 0)
        stb[1] = gtimer();
    for (int64_t c0 = cb; c0 < ce; c0 += TL_BATCH) {
#pragma unroll
        for (int k = 0; k < TL_BATCH; k++) {
            if (c0 + k < ce) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(
                    p.xq + (size_t)(c0 + k) * XQ_CHUNK + (size_t)XQ_LANE * lane);
                const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
                gem_tiles_chunk(wq[k], dd[k], dg, cx, m0, a0);
                if (c0 == cb && k == 0 && threadIdx.x == 0)
                    stb[2] = gtimer(); /* warp 0's first chunk has arrived and been computed */
            }
        }
        if (c0 + TL_BATCH < ce)
            load(c0 + TL_BATCH);
    }
    float r0 = a0[0] + a0[2], r1 = a0[1] + a0[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[warp][2 * t] = r0;
        red[warp][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < TILE_ROWS) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float s = red[0][r];
        for (int w = 1; w < nw; w++)
            s += red[w][r];
        p.mat[0].y[(size_t)tile * TILE_ROWS + (size_t)r] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        stb[3] = gtimer();
}

/* One stamped call: the scratch kernel and the product, both programmatic dependents. */
static void stamped_call(TileParams p, const float *x, uint64_t *sx, uint64_t *sp)
{
    const int64_t nblk = p.cols / 32;
    cudaCheck(launch_pdl(xq_stamped, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk,
                         const_cast<unsigned char *>(p.xq), sx));
    p.nchunks = p.cols / CHUNK_ELEMS;
    const int64_t w = tiles_library_warps(p.nchunks, false);
    p.cpw = (p.nchunks + w - 1) / w;
    cudaCheck(launch_pdl(q4t_stamped, (unsigned)(p.mat[0].rows / TILE_ROWS), (unsigned)(32 * w), 0,
                         p, sp));
}

static double q_of(double *v, int64_t n, double f)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int64_t i = (int64_t)(f * (double)(n - 1) + 0.5);
    return v[i];
}

int main(void)
{
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; us from the scratch kernel's first block start of call 10 of 20\n\n",
           prop.name, prop.multiProcessorCount);
    const int CALLS = 20, SAMPLE = 10;
    int failed = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        if (s->geglu)
            continue; /* the plain product only */
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_0, s->cols, &rb));
        const size_t mbytes = (size_t)s->rows * rb;
        int ncopies = (int)(((size_t)200 << 20) / mbytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 16 ? 16 : ncopies;
        gem_dmatrix *m = (gem_dmatrix *)calloc((size_t)ncopies, sizeof *m);
        void *tmp;
        cudaCheck(cudaMalloc(&tmp, mbytes));
        for (int c = 0; c < ncopies; c++) {
            m[c] = (gem_dmatrix){NULL, GEM_GGUF_Q4_0, s->rows, s->cols, rb, GEM_DLAYOUT_ROWS};
            cudaCheck(cudaMalloc(&m[c].data, mbytes));
            gem_dmatrix r = m[c];
            r.data = tmp;
            GEM_TRY(gem_dmatrix_fill_random(&r, 7 + 3 * (uint64_t)c, 1.0f / sqrtf((float)s->cols), NULL));
            GEM_TRY(gem_dmatrix_tile(&m[c], tmp, NULL));
        }
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaFree(tmp));
        float *hx = (float *)malloc((size_t)s->cols * 4), *dx, *dy, *dyl;
        fill(hx, (size_t)s->cols, 99 + si);
        void *xq;
        cudaCheck(cudaMalloc((void **)&dx, (size_t)s->cols * 4));
        cudaCheck(cudaMalloc((void **)&dy, (size_t)s->rows * 4));
        cudaCheck(cudaMalloc((void **)&dyl, (size_t)s->rows * 4));
        cudaCheck(cudaMalloc(&xq, gem_dmv_xq_bytes(s->cols) + 16));
        cudaCheck(cudaMemcpy(dx, hx, (size_t)s->cols * 4, cudaMemcpyHostToDevice));
        const int64_t nxb = (s->cols / 32 + 7) / 8, npb = s->rows / TILE_ROWS;
        uint64_t *sx, *sp;
        cudaCheck(cudaMalloc((void **)&sx, (size_t)CALLS * nxb * 2 * 8));
        cudaCheck(cudaMalloc((void **)&sp, (size_t)CALLS * npb * 4 * 8));
        TileParams p;
        memset(&p, 0, sizeof p);
        p.cols = s->cols;
        p.xq = static_cast<const unsigned char *>(xq);
        p.nmat = 1;
        /* the stamped kernels give the library's bits */
        p.mat[0] = TileMat{static_cast<const unsigned char *>(m[0].data), dy, s->rows, 0};
        stamped_call(p, dx, sx, sp);
        GEM_TRY(gem_dmv(&m[0], dx, dyl, xq, NULL));
        cudaCheck(cudaDeviceSynchronize());
        float *ya = (float *)malloc((size_t)s->rows * 4), *yb = (float *)malloc((size_t)s->rows * 4);
        cudaCheck(cudaMemcpy(ya, dy, (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(yb, dyl, (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
        if (memcmp(ya, yb, (size_t)s->rows * 4) != 0) {
            printf("%-8s the stamped product differs from the library's: FAILED\n", s->name);
            failed = 1;
            continue;
        }
        wait_kernel<<<1, 1>>>(20000000ull);
        cudaCheck(cudaGetLastError());
        for (int c = 0; c < CALLS; c++) {
            p.mat[0].data = static_cast<const unsigned char *>(m[c % ncopies].data);
            stamped_call(p, dx, sx + (size_t)c * nxb * 2, sp + (size_t)c * npb * 4);
        }
        cudaCheck(cudaDeviceSynchronize());
        uint64_t *hs = (uint64_t *)malloc((size_t)CALLS * npb * 4 * 8);
        uint64_t *hxs = (uint64_t *)malloc((size_t)CALLS * nxb * 2 * 8);
        cudaCheck(cudaMemcpy(hs, sp, (size_t)CALLS * npb * 4 * 8, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(hxs, sx, (size_t)CALLS * nxb * 2 * 8, cudaMemcpyDeviceToHost));
        const uint64_t *X = hxs + (size_t)SAMPLE * nxb * 2, *Xn = X + nxb * 2;
        const uint64_t *P = hs + (size_t)SAMPLE * npb * 4;
        uint64_t T = UINT64_MAX, xe = 0, xn0 = UINT64_MAX;
        for (int64_t b = 0; b < nxb; b++) {
            T = X[2 * b] < T ? X[2 * b] : T;
            xe = X[2 * b + 1] > xe ? X[2 * b + 1] : xe;
            xn0 = Xn[2 * b] < xn0 ? Xn[2 * b] : xn0;
        }
        uint64_t ps = UINT64_MAX, pw0 = UINT64_MAX, pw1 = 0, pe = 0, first_end = UINT64_MAX;
        double *dur = (double *)malloc((size_t)npb * 8), *wend = (double *)malloc((size_t)npb * 8),
               *st = (double *)malloc((size_t)npb * 8), *arr = (double *)malloc((size_t)npb * 8);
        for (int64_t b = 0; b < npb; b++) {
            const uint64_t *q = P + 4 * b;
            ps = q[0] < ps ? q[0] : ps;
            pw0 = q[1] < pw0 ? q[1] : pw0;
            pw1 = q[1] > pw1 ? q[1] : pw1;
            pe = q[3] > pe ? q[3] : pe;
            first_end = q[3] < first_end ? q[3] : first_end;
            dur[b] = 1e-3 * (double)(q[3] - q[0]);
            wend[b] = 1e-3 * (double)(q[3] - q[1]);
            arr[b] = 1e-3 * (double)(q[2] - q[1]);
        }
        int64_t late = 0;
        for (int64_t b = 0; b < npb; b++) {
            late += P[4 * b] > first_end;
            st[b] = 1e-3 * ((double)P[4 * b] - (double)T);
        }
        const double us = 1e-3, MB = 1e-6 * (double)mbytes;
        const int64_t warps = tiles_library_warps(s->cols / CHUNK_ELEMS, false);
        int per_sm = 0;
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, q4t_stamped,
                                                                (int)(32 * warps), 0));
        const double span = us * ((double)pe - (double)T), bytes_us = MB / 4.6e6 * 1e6;
        printf("%-8s %6.1f MB, %lld blocks of %lld warps, %d an SM (occupancy query)\n", s->name,
               MB, (long long)npb, (long long)warps, per_sm);
        printf("  scratch kernel      0.00 .. %6.2f\n", us * (double)(xe - T));
        printf("  product             first start %6.2f, waits return %6.2f .. %6.2f, last end "
               "%6.2f; the bytes at 4.6 TB/s take %.2f\n",
               us * ((double)ps - (double)T), us * ((double)pw0 - (double)T),
               us * ((double)pw1 - (double)T), span, bytes_us);
        printf("  blocks: start to end   median %6.2f p90 %6.2f\n", q_of(dur, npb, 0.5), q_of(dur, npb, 0.9));
        printf("          wait to end    median %6.2f p90 %6.2f\n", q_of(wend, npb, 0.5), q_of(wend, npb, 0.9));
        printf("          wait to warp 0's first chunk  median %6.2f p90 %6.2f\n", q_of(arr, npb, 0.5),
               q_of(arr, npb, 0.9));
        printf("          start          median %6.2f p90 %6.2f max %6.2f; %lld of %lld start after the "
               "first block's end\n",
               q_of(st, npb, 0.5), q_of(st, npb, 0.9), q_of(st, npb, 1.0), (long long)late, (long long)npb);
        printf("  to the next call's scratch kernel: %6.2f\n\n", us * ((double)xn0 - (double)pe));
        fflush(stdout);
        free(dur);
        free(wend);
        free(st);
        free(arr);
        free(hs);
        free(hxs);
        free(ya);
        free(yb);
        free(hx);
        for (int c = 0; c < ncopies; c++)
            cudaCheck(cudaFree(m[c].data));
        free(m);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(dy));
        cudaCheck(cudaFree(dyl));
        cudaCheck(cudaFree(xq));
        cudaCheck(cudaFree(sx));
        cudaCheck(cudaFree(sp));
    }
    return failed;
}
