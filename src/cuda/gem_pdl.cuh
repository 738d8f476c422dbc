/*
 * Internal to the CUDA code (the decode backend's fused route and the model's kernels):
 * programmatic dependent launch (sm_90's griddepcontrol).
 *
 * A kernel launched with launch_pdl may start while the kernel before it in the stream
 * still runs. pdl_wait returns once that kernel has completed and its writes are visible;
 * since every kernel launched this way waits before it completes, all earlier kernels
 * have completed too. Before pdl_wait a kernel may read only memory that no kernel of
 * the token writes (the weights) and must write nothing; a prefetch (prefetch.global.L2), which
 * reads nothing into a register, may touch any memory. pdl_trigger lets the next
 * kernel in the stream start early (it takes effect once every block has called it or
 * exited). On a kernel not launched with launch_pdl both are no-ops.
 */
#ifndef GEM_CUDA_PDL_CUH
#define GEM_CUDA_PDL_CUH

#include <cuda_runtime.h>
#include <string.h>

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger()
{
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/* kernel<<<grid, block, smem, s>>>(args...) as a programmatic dependent of the stream's
 * previous kernel (smem: bytes of dynamic shared memory, within the kernel's limit). */
template <class... KArgs, class... Args>
static inline cudaError_t launch_pdl_shared(void (*kernel)(KArgs...), dim3 grid, unsigned block,
                                            size_t smem, cudaStream_t s, Args... args)
{
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = grid;
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

/* kernel<<<grid, block, 0, s>>>(args...) as a programmatic dependent of the stream's
 * previous kernel. */
template <class... KArgs, class... Args>
static inline cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, unsigned block,
                                     cudaStream_t s, Args... args)
{
    return launch_pdl_shared(kernel, grid, block, 0, s, args...);
}

#endif /* GEM_CUDA_PDL_CUH */
