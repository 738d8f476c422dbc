/*
 * Internal: the names of one build of src/cpu_kernels.c among several. With GEM_CPU_VARIANT
 * defined (avx512, avx2 or portable: the instruction set its compile flags allow), every
 * function of cpu_kernels.h that cpu_kernels.c defines takes the suffix _<variant>, so the
 * three builds link into one library side by side and src/cpu_dispatch.c defines the plain
 * names, choosing a build by what the processor supports (GEM_CPU_DISPATCH in CMakeLists.txt).
 * Included by cpu_kernels.c alone, before cpu_kernels.h. Keep the list that of cpu_dispatch.c.
 */
#ifndef GEM_CPU_KERNELS_VARIANT_H
#define GEM_CPU_KERNELS_VARIANT_H

#define CPU_VARIANT_NAME(n) CPU_VARIANT_NAME_(n, GEM_CPU_VARIANT)
#define CPU_VARIANT_NAME_(n, v) CPU_VARIANT_NAME__(n, v)
#define CPU_VARIANT_NAME__(n, v) n##_##v

#define cpu_kernels_isa CPU_VARIANT_NAME(cpu_kernels_isa)
#define cpu_widen CPU_VARIANT_NAME(cpu_widen)
#define cpu_dot_portable CPU_VARIANT_NAME(cpu_dot_portable)
#define cpu_dot_tile CPU_VARIANT_NAME(cpu_dot_tile)
#define cpu_dot_tile_tm CPU_VARIANT_NAME(cpu_dot_tile_tm)
#define cpu_exp CPU_VARIANT_NAME(cpu_exp)
#define cpu_sum CPU_VARIANT_NAME(cpu_sum)
#define cpu_max CPU_VARIANT_NAME(cpu_max)
#define cpu_rescale_accumulate CPU_VARIANT_NAME(cpu_rescale_accumulate)
#define cpu_online_tile CPU_VARIANT_NAME(cpu_online_tile)
#define cpu_value_tile CPU_VARIANT_NAME(cpu_value_tile)
#define cpu_weighted_rows CPU_VARIANT_NAME(cpu_weighted_rows)
#define cpu_stream_sum_ahead CPU_VARIANT_NAME(cpu_stream_sum_ahead)
#define cpu_stream_sum CPU_VARIANT_NAME(cpu_stream_sum)
#define cpu_score_status CPU_VARIANT_NAME(cpu_score_status)

#endif
