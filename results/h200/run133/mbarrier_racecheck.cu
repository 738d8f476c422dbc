// results/h200/run133: run 130's minimal kernel (pairs of warps at an mbarrier each, the
// pattern of dev/cuda/kfv_mma versions 30 and 32) with two more variants, where pairs 1-4 run
// no iteration (their mbarriers initialised and never arrived at, as in version 30's blocks
// without tiles). nvcc -arch=sm_90 -lineinfo; ./a.out VARIANT
#include <cstdio>
#include <cstdint>
#include <cstdlib>
__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void pair_sync(uint32_t bar, uint32_t &phase)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
    uint32_t done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(phase) : "memory");
    } while (!done);
    phase ^= 1u;
}
// VAR 0: as version 30 (init at the top, table after, one __syncthreads)
// VAR 1: init, fence.mbarrier_init, __syncthreads, then the table
// VAR 2: as 0, plus mbarrier.inval at the end
// VAR 3: barrier words in a static __shared__ array
// VAR 4: as 1 with inval
// VAR 5: as 0, pairs 1-4 without iterations
// VAR 6: as 5 with inval
template <int VAR> __global__ void k(float *out, int iters)
{
    extern __shared__ __align__(128) float sm[];
    __shared__ uint64_t sbar_static[8];
    float *table = sm;            // 1024 floats, written by all before __syncthreads
    float *stage = sm + 1024;     // [pair][64]
    uint64_t *sbar = VAR == 3 ? sbar_static : reinterpret_cast<uint64_t *>(sm + 1024 + 5 * 64);
    const int tid = threadIdx.x, pr = tid >> 6;
    if (tid < 5)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 64;\n" ::"r"(sa(sbar + tid)) : "memory");
    if (VAR == 1 || VAR == 4) {
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        __syncthreads();
    }
    for (int i = tid; i < 1024; i += 320)
        table[i] = i * 0.5f;
    __syncthreads();
    const uint32_t bar = sa(sbar + pr);
    uint32_t phase = 0;
    float acc = 0.f;
    const int n = VAR >= 5 ? (pr == 0 ? iters : 0) : iters - pr; // pairs run different counts
    for (int it = 0; it < n; it++) {
        if (it > 0)
            pair_sync(bar, phase); // both warps past the stage
        stage[pr * 64 + (tid & 63)] = table[(tid + it) & 1023] + it;
        pair_sync(bar, phase);     // the stage written
        acc += stage[pr * 64 + ((tid + 1) & 63)];
    }
    __syncthreads();
    if ((VAR == 2 || VAR == 4 || VAR == 6) && tid < 5)
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(sa(sbar + tid)) : "memory");
    out[blockIdx.x * 320 + tid] = acc;
}
int main(int argc, char **argv)
{
    const int var = argc > 1 ? atoi(argv[1]) : 0;
    float *d;
    cudaMalloc(&d, 4 * 320 * 4);
    size_t smem = (1024 + 5 * 64) * 4 + 64;
    if (var == 0) k<0><<<4, 320, smem>>>(d, 6);
    if (var == 1) k<1><<<4, 320, smem>>>(d, 6);
    if (var == 2) k<2><<<4, 320, smem>>>(d, 6);
    if (var == 3) k<3><<<4, 320, smem>>>(d, 6);
    if (var == 4) k<4><<<4, 320, smem>>>(d, 6);
    if (var == 5) k<5><<<4, 320, smem>>>(d, 6);
    if (var == 6) k<6><<<4, 320, smem>>>(d, 6);
    cudaError_t e = cudaDeviceSynchronize();
    printf("done: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
