/*
 * gem merge-check (gem-online-merge-check): audits the float online-softmax
 * oracle (gem_attn_online: P=32 partials merged in partition order, then
 * finalized) against the independent double-precision direct softmax
 * (gem_attn_reference) at the design's boundary positions 8,191 / 8,192 /
 * 8,193 and the 65,536 / 131,072 tails, for the fixed production geometry
 * (32 query heads, 4 KV heads, DK = DV = 512, F32, no window).
 *
 * Per length it reports correlation, NMSE, max abs error, finiteness,
 * repeat-determinism (two independent runs of the oracle, SHA-256 of the
 * output bytes), the poison/guard state of the output buffers, and the spread
 * of the scores that sets the difficulty (std, range, largest softmax weight,
 * effective number of attended tokens). The receipt (schema
 * gem.merge_check.v1, docs/receipts-merge-check.md) binds seeds, raw-input
 * digests and output digests, so `gem analyze merge-boundary` can recompute
 * every input from its seed.
 *
 * Work inside one length is split into independent single-threaded tasks
 * (the two oracle runs, the reference and the score statistics per KV-head
 * group, the three input digests) run by a small thread pool. Every task
 * writes its own disjoint output, so the results are bitwise identical for
 * any --threads value.
 */
#include <errno.h>
#include <stdarg.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gem/attn.h"
#include "gem/check.h"
#include "gem/receipt.h"
#include "merge_check.h"

#define MC_CMD "merge-check"
#define MC_MAX_LENGTHS 16
#define MC_MAX_THREADS 64

const int64_t gem_mc_design_lengths[GEM_MC_N_LENGTHS] = {8191, 8192, 8193, 65536, 131072};

/* ---- score statistics ------------------------------------------------------ */

/* Spread of the scores s_t = scale * q.k_t of one KV-head group, in double. */
typedef struct score_stats {
    double sum, sumsq;   /* over heads and tokens, for mean and std */
    double min, max;     /* extreme scores */
    double max_weight;   /* largest softmax weight of any head */
    double min_eff;      /* smallest effective token count (sum w)^2 / sum w^2 */
    double count;        /* heads * tokens */
} score_stats;

/* Tokens whose scores group_score_stats computes side by side. */
#define MC_CHAINS 8

/* out[j] = dot(q, k + j * dk) in double for j < nt (nt <= MC_CHAINS), each the serial sum
 * dot += q[i] k[i] over i; the nt sums run side by side, so each has the bits it has alone. */
static void score_dots(const float *q, const float *k, int64_t dk, int64_t nt, double *out)
{
    if (nt == MC_CHAINS) {
        double d[MC_CHAINS] = {0};
        for (int64_t i = 0; i < dk; i++) {
            const double qi = (double)q[i];
            for (int j = 0; j < MC_CHAINS; j++)
                d[j] += qi * (double)k[(size_t)j * (size_t)dk + (size_t)i];
        }
        memcpy(out, d, sizeof d);
        return;
    }
    for (int64_t j = 0; j < nt; j++) {
        const float *kj = k + (size_t)j * (size_t)dk;
        double dot = 0.0;
        for (int64_t i = 0; i < dk; i++)
            dot += (double)q[i] * (double)kj[i];
        out[j] = dot;
    }
}

/* Scores of the heads [h0, h0 + nh) of one shape, against KV head g.
 * q (n_q_heads, dk), k (n_kv_heads, capacity, dk), scratch (live) doubles. */
static void group_score_stats(const gem_attn_shape *s, const float *q, const float *k,
                              int64_t g, double *scratch, score_stats *st)
{
    int64_t group = s->n_q_heads / s->n_kv_heads;
    st->sum = st->sumsq = 0.0;
    st->min = INFINITY;
    st->max = -INFINITY;
    st->max_weight = 0.0;
    st->min_eff = INFINITY;
    st->count = 0.0;
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const float *qh = q + (size_t)h * (size_t)s->dk;
        double mx = -INFINITY;
        double dots[MC_CHAINS];
        for (int64_t t = 0; t < s->live; t++) {
            if (t % MC_CHAINS == 0) {
                const float *kt =
                    k + ((size_t)g * (size_t)s->capacity + (size_t)t) * (size_t)s->dk;
                score_dots(qh, kt, s->dk, s->live - t < MC_CHAINS ? s->live - t : MC_CHAINS,
                           dots);
            }
            double sc = (double)s->scale * dots[t % MC_CHAINS];
            scratch[t] = sc;
            st->sum += sc;
            st->sumsq += sc * sc;
            if (sc < st->min)
                st->min = sc;
            if (sc > mx)
                mx = sc;
        }
        if (mx > st->max)
            st->max = mx;
        double sw = 0.0, sw2 = 0.0;
        for (int64_t t = 0; t < s->live; t++) {
            double w = exp(scratch[t] - mx);
            sw += w;
            sw2 += w * w;
        }
        double wmax = 1.0 / sw; /* the top token has w = 1 */
        if (wmax > st->max_weight)
            st->max_weight = wmax;
        double eff = sw * sw / sw2;
        if (eff < st->min_eff)
            st->min_eff = eff;
        st->count += (double)s->live;
    }
}

/* ---- tasks ----------------------------------------------------------------- */

typedef enum task_kind { T_ONLINE, T_REFERENCE, T_STATS, T_SHA } task_kind;

typedef struct mc_case_work {
    gem_attn_shape shape;
    gem_owned_inputs in;
    float *out[2];        /* guarded (n_q_heads * dv) floats, runs 1 and 2 */
    gem_status online_st[2];
    double *ref;          /* (n_q_heads, dv) doubles */
    gem_status ref_st[GEM_MC_MAX_GROUPS];
    double *stats_scratch[GEM_MC_MAX_GROUPS]; /* (live) doubles each */
    score_stats stats[GEM_MC_MAX_GROUPS];
    char in_sha[3][65];   /* q, k, v */
    gem_status sha_st[3];
} mc_case_work;

typedef struct task {
    task_kind kind;
    int index; /* run, group or tensor */
} task;

typedef struct pool {
    pthread_mutex_t lock;
    size_t next, n;
    task tasks[2 + 3 * GEM_MC_MAX_GROUPS + 3];
    mc_case_work *w;
} pool;

static void run_task(mc_case_work *w, const task *t)
{
    const gem_attn_shape *s = &w->shape;
    int64_t group = s->n_q_heads / s->n_kv_heads;
    switch (t->kind) {
    case T_ONLINE:
        w->online_st[t->index] = gem_attn_online(s, &w->in.in, GEM_MC_PARTITIONS,
                                                 w->out[t->index],
                                                 (size_t)(s->n_q_heads * s->dv));
        break;
    case T_REFERENCE: {
        /* One KV-head group: its query heads and its K/V rows, the same
         * arithmetic per head as a whole-shape call. */
        int64_t g = t->index;
        gem_attn_shape sub = *s;
        sub.n_q_heads = group;
        sub.n_kv_heads = 1;
        size_t qoff = (size_t)(g * group * s->dk);
        size_t koff = (size_t)g * (size_t)s->capacity * (size_t)s->dk;
        size_t voff = (size_t)g * (size_t)s->capacity * (size_t)s->dv;
        gem_attn_inputs in = {
            .q = w->in.q + qoff,
            .k = w->in.k + koff,
            .v = w->in.v + voff,
            .q_elems = (size_t)(group * s->dk),
            .k_elems = (size_t)s->capacity * (size_t)s->dk,
            .v_elems = (size_t)s->capacity * (size_t)s->dv,
        };
        w->ref_st[g] = gem_attn_reference(&sub, &in, w->ref + (size_t)(g * group * s->dv),
                                          (size_t)(group * s->dv));
        break;
    }
    case T_STATS:
        group_score_stats(s, w->in.q, w->in.k, t->index, w->stats_scratch[t->index],
                          &w->stats[t->index]);
        break;
    case T_SHA: {
        const float *p = t->index == 0 ? w->in.q : t->index == 1 ? w->in.k : w->in.v;
        size_t n = t->index == 0 ? w->in.in.q_elems
                   : t->index == 1 ? w->in.in.k_elems
                                   : w->in.in.v_elems;
        w->sha_st[t->index] = gem_sha256_hex(p, n * sizeof(float), w->in_sha[t->index]);
        break;
    }
    }
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next < p->n ? p->next++ : p->n;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n)
            return NULL;
        run_task(p->w, &p->tasks[i]);
    }
}

/* Runs every task of one case on `threads` threads (1 = this thread only). */
static int run_tasks(mc_case_work *w, int64_t threads)
{
    pool p = {.next = 0, .n = 0, .w = w};
    if (pthread_mutex_init(&p.lock, NULL) != 0)
        return -1;
    int64_t groups = w->shape.n_kv_heads;
    /* Longest first: the oracle runs, then the reference and statistics. */
    p.tasks[p.n++] = (task){T_ONLINE, 0};
    p.tasks[p.n++] = (task){T_ONLINE, 1};
    for (int64_t g = 0; g < groups; g++)
        p.tasks[p.n++] = (task){T_REFERENCE, (int)g};
    for (int64_t g = 0; g < groups; g++)
        p.tasks[p.n++] = (task){T_STATS, (int)g};
    for (int i = 0; i < 3; i++)
        p.tasks[p.n++] = (task){T_SHA, i};

    pthread_t tid[MC_MAX_THREADS];
    int64_t started = 0;
    for (int64_t i = 1; i < threads; i++) {
        if (pthread_create(&tid[started], NULL, worker, &p) != 0)
            break; /* fewer helpers only means slower; results do not change */
        started++;
    }
    worker(&p);
    for (int64_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.lock);
    return 0;
}

/* ---- one length -------------------------------------------------------------- */

static void work_free(mc_case_work *w)
{
    gem_inputs_free(&w->in);
    gem_guard_free(w->out[0]);
    gem_guard_free(w->out[1]);
    free(w->ref);
    for (int g = 0; g < GEM_MC_MAX_GROUPS; g++)
        free(w->stats_scratch[g]);
    memset(w, 0, sizeof *w);
}

static json_t *seeds_json(uint64_t run, const gem_input_seeds *s)
{
    return json_pack("{s:o, s:o, s:o, s:o}", "run", gem_receipt_u64(run), "q",
                     gem_receipt_u64(s->q), "k", gem_receipt_u64(s->k), "v",
                     gem_receipt_u64(s->v));
}

uint64_t gem_mc_case_bytes(int64_t live)
{
    if (live < 1 || live > ((int64_t)1 << 40))
        return UINT64_MAX;
    const uint64_t l = (uint64_t)live;
    const uint64_t qo = (uint64_t)GEM_MC_N_Q_HEADS * GEM_MC_DK * sizeof(float);
    const uint64_t kv = (uint64_t)GEM_MC_N_KV_HEADS * (GEM_MC_DK + GEM_MC_DV) * sizeof(float);
    const uint64_t out = (uint64_t)GEM_MC_N_Q_HEADS * GEM_MC_DV;
    /* inputs, two guarded outputs, the double reference, the statistics
     * scratch, and per oracle run its accumulators and partials */
    return qo + kv * l + 2 * (out * sizeof(float) + GEM_GUARD_BYTES) + out * sizeof(double) +
           GEM_MC_N_KV_HEADS * l * sizeof(double) + 2 * 2 * out * sizeof(float) +
           ((uint64_t)1 << 20);
}

static void say(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

gem_status gem_mc_run_case(int64_t live, uint64_t seed, float scale, int64_t threads,
                           gem_mc_case *out, char *why, size_t why_cap)
{
    if (!out)
        return GEM_ERR_NULL;
    if (threads < 1 || threads > MC_MAX_THREADS) {
        say(why, why_cap, "threads %" PRId64 " outside [1, %d]", threads, MC_MAX_THREADS);
        return GEM_ERR_PARAM;
    }
    memset(out, 0, sizeof *out);
    mc_case_work w;
    memset(&w, 0, sizeof w);
    w.shape = (gem_attn_shape){GEM_MC_N_Q_HEADS, GEM_MC_N_KV_HEADS, GEM_MC_DK, GEM_MC_DV,
                               live, live, scale};
    const size_t n_out = (size_t)(GEM_MC_N_Q_HEADS * GEM_MC_DV);
    gem_mc_figures *fig = &out->fig;

    gem_status st = gem_inputs_make(&w.shape, seed, &w.in);
    if (st != GEM_OK) {
        say(why, why_cap, "inputs for %" PRId64 " tokens: %s", live, gem_status_str(st));
        goto out;
    }
    w.out[0] = gem_guard_alloc(n_out);
    w.out[1] = gem_guard_alloc(n_out);
    w.ref = calloc(n_out, sizeof(double));
    int oom = !w.out[0] || !w.out[1] || !w.ref;
    for (int g = 0; g < GEM_MC_N_KV_HEADS && !oom; g++) {
        w.stats_scratch[g] = malloc((size_t)live * sizeof(double));
        oom = !w.stats_scratch[g];
    }
    if (oom) {
        st = GEM_ERR_NOMEM;
        say(why, why_cap, "out of memory at %" PRId64 " tokens", live);
        goto out;
    }

    if (run_tasks(&w, threads) != 0) {
        st = GEM_ERR_NOMEM;
        say(why, why_cap, "could not start the worker pool");
        goto out;
    }
    for (int r = 0; r < 2; r++)
        if ((st = w.online_st[r]) != GEM_OK) {
            say(why, why_cap, "online oracle run %d at %" PRId64 " tokens: %s", r + 1, live,
                gem_status_str(st));
            goto out;
        }
    for (int g = 0; g < GEM_MC_N_KV_HEADS; g++)
        if ((st = w.ref_st[g]) != GEM_OK) {
            say(why, why_cap, "reference (KV head %d) at %" PRId64 " tokens: %s", g, live,
                gem_status_str(st));
            goto out;
        }
    for (int i = 0; i < 3; i++)
        if ((st = w.sha_st[i]) != GEM_OK) {
            say(why, why_cap, "input digest: %s", gem_status_str(st));
            goto out;
        }

    /* Figures. */
    fig->live = live;
    st = gem_compare_f32_f64(w.out[0], w.ref, n_out, &fig->cmp);
    if (st != GEM_OK) {
        say(why, why_cap, "compare: %s", gem_status_str(st));
        goto out;
    }
    if ((st = gem_sha256_hex(w.out[0], n_out * sizeof(float), out->out_sha[0])) != GEM_OK ||
        (st = gem_sha256_hex(w.out[1], n_out * sizeof(float), out->out_sha[1])) != GEM_OK ||
        (st = gem_sha256_hex(w.ref, n_out * sizeof(double), out->ref_sha)) != GEM_OK) {
        say(why, why_cap, "output digest failed");
        goto out;
    }
    memcpy(out->in_sha, w.in_sha, sizeof out->in_sha);
    out->seeds = w.in.seeds;
    fig->finite = fig->cmp.nonfinite == 0;
    for (int r = 0; r < 2; r++) {
        size_t unwritten = 0;
        int guard_ok = 0;
        gem_guard_check(w.out[r], n_out, &unwritten, &guard_ok);
        fig->unwritten[r] = unwritten;
        fig->guard_ok[r] = guard_ok;
    }
    fig->deterministic = !strcmp(out->out_sha[0], out->out_sha[1]) &&
                         memcmp(w.out[0], w.out[1], n_out * sizeof(float)) == 0;

    score_stats all = w.stats[0];
    for (int g = 1; g < GEM_MC_N_KV_HEADS; g++) { /* fixed order */
        const score_stats *b = &w.stats[g];
        all.sum += b->sum;
        all.sumsq += b->sumsq;
        all.count += b->count;
        all.min = fmin(all.min, b->min);
        all.max = fmax(all.max, b->max);
        all.max_weight = fmax(all.max_weight, b->max_weight);
        all.min_eff = fmin(all.min_eff, b->min_eff);
    }
    fig->score_mean = all.sum / all.count;
    double var = all.sumsq / all.count - fig->score_mean * fig->score_mean;
    fig->score_std = sqrt(var > 0.0 ? var : 0.0);
    fig->score_min = all.min;
    fig->score_max = all.max;
    fig->max_weight = all.max_weight;
    fig->min_effective_tokens = all.min_eff;
    gem_mc_gates(fig);
    st = GEM_OK;
out:
    work_free(&w);
    return st;
}

/* The receipt's case object of one length. NULL when out of memory. */
static json_t *case_json(const gem_mc_case *k, uint64_t seed, float scale)
{
    const gem_mc_figures *fig = &k->fig;
    const gem_attn_shape shape = {GEM_MC_N_Q_HEADS, GEM_MC_N_KV_HEADS, GEM_MC_DK, GEM_MC_DV,
                                  fig->live, fig->live, scale};
    json_t *c = json_pack(
        "{s:I, s:o, s:o, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:b, s:b, s:{s:I, s:I}, "
        "s:{s:b, s:b}, s:o, s:{s:o, s:o, s:o, s:o, s:o, s:o}, s:{s:b, s:b, s:b, s:b, s:b, s:b}, "
        "s:s}",
        "live", (json_int_t)fig->live, "geometry", gem_receipt_geometry(&shape), "seeds",
        seeds_json(seed, &k->seeds), "input_sha256", "q", k->in_sha[0], "k", k->in_sha[1], "v",
        k->in_sha[2], "output_sha256", "online", k->out_sha[0], "online_repeat", k->out_sha[1],
        "reference", k->ref_sha, "finite", fig->finite, "repeat_deterministic",
        fig->deterministic, "unwritten", "online", (json_int_t)fig->unwritten[0],
        "online_repeat", (json_int_t)fig->unwritten[1], "guard_ok", "online", fig->guard_ok[0],
        "online_repeat", fig->guard_ok[1], "online_vs_reference",
        gem_receipt_compare(&fig->cmp), "scores", "mean", gem_receipt_real(fig->score_mean),
        "std", gem_receipt_real(fig->score_std), "min", gem_receipt_real(fig->score_min), "max",
        gem_receipt_real(fig->score_max), "max_softmax_weight",
        gem_receipt_real(fig->max_weight), "min_effective_tokens",
        gem_receipt_real(fig->min_effective_tokens), "gates", "correlation", fig->gate_corr,
        "nmse", fig->gate_nmse, "max_abs", fig->gate_max_abs, "finite", fig->finite,
        "repeat_deterministic", fig->deterministic, "output_written", fig->gate_written,
        "verdict", fig->pass ? "pass" : "fail");
    return c;
}

/* ---- gates (shared with the analyzer) --------------------------------------- */

void gem_mc_gates(gem_mc_figures *f)
{
    /* NaN compares false, so a non-finite figure fails every gate. */
    f->gate_corr = f->cmp.correlation >= GEM_MC_MIN_CORRELATION;
    f->gate_nmse = f->cmp.nmse <= GEM_MC_MAX_NMSE;
    f->gate_max_abs = f->cmp.max_abs < GEM_MC_MAX_ABS_BELOW;
    f->gate_written = f->unwritten[0] == 0 && f->unwritten[1] == 0 && f->guard_ok[0] &&
                      f->guard_ok[1];
    f->pass = f->gate_corr && f->gate_nmse && f->gate_max_abs && f->finite &&
              f->deterministic && f->gate_written;
}

/* ---- command line ------------------------------------------------------------- */

static void usage(FILE *f, const char *name)
{
    fprintf(f,
            "usage: %s [options]\n\n"
            "Audits the float online-softmax oracle (P=%d partials merged in order) against\n"
            "the double-precision direct softmax at 32 query heads, 4 KV heads, DK=DV=512,\n"
            "on seeded inputs (q, k, v uniform in [-1, 1)), at 8,191 / 8,192 / 8,193 /\n"
            "65,536 / 131,072 live tokens. Gates: correlation >= %.12f, NMSE <= %.3g,\n"
            "max abs error < %.3g, finite, repeat-deterministic (SHA-256 of two runs).\n"
            "Writes a JSON receipt (docs/receipts-merge-check.md) and a summary table.\n\n"
            "options:\n"
            "  --out PATH      receipt path (default %s)\n"
            "  --seed N        run seed; q/k/v seeds derive from it (default %" PRIu64 ")\n"
            "  --scale X       score scale (default %.9g = 1/sqrt(512)); the analyzer binds\n"
            "                  the default\n"
            "  --lengths LIST  live lengths, e.g. 8191,64K (default the design's five); for\n"
            "                  experiments only: the analyzer accepts only the design's set\n"
            "  --threads N     worker threads, 1..%d (default: online CPUs); results are\n"
            "                  identical for any value\n"
            "  -h, --help      this text\n\n"
            "exit status: 0 every gate passed, 1 a gate failed (receipt still written),\n"
            "2 bad usage or an error (no receipt)\n",
            name, GEM_MC_PARTITIONS, GEM_MC_MIN_CORRELATION, GEM_MC_MAX_NMSE,
            GEM_MC_MAX_ABS_BELOW, GEM_MC_DEFAULT_OUT, GEM_MC_DEFAULT_SEED,
            (double)GEM_MC_DEFAULT_SCALE, MC_MAX_THREADS);
}

static json_t *thresholds_json(void)
{
    return json_pack("{s:f, s:f, s:f}", "min_correlation", GEM_MC_MIN_CORRELATION, "max_nmse",
                     GEM_MC_MAX_NMSE, "max_abs_below", GEM_MC_MAX_ABS_BELOW);
}

int gem_cmd_merge_check(int argc, char **argv)
{
    const char *name = argv[0];
    const char *out_path = GEM_MC_DEFAULT_OUT;
    uint64_t seed = GEM_MC_DEFAULT_SEED;
    float scale = GEM_MC_DEFAULT_SCALE;
    int64_t lengths[MC_MAX_LENGTHS];
    size_t n_lengths = GEM_MC_N_LENGTHS;
    memcpy(lengths, gem_mc_design_lengths, sizeof gem_mc_design_lengths);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t threads = ncpu < 1 ? 1 : ncpu > MC_MAX_THREADS ? MC_MAX_THREADS : ncpu;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, name);
            return 0;
        } else if (!strcmp(a, "--out") && v) {
            out_path = v;
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            if (cli_parse_u64(v, &seed)) {
                cli_error(MC_CMD, "--seed '%s' is not an unsigned 64-bit decimal integer", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--scale") && v) {
            if (cli_parse_f32(v, FLT_MIN, FLT_MAX, &scale)) {
                cli_error(MC_CMD,
                          "--scale '%s' is not a positive decimal number that is a normal "
                          "float (no underflow to 0, no overflow)",
                          v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--lengths") && v) {
            if (cli_parse_i64_list(v, 1, 1 << 24, lengths, MC_MAX_LENGTHS, &n_lengths) ||
                n_lengths == 0) {
                cli_error(MC_CMD,
                          "--lengths '%s': expected up to %d comma-separated lengths in "
                          "[1, 16777216] (memory permitting)",
                          v, MC_MAX_LENGTHS);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            if (cli_parse_i64(v, 1, MC_MAX_THREADS, &threads)) {
                cli_error(MC_CMD, "--threads '%s' is not an integer in [1, %d]", v,
                          MC_MAX_THREADS);
                return 2;
            }
            i++;
        } else {
            cli_error(MC_CMD, "%s '%s' (see --help)",
                      (a[0] == '-' && !v) ? "missing value for" : "unknown argument", a);
            return 2;
        }
    }
    /* Before any work: the receipt path and the memory of the longest length. */
    if (cli_check_output(MC_CMD, "--out", out_path, NULL, 0) != 0)
        return 2;
    int64_t longest = 0;
    for (size_t i = 0; i < n_lengths; i++)
        longest = lengths[i] > longest ? lengths[i] : longest;
    char what[96];
    snprintf(what, sizeof what, "%" PRId64 " live tokens", longest);
    if (cli_check_memory(MC_CMD, what, gem_mc_case_bytes(longest)) != 0)
        return 2;

    json_t *doc = gem_receipt_new(GEM_MC_SCHEMA, GEM_MC_TOOL_NAME, cli_git_commit());
    json_t *positions = json_array();
    json_t *cases = json_array();
    int bad = !doc || !positions || !cases;
    for (size_t i = 0; i < n_lengths && !bad; i++)
        bad = json_array_append_new(positions, json_integer(lengths[i])) != 0;
    json_t *inputs = bad ? NULL
                         : json_pack("{s:s, s:f, s:f, s:o}", "distribution", GEM_MC_DISTRIBUTION,
                                     "lo", -1.0, "hi", 1.0, "scale",
                                     gem_receipt_real((double)scale));
    bad = bad || !inputs ||
          json_object_set_new(doc, "partitions", json_integer(GEM_MC_PARTITIONS)) ||
          json_object_set_new(doc, "inputs", inputs) ||
          json_object_set_new(doc, "seed", gem_receipt_u64(seed)) ||
          json_object_set_new(doc, "positions", json_incref(positions)) ||
          json_object_set_new(doc, "thresholds", thresholds_json());
    json_decref(positions);
    if (bad) {
        cli_error(MC_CMD, "out of memory building the receipt");
        json_decref(doc);
        json_decref(cases);
        return 2;
    }

    gem_mc_figures figs[MC_MAX_LENGTHS];
    int all_pass = 1;
    double t0 = cli_now();
    for (size_t i = 0; i < n_lengths; i++) {
        cli_progress("merge-check: %" PRId64 " live tokens (%zu of %zu), %" PRId64
                     " thread(s)",
                     lengths[i], i + 1, n_lengths, threads);
        gem_mc_case k;
        char why[256];
        gem_status st = gem_mc_run_case(lengths[i], seed, scale, threads, &k, why, sizeof why);
        if (st != GEM_OK) {
            cli_error(MC_CMD, "%s", why);
            json_decref(cases);
            json_decref(doc);
            return 2;
        }
        json_t *c = case_json(&k, seed, scale);
        if (!c || json_array_append_new(cases, c) != 0) {
            cli_error(MC_CMD, "out of memory building the receipt");
            json_decref(cases);
            json_decref(doc);
            return 2;
        }
        figs[i] = k.fig;
        all_pass &= figs[i].pass;
        cli_progress("merge-check: %" PRId64 " tokens: nmse %.3g, max abs %.3g, %s",
                     lengths[i], figs[i].cmp.nmse, figs[i].cmp.max_abs,
                     figs[i].pass ? "pass" : "FAIL");
    }
    if (json_object_set_new(doc, "cases", cases) ||
        json_object_set_new(doc, "verdict", json_string(all_pass ? "pass" : "fail"))) {
        cli_error(MC_CMD, "out of memory building the receipt");
        json_decref(doc);
        return 2;
    }

    char why[512];
    gem_status st = gem_receipt_save(out_path, doc, why, sizeof why);
    json_decref(doc);
    if (st != GEM_OK) {
        cli_error(MC_CMD, "cannot write the receipt '%s': %s", out_path, why);
        return 2;
    }

    printf("gem-online-merge-check: P=%d, %d query / %d KV heads, DK=DV=%d, f32, seed %" PRIu64
           ", scale %.9g\n",
           GEM_MC_PARTITIONS, GEM_MC_N_Q_HEADS, GEM_MC_N_KV_HEADS, GEM_MC_DK, seed,
           (double)scale);
    printf("inputs: q, k, v uniform in [-1, 1); scores = scale * q.k\n\n");
    printf("%8s  %-16s  %-9s  %-9s  %-6s  %-6s  %-8s  %-16s  %-9s  %s\n", "live",
           "correlation", "nmse", "max_abs", "finite", "determ", "score sd",
           "score range", "max w", "verdict");
    for (size_t i = 0; i < n_lengths; i++) {
        const gem_mc_figures *f = &figs[i];
        printf("%8" PRId64 "  %.14f  %-9.3g  %-9.3g  %-6s  %-6s  %-8.4f  [%6.3f, %6.3f]  "
               "%-9.3g  %s\n",
               f->live, f->cmp.correlation, f->cmp.nmse, f->cmp.max_abs,
               f->finite ? "yes" : "NO", f->deterministic ? "yes" : "NO", f->score_std,
               f->score_min, f->score_max, f->max_weight, f->pass ? "pass" : "FAIL");
    }
    printf("\ngates: correlation >= %.12f, nmse <= %.3g, max_abs < %.3g, finite, "
           "repeat-deterministic\n",
           GEM_MC_MIN_CORRELATION, GEM_MC_MAX_NMSE, GEM_MC_MAX_ABS_BELOW);
    printf("verdict: %s   (%.1f s)   receipt: %s\n", all_pass ? "pass" : "FAIL",
           cli_now() - t0, out_path);
    return all_pass ? 0 : 1;
}
