/*
 * Internal: exact element conversions, the rounding to 16-bit types, and row
 * loads of KV views, shared by the reference, the CPU routes, the cache helper
 * and the measuring engine.
 */
#ifndef GEM_KV_VIEW_H
#define GEM_KV_VIEW_H

#include <stdint.h>

#include "gem/attn.h"

/* The float a bfloat16 / IEEE half bit pattern stands for (exact). */
float gem_bf16_to_f32(uint16_t h);
float gem_f16_to_f32(uint16_t h);

/* The float an FP8 E4M3 (E4M3FN) code stands for, its head's scale not applied (exact;
 * S.1111.111, either sign, gives the positive quiet NaN 0x7FC00000). */
float gem_fp8_e4m3_to_f32(uint8_t b);

/* f rounded to nearest even as an FP8 E4M3 code, saturating: magnitudes from 448 on
 * (infinity included) give +-448; NaN gives S.1111.111. */
uint8_t gem_f32_to_fp8_e4m3(float f);

/* The scale of KV head g of a view's K (which = 0) or V (which = 1): its k_scale or
 * v_scale entry for an FP8 tensor (K rebuilt from V: V's), 1.0 otherwise. */
double gem_kv_head_scale(const gem_kv_view *kv, int which, int64_t g);

/* f rounded to nearest even as a bfloat16 / IEEE half bit pattern (F16:
 * subnormals kept; |f| >= 65520 gives infinity). NaN stays NaN (quiet),
 * overflow goes to infinity. The cache helper's and the engine's rounding. */
uint16_t gem_f32_to_bf16(float f);
uint16_t gem_f32_to_f16(float f);

/* Row (g, t) of a view's K (which = 0) or V (which = 1) as n floats into
 * dst (n), converted exactly (FP8: the E4M3 values, the head's scale not applied; see
 * gem_kv_head_scale). No checks: the view was validated. */
void gem_kv_row_f32(const gem_kv_view *kv, int which, int64_t g, int64_t t, int64_t n,
                    float *dst);

/* Row (g, t) of K rebuilt from V (kv->k_from_v not NULL) in double: the V row
 * converted exactly into vrow (n floats, scratch; FP8: unscaled), then k_weight * V (FP8:
 * times V's scale, exactly) and the
 * rotation of gem_k_from_v with cos and sin in double, into dst (n doubles).
 * n = dk = dv. No checks: the view was validated. The reference's K. */
void gem_k_from_v_row_f64(const gem_kv_view *kv, int64_t g, int64_t t, int64_t n, float *vrow,
                          double *dst);

#endif /* GEM_KV_VIEW_H */
