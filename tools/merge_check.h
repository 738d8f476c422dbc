/*
 * The merge-check contract shared by `gem merge-check` (the producer) and
 * `gem analyze merge-boundary` (the fail-closed consumer): the design's fixed
 * geometry, positions, thresholds and the gate logic. docs/receipts-merge-check.md
 * describes the receipt.
 */
#ifndef GEM_MERGE_CHECK_H
#define GEM_MERGE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "gem/check.h"

#define GEM_MC_SCHEMA "gem.merge_check.v1"
#define GEM_MC_TOOL_NAME "gem-online-merge-check"
#define GEM_MC_DISTRIBUTION "uniform"
#define GEM_MC_DEFAULT_OUT "merge-check.json"
#define GEM_MC_DEFAULT_SEED UINT64_C(20260501)
/* 1/sqrt(512) rounded to float: see docs/receipts-merge-check.md for why. */
#define GEM_MC_DEFAULT_SCALE 0.0441941738f

#define GEM_MC_PARTITIONS 32
#define GEM_MC_N_Q_HEADS 32
#define GEM_MC_N_KV_HEADS 4
#define GEM_MC_MAX_GROUPS 4
#define GEM_MC_DK 512
#define GEM_MC_DV 512
#define GEM_MC_N_LENGTHS 5

/* The design's gates. */
#define GEM_MC_MIN_CORRELATION 0.999999999999
#define GEM_MC_MAX_NMSE 1.42e-11
#define GEM_MC_MAX_ABS_BELOW 1.64e-7

/* 8,191 / 8,192 / 8,193 / 65,536 / 131,072, in this order. */
extern const int64_t gem_mc_design_lengths[GEM_MC_N_LENGTHS];

/* The figures of one length and the gates they decide. */
typedef struct gem_mc_figures {
    int64_t live;
    gem_compare cmp;        /* online oracle vs double reference */
    int finite;             /* no non-finite output element */
    int deterministic;      /* runs 1 and 2 have identical bytes */
    size_t unwritten[2];    /* poisoned elements left, runs 1 and 2 */
    int guard_ok[2];        /* guard bytes intact, runs 1 and 2 */
    double score_mean, score_std, score_min, score_max;
    double max_weight;      /* largest softmax weight of any head */
    double min_effective_tokens;
    int gate_corr, gate_nmse, gate_max_abs, gate_written; /* set by gem_mc_gates */
    int pass;
} gem_mc_figures;

/* Sets the gate_* flags and pass from cmp, finite, deterministic, unwritten
 * and guard_ok. A non-finite figure fails its gate. */
void gem_mc_gates(gem_mc_figures *f);

/* Everything one length of the audit produces: the figures and the digests
 * of the inputs, both oracle outputs and the double reference output. */
typedef struct gem_mc_case {
    gem_mc_figures fig;
    gem_input_seeds seeds;
    char in_sha[3][65]; /* q, k, v */
    char out_sha[2][65]; /* online run 1, run 2 */
    char ref_sha[65];    /* the double reference output */
} gem_mc_case;

/* Bytes of memory one length of the audit needs at `live` tokens (inputs,
 * outputs, reference, statistics scratch and the oracle's own scratch), for
 * a check before it runs; UINT64_MAX when it does not fit 64 bits. */
uint64_t gem_mc_case_bytes(int64_t live);

/* Runs one length of the audit at the fixed geometry: inputs from `seed`,
 * two runs of the P = 32 float oracle into poisoned, guarded buffers, the
 * double reference, score statistics and digests, on `threads` workers (the
 * result does not depend on how many). Deterministic: the producer and the
 * analyzer get the same bytes. GEM_OK with *out filled, or the failing status
 * with one line in why. */
gem_status gem_mc_run_case(int64_t live, uint64_t seed, float scale, int64_t threads,
                           gem_mc_case *out, char *why, size_t why_cap);

#endif /* GEM_MERGE_CHECK_H */
