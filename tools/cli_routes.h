/*
 * Helpers shared by `gem diff`, `gem bench` and `gem run`: route
 * specifications with explicit defaults, stable labels, the production shape,
 * and "run a route on an engine and audit its output".
 */
#ifndef GEM_CLI_ROUTES_H
#define GEM_CLI_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gem/check.h"
#include "gem/engine.h"

/* Gates between two routes and between a route and the double reference
 * (the design's operator differential thresholds). */
#define CLI_MIN_CORRELATION 0.9999
#define CLI_MAX_NMSE 1e-4

/* The production shape of the design: 32 query heads, 4 KV heads, D512. */
#define CLI_NQ 32
#define CLI_NKV 4
#define CLI_D 512

/* A route and its parameters with every default made explicit. */
typedef struct cli_route_spec {
    gem_route route;
    int64_t partitions; /* fused: P; baseline: value partitions; online: P; reference: 0 */
    int64_t tile;       /* fused: tokens per tile; others: 0 */
} cli_route_spec;

/* Checks the fields a route takes before any engine exists: -1 (and a message
 * naming `cmd`) for a tile given to a route without tiles, or partitions given
 * to the reference. Zero fields stay zero (the default, bound later). */
int cli_route_resolve(const char *cmd, cli_route_spec *s);

/* Replaces zero fields with what a run on e's loaded inputs will use (the
 * decode API's tuned default for fused, 16 for the baseline, 32 for online)
 * and checks the others against the backend: -1 and a message naming `cmd`
 * for a configuration the backend does not run. */
int cli_route_bind(const char *cmd, const gem_engine *e, cli_route_spec *s);

/* "fused_p32_t4", "baseline_p16", "online_p32", "reference"; "fused_default" for a
 * spec not yet bound (cli_route_bind). */
void cli_route_label(const cli_route_spec *s, char *buf, size_t cap);

/* {"route": name, "partitions": P, "tile": T}. */
json_t *cli_route_json(const cli_route_spec *s);

/* The production shape at `live` tokens (capacity = live). */
gem_attn_shape cli_production_shape(int64_t live, float scale);

/* The element types K and V are held in (F32 both unless an option says). */
typedef struct cli_kv_dtypes {
    gem_dtype k, v;
} cli_kv_dtypes;

/* The options --kv-dtype T (K and V), --k-dtype T and --v-dtype T, T one of
 * f32, bf16, f16: 1 when `opt` is one of them (then *bad = 1 when `val` is not
 * a dtype, else the types are set), 0 when it is not. */
int cli_kv_dtype_option(const char *opt, const char *val, cli_kv_dtypes *d, int *bad);

/* The dtype tag of case ids and receipts: the type's name when K and V share
 * it ("f32", "bf16", "f16"), else "k<K>_v<V>" ("kbf16_vf16"). */
void cli_kv_dtype_tag(const cli_kv_dtypes *d, char *buf, size_t cap);

/* {"k": name, "v": name}. */
json_t *cli_kv_dtype_json(const cli_kv_dtypes *d);

/* gem_receipt_geometry of `shape` with its "dtype" set to the tag of d. */
json_t *cli_geometry_json(const gem_attn_shape *shape, const cli_kv_dtypes *d);

/* Bytes of K and V read once at `live` tokens of the production shape:
 * n_kv_heads * live * d * (bytes of K's type + bytes of V's type). */
double cli_kv_bytes(const cli_kv_dtypes *d, int64_t live);

/* The outcome of running one route `runs` times on the loaded inputs. */
typedef struct cli_route_result {
    gem_status status;     /* the first failing run's status, else GEM_OK */
    float *out;            /* (n) the first run's output; free with cli_route_result_free */
    size_t n;
    char sha256[65];       /* of the first run's output */
    int deterministic;     /* 1 when every run's output has the same digest */
    int finite;            /* 1 when no element is NaN or infinite */
    size_t unwritten;      /* most unwritten elements over the runs */
    int guard_ok;          /* 1 when every run left the guard intact */
    double seconds;        /* the first run's time */
} cli_route_result;

/* Runs spec `runs` (>= 1) times on e, auditing every output (n elements).
 * Returns r->status; on a route error r->out is NULL. */
gem_status cli_route_run_checked(gem_engine *e, const cli_route_spec *spec, size_t n,
                                 int runs, cli_route_result *r);
void cli_route_result_free(cli_route_result *r);

/* 1 when the figures pass the gates (gem_gate_compare: finite, NMSE, and correlation or,
 * for a nearly constant reference, relative error). */
int cli_compare_passes(const gem_compare *c);

/* cli_check_memory for what loading the production shape at `live` tokens holds in host
 * memory on `backend`: the F32 inputs, the engine's host copies (`copies` rotation copies on
 * the CPU, one host view on CUDA) and the reference's scores. 0 when it fits, else one line
 * and 2. */
int cli_check_load_memory(const char *cmd, gem_backend backend, const cli_kv_dtypes *d,
                          int64_t live, int64_t copies);

/* Two routes' results on the same inputs, checked against each other and,
 * when asked, against the double reference. */
typedef struct cli_pair_check {
    gem_compare b_vs_a;      /* route b against route a */
    gem_compare a_vs_double; /* zeroed unless with_double */
    gem_compare b_vs_double; /* zeroed unless with_double */
    int passed; /* both finite, fully written, guards intact, repeat-identical, every
                   comparison within the gates */
} cli_pair_check;

/* Fills *out for results a and b (n elements each) of `shape`, q (n_q_heads,
 * dk) and the cache the routes read, `kv` in host memory (gem_engine_kv_host:
 * the rounded values of a 16-bit cache). With with_double, runs
 * gem_attn_reference_kv on them (single thread; `progress`, may be NULL, is
 * printed first). Returns the reference's status (GEM_OK without it).
 * cli_pair_validate2: route b read another view of the same layer, kv_b (V alone
 * with K rebuilt from it, where a read the stored K): each route is checked
 * against the reference of its own view (with_double must be 1), and b against a
 * is recorded but gates only when both read F32 (a stored 16-bit K rounds what b
 * rebuilds in F32). */
gem_status cli_pair_validate2(const gem_attn_shape *shape, const float *q,
                              const gem_kv_view *kv, const gem_kv_view *kv_b,
                              const cli_route_result *a, const cli_route_result *b, size_t n,
                              const char *progress, cli_pair_check *out);
gem_status cli_pair_validate(const gem_attn_shape *shape, const float *q, const gem_kv_view *kv,
                             const cli_route_result *a, const cli_route_result *b, size_t n,
                             int with_double, const char *progress, cli_pair_check *out);

#endif /* GEM_CLI_ROUTES_H */
