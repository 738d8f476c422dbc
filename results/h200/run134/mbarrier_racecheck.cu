// results/h200/run134: run 133's minimal kernel (pairs of warps at an mbarrier each, the
// pattern of dev/cuda/kfv_mma versions 30 and 32; variants 0-6) and a second one in version
// 30's own layout, with its stages filled by cp.async (variants 7-9), to find which part of
// version 30 racecheck reports. nvcc -arch=sm_90 -lineinfo; ./a.out VARIANT
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
// k2, version 30's layout: stages [pair][16 rows][512 floats], a table of 1,024 float4 written
// by all before __syncthreads, the mbarriers right after the table, each warp copying its half
// of the pair's stage by cp.async before the table and waiting for it before the pair meets.
// VAR 7: so; VAR 8: without cp.async (plain stores); VAR 9: as 7 with the mbarriers first
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
__device__ __forceinline__ void cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa(dst)), "l"(src) : "memory");
}
template <int VAR> __global__ void k2(const float *v, float *out, int iters)
{
    extern __shared__ __align__(128) float sm[];
    float *stages = VAR == 9 ? sm + 16 : sm;                     // [pair][16][512]
    float4 *table = reinterpret_cast<float4 *>(stages + 5 * 16 * 512);
    uint64_t *sbar = VAR == 9 ? reinterpret_cast<uint64_t *>(sm) : reinterpret_cast<uint64_t *>(table + 1024);
    const int tid = threadIdx.x, pr = tid >> 6, h = (tid >> 5) & 1, lane = tid & 31;
    float *stage = stages + pr * 16 * 512;
    if (tid < 5)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 64;\n" ::"r"(sa(sbar + tid)) : "memory");
    auto copy = [&](int it) { // rows 8h .. 8h + 7 of tile (pr, it)
        const float *src = v + ((size_t)(pr + 5 * it) * 16 + 8 * h) * 512 + 4 * lane;
        for (int r = 0; r < 8; r++)
            for (int i = 0; i < 4; i++) {
                float *dst = stage + (8 * h + r) * 512 + 4 * lane + 128 * i;
                if (VAR == 8)
                    *reinterpret_cast<float4 *>(dst) = *reinterpret_cast<const float4 *>(src + r * 512 + 128 * i);
                else
                    cp16(dst, src + r * 512 + 128 * i);
            }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    const int n = iters - (pr & 1);
    if (n > 0)
        copy(0);
    for (int i = tid; i < 1024; i += 320)
        table[i] = make_float4(i, i + 1, i + 2, i + 3);
    __syncthreads();
    const uint32_t bar = sa(sbar + pr);
    uint32_t phase = 0;
    float acc = 0.f;
    for (int it = 0; it < n; it++) {
        if (it > 0) {
            pair_sync(bar, phase); // both warps past the stage
            copy(it);
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        pair_sync(bar, phase);     // both halves landed
        for (int r = 0; r < 16; r++)
            acc += stage[r * 512 + 256 * h + 4 * lane + (tid & 3)] * table[(tid + it) & 1023].x;
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    for (int i = tid; i < 5 * 8 * 512; i += 320) // the merge writes over the stages
        stages[i] = acc;
    __syncthreads();
    out[blockIdx.x * 320 + tid] = stages[(tid * 7) % (5 * 8 * 512)];
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
    if (var >= 7) {
        const size_t smem2 = (5 * 16 * 512) * 4 + 1024 * 16 + 64;
        float *v;
        cudaMalloc(&v, (size_t)5 * 6 * 16 * 512 * 4);
        cudaMemset(v, 0, (size_t)5 * 6 * 16 * 512 * 4);
        cudaFuncSetAttribute(k2<7>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem2);
        cudaFuncSetAttribute(k2<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem2);
        cudaFuncSetAttribute(k2<9>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem2);
        if (var == 7) k2<7><<<4, 320, smem2>>>(v, d, 6);
        if (var == 8) k2<8><<<4, 320, smem2>>>(v, d, 6);
        if (var == 9) k2<9><<<4, 320, smem2>>>(v, d, 6);
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("done: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
