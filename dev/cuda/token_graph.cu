/*
token_graph: a whole decode token of the model as one CUDA graph, against the token the library
queues kernel by kernel on its stream (gem_session_eval), in the same process and on the same
session.

The library queues about 10 kernels a layer (650 for the 31B dimensions), each a programmatic
dependent of the one before (src/cuda/gem_pdl.cuh), then waits once at the token's end. This
program captures one token's queue (gem_session_dev_enqueue) into a graph, the programmatic
launches becoming programmatic edges, and replays it. A graph fixes the position, the token and
every layer's rows, so a replay repeats one token: enough to time it, and to check it against
the stream. Before anything is timed, the graph's logits must equal the stream's bit for bit at
the same position (the same kernels on the same inputs).

Timing, per context, in rounds A B B A (A: one stream token, the position advancing; B: one
replay at the position of the capture): GPU time between events recorded on the stream before
the first kernel and after the last copy (the same work in both), host time of the whole call,
and for A the host time of queueing alone. Then the host cost a graph a token would add: the
capture, the instantiation, and cudaGraphExecUpdate from a capture at the next position (the
updated graph checked against the stream again).

Then what a decode loop would run with a graph a token (D): two executable graphs in turn;
while the GPU runs token t from one, the host captures token t + 1 and updates the other into
it, then waits for t and launches t + 1 at once. D's logits over 3 tokens must equal the
stream's at the same positions bit for bit, from the same sliding rings (saved before the
stream's tokens and restored after them: a full ring's oldest rows, which a token reads, are
those the next tokens overwrite; run 216 compared without the restore and saw other logits);
where they differ it says which tokens and tries D three other ways (capturing only after each
token finished, instantiating anew, both) and the stream again. Then runs of 5 tokens, A D D A,
each timed by the host's clock from the first launch to the last token's result (the decode
loop's rate). Last, greedy decoding in one call as a library function would run it (E), each
token's id read on the device from the argmax before it (gem_session_dev_enqueue_at), checked
against the stream fed its argmax (the same tokens, the same logits one token on) and timed in
runs of 5 tokens, A E1 E2 E2 E1 A:
  - E1 (run 217's gem_session_greedy): a call captures its first token with the GPU idle and
    instantiates two executables; run 217 measured it at 1.045-1.096 of the stream's time;
  - E2: the call's first token queued on the stream kernel by kernel while the second's graph is
    captured, and the two executables kept from call to call (updated, not instantiated).

./token_graph --model F [--random-weights S] [--context 8192,131072] [--rounds 10]
              [--kv-dtype f32|bf16]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gem/model.h"
#include "model/model_internal.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* median, min and max of n values (sorted in place) */
static void stats(double *v, int n, double out[3])
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    out[0] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    out[1] = v[0];
    out[2] = v[n - 1];
}

/* The token at the session's position captured into an executable graph (logits or argmax
 * copied out as gem_session_dev_enqueue does); *cap_s, *inst_s: the host seconds of each. */
static cudaGraph_t capture(gem_session *s, cudaStream_t st, int32_t tok, int argmax,
                           double *cap_s)
{
    cudaGraph_t g = NULL;
    const double t0 = now_s();
    cudaCheck(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
    const gem_status e = gem_session_dev_enqueue(s, tok, !argmax, argmax);
    cudaCheck(cudaStreamEndCapture(st, &g));
    *cap_s = now_s() - t0;
    if (e != GEM_OK) {
        fprintf(stderr, "capture: gem_session_dev_enqueue: %s\n", gem_status_str(e));
        exit(1);
    }
    return g;
}

/* As capture, the token's id read on the device at dtok (gem_session_dev_enqueue_at), argmax
 * copied out. */
static cudaGraph_t capture_at(gem_session *s, cudaStream_t st, const int32_t *dtok)
{
    cudaGraph_t g = NULL;
    cudaCheck(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
    const gem_status e = gem_session_dev_enqueue_at(s, dtok, 0, 1);
    cudaCheck(cudaStreamEndCapture(st, &g));
    if (e != GEM_OK) {
        fprintf(stderr, "capture: gem_session_dev_enqueue_at: %s\n", gem_status_str(e));
        exit(1);
    }
    return g;
}

/* Kernel nodes, edges, and the edges that are programmatic, of g. */
static void count_graph(cudaGraph_t g, size_t *kernels, size_t *edges, size_t *programmatic)
{
    size_t n = 0;
    cudaCheck(cudaGraphGetNodes(g, NULL, &n));
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n * sizeof *nodes);
    cudaCheck(cudaGraphGetNodes(g, nodes, &n));
    *kernels = 0;
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType t;
        cudaCheck(cudaGraphNodeGetType(nodes[i], &t));
        *kernels += t == cudaGraphNodeTypeKernel;
    }
    free(nodes);
    size_t ne = 0;
    cudaCheck(cudaGraphGetEdges(g, NULL, NULL, NULL, &ne));
    cudaGraphNode_t *from = (cudaGraphNode_t *)malloc((ne + 1) * sizeof *from);
    cudaGraphNode_t *to = (cudaGraphNode_t *)malloc((ne + 1) * sizeof *to);
    cudaGraphEdgeData *ed = (cudaGraphEdgeData *)malloc((ne + 1) * sizeof *ed);
    cudaCheck(cudaGraphGetEdges(g, from, to, ed, &ne));
    *edges = ne;
    *programmatic = 0;
    for (size_t i = 0; i < ne; i++)
        *programmatic += ed[i].type == cudaGraphDependencyTypeProgrammatic;
    free(from);
    free(to);
    free(ed);
}

/* 1 when executable x (a token at the session's position p) gives the stream's logits there
 * bit for bit: the stream's token at p, then x replayed at p; the position ends at p + 1.
 * la, lb: (nv) host scratch. */
static int same_as_stream(gem_session *s, cudaStream_t st, cudaGraphExec_t x, int32_t tok,
                          float *la, float *lb, int64_t nv)
{
    const int64_t p = s->pos;
    GEM_TRY(gem_session_eval(s, tok, la));
    s->pos = p;
    cudaCheck(cudaGraphLaunch(x, st));
    GEM_TRY(gem_session_dev_finish(s, lb, NULL, 0));
    return !memcmp(la, lb, (size_t)nv * sizeof(float));
}

static int reinstantiated; /* D's updates that the runtime refused (a new executable then) */
static int refused_as[16]; /* ... by cudaGraphExecUpdateResult (the runtime's reason) */

/* "N" or "N (K for reason R, ...)": the refusals so far and their reasons; then counts anew */
static void print_refusals(long long context, const char *who)
{
    static const char *const why[] = {"success", "error", "topology changed",
                                      "node type changed", "function changed",
                                      "parameters changed", "not supported",
                                      "unsupported function change", "attributes changed"};
    printf("context %lld: %s updates refused (a new executable instead): %d", context, who,
           reinstantiated);
    const char *sep = " (";
    for (int r = 0; r < 16; r++)
        if (refused_as[r]) {
            printf("%s%d for %s", sep, refused_as[r],
                   r < (int)(sizeof why / sizeof why[0]) ? why[r] : "reason unknown");
            sep = ", ";
        }
    printf("%s\n", reinstantiated ? ")" : "");
    reinstantiated = 0;
    memset(refused_as, 0, sizeof refused_as);
}

/* *x updated into g, or re-instantiated from it where the runtime refuses the update */
static void update_exec(cudaGraphExec_t *x, cudaGraph_t g)
{
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(*x, g, &info) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaCheck(cudaGraphExecDestroy(*x));
        cudaCheck(cudaGraphInstantiate(x, g, 0));
        reinstantiated++;
        refused_as[(unsigned)info.result < 16 ? (unsigned)info.result : 15]++;
    }
}

/* D: n tokens of tok from the session's position, each launched from a graph captured (and
 * an executable updated into it) while the token before ran; logits (n x n_vocab, host) when
 * not NULL, else the argmax. Returns the host seconds from the first launch to the last
 * result; *prep_s gets the host seconds of the captures and updates. */
static void fresh_exec(cudaGraphExec_t *x, cudaGraph_t g)
{
    cudaCheck(cudaGraphExecDestroy(*x));
    cudaCheck(cudaGraphInstantiate(x, g, 0));
}

/* D's two ways of taking a token's graph, for the checks: D_AFTER captures token t + 1 only
 * once token t has finished (no capture while the GPU runs), D_FRESH instantiates each graph
 * anew instead of updating an executable. */
enum { D_AFTER = 1, D_FRESH = 2 };

static double d_run_as(gem_session *s, cudaStream_t st, cudaGraphExec_t xe[2], int32_t tok,
                       int n, float *logits, int64_t nv, double *prep_s, int how)
{
    const int argmax = logits == NULL;
    void (*take)(cudaGraphExec_t *, cudaGraph_t) = how & D_FRESH ? fresh_exec : update_exec;
    int32_t amax = -1;
    double cap = 0, prep = 0;
    cudaGraph_t g = capture(s, st, tok, argmax, &cap); /* the first token's, before the clock */
    take(&xe[0], g);
    cudaCheck(cudaGraphDestroy(g));
    const double t0 = now_s();
    for (int i = 0; i < n; i++) {
        if (i > 0 && (how & D_AFTER)) { /* this token's graph, the GPU idle */
            g = capture(s, st, tok, argmax, &cap);
            take(&xe[i % 2], g);
            cudaCheck(cudaGraphDestroy(g));
        }
        cudaCheck(cudaGraphLaunch(xe[i % 2], st));
        if (i + 1 < n && !(how & D_AFTER)) { /* the next token's graph while this one runs */
            const double t1 = now_s();
            s->pos++;
            g = capture(s, st, tok, argmax, &cap);
            s->pos--;
            take(&xe[(i + 1) % 2], g);
            cudaCheck(cudaGraphDestroy(g));
            prep += now_s() - t1;
        }
        GEM_TRY(gem_session_dev_finish(s, logits ? logits + (size_t)i * (size_t)nv : NULL,
                                       argmax ? &amax : NULL, 0));
    }
    const double t = now_s() - t0;
    *prep_s = prep;
    return t;
}

static double d_run(gem_session *s, cudaStream_t st, cudaGraphExec_t xe[2], int32_t tok, int n,
                    float *logits, int64_t nv, double *prep_s)
{
    return d_run_as(s, st, xe, tok, n, logits, nv, prep_s, 0);
}

/* The sliding layers' rings, saved (dir 0) into or restored (dir 1) from device copies (save:
 * n_layers pointers, a layer's pair of copies allocated on the first save). A token run again
 * at a position sees its ring as it was before the first run only when the ring is restored:
 * once a ring is full, the tokens after a position overwrite rows that the token at it reads
 * (the oldest of its window). */
static void rings(gem_session *s, void **save, int dir)
{
    const gem_model *m = s->m;
    for (int64_t li = 0; li < m->hp.n_layers; li++) {
        const gem_layer *l = &m->layers[li];
        if (!l->swa)
            continue;
        const size_t bytes =
            (size_t)s->cap[li] * (size_t)l->n_head_kv * (size_t)l->head_dim * s->kv_es;
        if (!save[li])
            cudaCheck(cudaMalloc(&save[li], 2 * bytes));
        char *const b = (char *)save[li];
        void *const kc = s->kc[li], *const vc = s->vc[li];
        if (dir == 0) {
            if (kc)
                cudaCheck(cudaMemcpy(b, kc, bytes, cudaMemcpyDeviceToDevice));
            cudaCheck(cudaMemcpy(b + bytes, vc, bytes, cudaMemcpyDeviceToDevice));
        } else {
            if (kc)
                cudaCheck(cudaMemcpy(kc, b, bytes, cudaMemcpyDeviceToDevice));
            cudaCheck(cudaMemcpy(vc, b + bytes, bytes, cudaMemcpyDeviceToDevice));
        }
    }
}

/* Where n tokens' logits (n x nv) differ: per token the count of differing values and the
 * largest difference; 1 when all are equal bit for bit. */
static int report_tokens(const char *what, const float *a, const float *b, int n, int64_t nv)
{
    int same = 1;
    for (int i = 0; i < n; i++) {
        int64_t nd = 0;
        double mx = 0;
        for (int64_t j = 0; j < nv; j++) {
            const float x = a[(size_t)i * (size_t)nv + (size_t)j];
            const float y = b[(size_t)i * (size_t)nv + (size_t)j];
            if (memcmp(&x, &y, sizeof x)) {
                nd++;
                const double dd = fabs((double)x - (double)y);
                mx = dd > mx || dd != dd ? dd : mx;
            }
        }
        if (nd) {
            printf("  %s, token %d: %lld of %lld logits differ, largest difference %.3e\n", what,
                   i, (long long)nd, (long long)nv, mx);
            same = 0;
        }
    }
    if (same)
        printf("  %s: bit for bit\n", what);
    return same;
}

/* *x runnable as g: instantiated when NULL, else updated (update_exec) */
static void take_exec(cudaGraphExec_t *x, cudaGraph_t g)
{
    if (*x)
        update_exec(x, g);
    else
        cudaCheck(cudaGraphInstantiate(x, g, 0));
}

enum { E_STREAM_FIRST = 1 }; /* E2; without it E1 */

/* E: n greedy tokens from tok at the session's position as one library call would run them,
 * out (n) the argmax after each; keep: E2's executables, kept between calls (NULL at first).
 * Every token after the first is a graph captured while the token before runs, its id read on
 * the device where that token's argmax lands, launched once that argmax is on the host. */
static void e_run(gem_session *s, cudaStream_t st, cudaGraphExec_t keep[2], int32_t tok, int n,
                  int32_t *out, int how)
{
    cudaGraphExec_t own[2] = {NULL, NULL};
    cudaGraphExec_t *x = how & E_STREAM_FIRST ? keep : own;
    const int32_t *next_id = gem_session_dev_argmax(s);
    double cap = 0;
    if (how & E_STREAM_FIRST) {
        GEM_TRY(gem_session_dev_enqueue(s, tok, 0, 1));
    } else {
        cudaGraph_t g = capture(s, st, tok, 1, &cap);
        take_exec(&x[0], g);
        cudaCheck(cudaGraphDestroy(g));
        cudaCheck(cudaGraphLaunch(x[0], st));
    }
    for (int i = 0; i < n; i++) {
        if (i + 1 < n) {
            s->pos++;
            cudaGraph_t g = capture_at(s, st, next_id);
            s->pos--;
            take_exec(&x[(i + 1) % 2], g);
            cudaCheck(cudaGraphDestroy(g));
        }
        GEM_TRY(gem_session_dev_finish(s, NULL, &out[i], 0));
        if (i + 1 < n)
            cudaCheck(cudaGraphLaunch(x[(i + 1) % 2], st));
    }
    for (int k = 0; k < 2; k++)
        if (own[k])
            cudaCheck(cudaGraphExecDestroy(own[k]));
}

static int parse_list(const char *s, int64_t *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 2)
            return -1;
        out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    uint64_t seed = 0;
    int64_t ctx[8] = {8192, 131072};
    int n_ctx = 2, rounds = 10;
    gem_dtype kvt = GEM_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v)
            model = v, i++;
        else if (!strcmp(a, "--random-weights") && v)
            seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--context") && v) {
            if ((n_ctx = parse_list(v, ctx, 8)) < 1) {
                fprintf(stderr, "--context: a list of integers >= 2\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--rounds") && v)
            rounds = atoi(v), i++;
        else if (!strcmp(a, "--kv-dtype") && v) {
            if (!strcmp(v, "f32"))
                kvt = GEM_DTYPE_F32;
            else if (!strcmp(v, "bf16"))
                kvt = GEM_DTYPE_BF16;
            else {
                fprintf(stderr, "--kv-dtype: f32 or bf16\n");
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "usage: token_graph --model F [--random-weights S] [--context "
                            "8192,131072] [--rounds 10] [--kv-dtype f32|bf16]\n");
            return 2;
        }
    }
    if (!model || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "token_graph: --model is required; --rounds 1..1000\n");
        return 2;
    }
    char err[512] = "";
    gem_model *m = NULL;
    GEM_TRY(gem_model_load(model, &m, err, sizeof err));
    if (gem_model_upload(m, seed, err, sizeof err) != GEM_OK) {
        fprintf(stderr, "upload: %s\n", err);
        return 1;
    }
    const gem_hparams *hp = gem_model_hparams(m);
    const int64_t per_ctx = 4 * (int64_t)rounds + 50 * (int64_t)(rounds < 3 ? 3 : rounds) + 64;
    const int64_t cap_tokens = ctx[n_ctx - 1] + per_ctx;
    gem_session_opts so = {0, cap_tokens, GEM_ROUTE_FUSED, 0, 0, kvt, 0, GEM_BACKEND_CUDA};
    gem_session *s = NULL;
    if (gem_session_create(m, &so, &s, err, sizeof err) != GEM_OK) {
        fprintf(stderr, "session: %s\n", err);
        return 1;
    }
    GEM_TRY(gem_session_time_stages(s, 0));
    cudaStream_t st = (cudaStream_t)gem_session_dev_stream(s);
    const int64_t nv = hp->n_vocab;
    float *la = (float *)malloc((size_t)nv * sizeof(float));
    float *lb = (float *)malloc((size_t)nv * sizeof(float));
    if (!la || !lb)
        return 1;
    const int32_t tok = (int32_t)(4 % nv);
    for (int i = 0; i < 8; i++) /* a short prompt, then the caches filled by repetition */
        GEM_TRY(gem_session_eval(s, (int32_t)((7919 * (i + 1)) % nv), la));
    printf("token_graph: %s, %s K/V, %d rounds A B B A a context\n", gem_session_describe(s),
           kvt == GEM_DTYPE_F32 ? "F32" : "BF16", rounds);
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    int fail = 0;
    for (int ci = 0; ci < n_ctx; ci++) {
        if (ctx[ci] < gem_session_pos(s)) {
            fprintf(stderr, "--context %lld is behind the session's position %lld\n",
                    (long long)ctx[ci], (long long)gem_session_pos(s));
            return 2;
        }
        GEM_TRY(gem_session_fill_repeat(s, ctx[ci]));
        GEM_TRY(gem_session_eval(s, tok, la)); /* warm-up */
        /* the check: a graph of the token at p against the stream's token at p */
        const int64_t p = gem_session_pos(s);
        double cap_s = 0, inst_s = 0;
        cudaGraph_t gl = capture(s, st, tok, 0, &cap_s);
        cudaGraphExec_t xl;
        double t0 = now_s();
        cudaCheck(cudaGraphInstantiate(&xl, gl, 0));
        inst_s = now_s() - t0;
        size_t nk = 0, ne = 0, npe = 0;
        count_graph(gl, &nk, &ne, &npe);
        const int same = same_as_stream(s, st, xl, tok, la, lb, nv);
        printf("context %lld: graph of %zu kernels, %zu edges (%zu programmatic); capture %.3f "
               "ms, instantiate %.3f ms; logits at %lld %s the stream's\n",
               (long long)ctx[ci], nk, ne, npe, 1e3 * cap_s, 1e3 * inst_s, (long long)p,
               same ? "bit for bit" : "DIFFER from");
        fail |= !same;
        /* the timed graph: argmax, as a decode loop runs */
        s->pos = p;
        double cap2 = 0;
        cudaGraph_t ga = capture(s, st, tok, 1, &cap2);
        cudaGraphExec_t xa;
        cudaCheck(cudaGraphInstantiate(&xa, ga, 0));
        const int nt = 2 * rounds;
        double *ga_ms = (double *)calloc((size_t)nt, sizeof(double));
        double *gb_ms = (double *)calloc((size_t)nt, sizeof(double));
        double *ha_ms = (double *)calloc((size_t)nt, sizeof(double));
        double *hb_ms = (double *)calloc((size_t)nt, sizeof(double));
        double *qa_ms = (double *)calloc((size_t)nt, sizeof(double));
        int ia = 0, ib = 0;
        int32_t amax_a = -1, amax_b = -1;
        s->pos = p + 1; /* A continues after the checked token */
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 4; k++) {
                const int is_a = k == 0 || k == 3;
                float ms = 0;
                if (is_a) {
                    t0 = now_s();
                    cudaCheck(cudaEventRecord(e0, st));
                    GEM_TRY(gem_session_dev_enqueue(s, tok, 0, 1));
                    cudaCheck(cudaEventRecord(e1, st));
                    qa_ms[ia] = 1e3 * (now_s() - t0);
                    GEM_TRY(gem_session_dev_finish(s, NULL, &amax_a, 1));
                    ha_ms[ia] = 1e3 * (now_s() - t0);
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    ga_ms[ia++] = ms;
                } else {
                    const int64_t keep = s->pos;
                    s->pos = p;
                    t0 = now_s();
                    cudaCheck(cudaEventRecord(e0, st));
                    cudaCheck(cudaGraphLaunch(xa, st));
                    cudaCheck(cudaEventRecord(e1, st));
                    GEM_TRY(gem_session_dev_finish(s, NULL, &amax_b, 0));
                    hb_ms[ib] = 1e3 * (now_s() - t0);
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    gb_ms[ib++] = ms;
                    s->pos = keep;
                }
            }
        double a[3], b[3], ha[3], hb[3], qa[3];
        stats(ga_ms, nt, a);
        stats(gb_ms, nt, b);
        stats(ha_ms, nt, ha);
        stats(hb_ms, nt, hb);
        stats(qa_ms, nt, qa);
        printf("context %lld GPU ms: stream %.4f (%.4f-%.4f), graph %.4f (%.4f-%.4f), "
               "graph/stream %.4f\n",
               (long long)ctx[ci], a[0], a[1], a[2], b[0], b[1], b[2], b[0] / a[0]);
        printf("context %lld host ms a call: stream %.4f (%.4f-%.4f; queueing %.4f, "
               "%.4f-%.4f), graph %.4f (%.4f-%.4f)\n",
               (long long)ctx[ci], ha[0], ha[1], ha[2], qa[0], qa[1], qa[2], hb[0], hb[1],
               hb[2]);
        /* the host cost of a graph a token: a capture at the next position and the update */
        const int64_t q = s->pos;
        double cap3 = 0;
        cudaGraph_t gn = capture(s, st, tok, 0, &cap3);
        cudaGraphExecUpdateResultInfo info;
        t0 = now_s();
        const cudaError_t ue = cudaGraphExecUpdate(xl, gn, &info);
        const double upd_s = now_s() - t0;
        if (ue != cudaSuccess) {
            printf("context %lld: cudaGraphExecUpdate refused (%s, result %d)\n",
                   (long long)ctx[ci], cudaGetErrorString(ue), (int)info.result);
            (void)cudaGetLastError();
            fail = 1;
        } else {
            const int same2 = same_as_stream(s, st, xl, tok, la, lb, nv);
            printf("context %lld: a token's new graph: capture %.3f ms, update %.3f ms; its "
                   "logits at %lld %s the stream's\n",
                   (long long)ctx[ci], 1e3 * cap3, 1e3 * upd_s, (long long)q,
                   same2 ? "bit for bit" : "DIFFER from");
            fail |= !same2;
        }
        fail |= amax_a < 0 || amax_b < 0;
        /* D: checked over 3 tokens against the stream's at the same positions */
        {
            const int nc = 3, nr = 5, runs = rounds < 3 ? 3 : rounds;
            float *ls = (float *)malloc((size_t)nc * (size_t)nv * sizeof(float));
            float *ld = (float *)malloc((size_t)nc * (size_t)nv * sizeof(float));
            if (!ls || !ld)
                return 1;
            cudaGraphExec_t xe[2];
            /* from any token's graph: each is updated before its use */
            cudaCheck(cudaGraphInstantiate(&xe[0], gn, 0));
            cudaCheck(cudaGraphInstantiate(&xe[1], gn, 0));
            const int64_t r0 = s->pos;
            void **ring = (void **)calloc((size_t)hp->n_layers, sizeof(void *));
            if (!ring)
                return 1;
            rings(s, ring, 0);
            for (int i = 0; i < nc; i++)
                GEM_TRY(gem_session_eval(s, tok, ls + (size_t)i * (size_t)nv));
            s->pos = r0;
            rings(s, ring, 1);
            double prep = 0;
            (void)d_run(s, st, xe, tok, nc, ld, nv, &prep);
            const int same3 = !memcmp(ls, ld, (size_t)nc * (size_t)nv * sizeof(float)) &&
                              s->pos == r0 + nc;
            printf("context %lld: a graph a token (D), logits of %d tokens from %lld %s the "
                   "stream's\n",
                   (long long)ctx[ci], nc, (long long)r0, same3 ? "bit for bit" : "DIFFER from");
            fail |= !same3;
            if (!same3) { /* where, and which part of D makes the difference */
                float *lx = (float *)malloc((size_t)nc * (size_t)nv * sizeof(float));
                if (!lx)
                    return 1;
                report_tokens("D against the stream", ls, ld, nc, nv);
                s->pos = r0; /* the stream again */
                rings(s, ring, 1);
                for (int i = 0; i < nc; i++)
                    GEM_TRY(gem_session_eval(s, tok, lx + (size_t)i * (size_t)nv));
                report_tokens("the stream again against the stream", ls, lx, nc, nv);
                static const char *const hows[3] = {"D capturing after each finish",
                                                    "D instantiating each graph anew",
                                                    "D after each finish, anew"};
                for (int hw = 1; hw <= 3; hw++) {
                    s->pos = r0;
                    rings(s, ring, 1);
                    (void)d_run_as(s, st, xe, tok, nc, lx, nv, &prep, hw);
                    report_tokens(hows[hw - 1], ls, lx, nc, nv);
                }
                s->pos = r0 + nc;
                free(lx);
            }
            for (int64_t li = 0; li < hp->n_layers; li++)
                if (ring[li])
                    cudaCheck(cudaFree(ring[li]));
            free(ring);
            double *da = (double *)calloc((size_t)(2 * runs), sizeof(double));
            double *dd = (double *)calloc((size_t)(2 * runs), sizeof(double));
            double *dp = (double *)calloc((size_t)(2 * runs), sizeof(double));
            int na = 0, nd = 0;
            for (int r = 0; r < runs; r++)
                for (int k = 0; k < 4; k++) {
                    if (k == 0 || k == 3) {
                        const double t1 = now_s();
                        for (int i = 0; i < nr; i++)
                            GEM_TRY(gem_session_eval_argmax(s, tok, &amax_a));
                        da[na++] = 1e3 * (now_s() - t1) / nr;
                    } else {
                        const double t = d_run(s, st, xe, tok, nr, NULL, nv, &prep);
                        dd[nd] = 1e3 * t / nr;
                        dp[nd++] = 1e3 * prep / (nr - 1);
                    }
                }
            double sa[3], sd[3], sp[3];
            stats(da, na, sa);
            stats(dd, nd, sd);
            stats(dp, nd, sp);
            printf("context %lld host ms a token, runs of %d: stream %.4f (%.4f-%.4f), graph a "
                   "token %.4f (%.4f-%.4f), D/A %.4f; capture and update %.4f ms a token "
                   "(%.4f-%.4f)\n",
                   (long long)ctx[ci], nr, sa[0], sa[1], sa[2], sd[0], sd[1], sd[2],
                   sd[0] / sa[0], sp[0], sp[1], sp[2]);
            print_refusals((long long)ctx[ci], "D's");
            /* E1 and E2 against the stream's gem_session_eval_argmax a token at a time, each
             * feeding its argmax back: the same tokens, and the logits of one more token the
             * same bits (the same cache), from the same rings; then runs of nr tokens */
            {
                void **ring2 = (void **)calloc((size_t)hp->n_layers, sizeof(void *));
                int32_t ta[8], te[8];
                cudaGraphExec_t keep[2] = {NULL, NULL};
                if (!ring2)
                    return 1;
                const int64_t e0 = s->pos;
                rings(s, ring2, 0);
                for (int i = 0; i < nc; i++)
                    GEM_TRY(gem_session_eval_argmax(s, i ? ta[i - 1] : tok, &ta[i]));
                GEM_TRY(gem_session_eval(s, ta[nc - 1], la));
                for (int how = 0; how < 2; how++) {
                    s->pos = e0;
                    rings(s, ring2, 1);
                    e_run(s, st, keep, tok, nc, te, how ? E_STREAM_FIRST : 0);
                    GEM_TRY(gem_session_eval(s, te[nc - 1], lb));
                    const int same_e = s->pos == e0 + nc + 1 &&
                                       !memcmp(ta, te, (size_t)nc * sizeof *ta) &&
                                       !memcmp(la, lb, (size_t)nv * sizeof *la);
                    printf("context %lld: E%d, %d tokens from %lld and the logits after them: %s "
                           "the stream's\n",
                           (long long)ctx[ci], how + 1, nc, (long long)e0,
                           same_e ? "bit for bit" : "DIFFER from");
                    fail |= !same_e;
                }
                for (int64_t li = 0; li < hp->n_layers; li++)
                    if (ring2[li])
                        cudaCheck(cudaFree(ring2[li]));
                free(ring2);
                /* runs of nr tokens, A E1 E2 E2 E1 A */
                double *e1 = (double *)calloc((size_t)(2 * runs), sizeof(double));
                double *e2 = (double *)calloc((size_t)(2 * runs), sizeof(double));
                if (!e1 || !e2)
                    return 1;
                int n1 = 0, n2 = 0;
                na = 0;
                for (int r = 0; r < runs; r++)
                    for (int k = 0; k < 6; k++) {
                        const double t1 = now_s();
                        int32_t out[8];
                        if (k == 0 || k == 5) {
                            int32_t prev = tok;
                            for (int i = 0; i < nr; i++)
                                GEM_TRY(gem_session_eval_argmax(s, prev, &prev));
                            da[na++] = 1e3 * (now_s() - t1) / nr;
                        } else if (k == 1 || k == 4) {
                            e_run(s, st, keep, tok, nr, out, 0);
                            e1[n1++] = 1e3 * (now_s() - t1) / nr;
                        } else {
                            e_run(s, st, keep, tok, nr, out, E_STREAM_FIRST);
                            e2[n2++] = 1e3 * (now_s() - t1) / nr;
                        }
                    }
                double s1[3], s2[3];
                stats(da, na, sa);
                stats(e1, n1, s1);
                stats(e2, n2, s2);
                printf("context %lld host ms a token, runs of %d fed their argmax: stream %.4f "
                       "(%.4f-%.4f), E1 %.4f (%.4f-%.4f), E2 %.4f (%.4f-%.4f); E1/A %.4f, E2/A "
                       "%.4f\n",
                       (long long)ctx[ci], nr, sa[0], sa[1], sa[2], s1[0], s1[1], s1[2], s2[0],
                       s2[1], s2[2], s1[0] / sa[0], s2[0] / sa[0]);
                print_refusals((long long)ctx[ci], "E's");
                for (int k = 0; k < 2; k++)
                    if (keep[k])
                        cudaCheck(cudaGraphExecDestroy(keep[k]));
                free(e1);
                free(e2);
            }
            cudaCheck(cudaGraphExecDestroy(xe[0]));
            cudaCheck(cudaGraphExecDestroy(xe[1]));
            free(ls);
            free(ld);
            free(da);
            free(dd);
            free(dp);
        }
        cudaCheck(cudaGraphExecDestroy(xa));
        cudaCheck(cudaGraphExecDestroy(xl));
        cudaCheck(cudaGraphDestroy(ga));
        cudaCheck(cudaGraphDestroy(gl));
        cudaCheck(cudaGraphDestroy(gn));
        free(ga_ms);
        free(gb_ms);
        free(ha_ms);
        free(hb_ms);
        free(qa_ms);
    }
    gem_session_free(s);
    gem_model_free(m);
    free(la);
    free(lb);
    printf("token_graph: %s\n", fail ? "FAILED" : "ok");
    return fail;
}
