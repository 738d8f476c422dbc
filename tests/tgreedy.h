/*
 * tgreedy: the checks of gem_session_greedy on a session of either backend, for test_model
 * (the CPU) and test_model_cuda (the GPU): against gem_session_eval_argmax one token at a
 * time, from the same prompt.
 */
#ifndef GEM_TGREEDY_H
#define GEM_TGREEDY_H

#include <stdlib.h>
#include <string.h>

#include "gem/model.h"
#include "tcheck.h"

/* on_token for the checks: counts the calls, checks each token against the expected one, and
 * stops at the stop-th call (0: never) */
typedef struct {
    const int32_t *want;
    int64_t calls, stop;
    int wrong;
} tgreedy_seen;

static int tgreedy_on_token(void *user, int32_t token)
{
    tgreedy_seen *w = (tgreedy_seen *)user;
    w->wrong |= token != w->want[w->calls];
    return ++w->calls == w->stop;
}

/* The prompt (n_prompt tokens; all but its last evaluated here) on session s, reset first. */
static gem_status tgreedy_prompt(gem_session *s, const int32_t *prompt, int64_t n_prompt)
{
    gem_session_reset(s);
    gem_status st = GEM_OK;
    for (int64_t i = 0; st == GEM_OK && i + 1 < n_prompt; i++)
        st = gem_session_eval(s, prompt[i], NULL);
    return st;
}

/* gem_session_greedy on s (its capacity at least n_prompt + steps): the same tokens as
 * gem_session_eval_argmax step by step, the same position, and the same cache (the logits of
 * one more token equal bit for bit); on_token sees every token and stops the loop where it
 * asks to; bad calls answer their status. */
static void tgreedy_check(gem_session *s, const int32_t *prompt, int64_t n_prompt, int64_t steps,
                          int64_t n_vocab)
{
    int32_t *want = malloc((size_t)steps * sizeof *want);
    int32_t *got = malloc((size_t)steps * sizeof *got);
    float *la = malloc((size_t)n_vocab * sizeof *la), *lb = malloc((size_t)n_vocab * sizeof *lb);
    if (!TCHECK(want && got && la && lb))
        goto out;
    /* one token at a time */
    TCHECK_STATUS(tgreedy_prompt(s, prompt, n_prompt), GEM_OK);
    gem_status st = GEM_OK;
    for (int64_t k = 0; st == GEM_OK && k < steps; k++)
        st = gem_session_eval_argmax(s, k ? want[k - 1] : prompt[n_prompt - 1], &want[k]);
    TCHECK_STATUS(st, GEM_OK);
    const int64_t pos = gem_session_pos(s);
    TCHECK_EQ_I64(pos, n_prompt - 1 + steps);
    TCHECK_STATUS(gem_session_eval(s, want[steps - 1], la), GEM_OK);
    /* the loop, with and without on_token */
    for (int cb = 0; cb < 2; cb++) {
        TCHECK_STATUS(tgreedy_prompt(s, prompt, n_prompt), GEM_OK);
        memset(got, 0xff, (size_t)steps * sizeof *got);
        tgreedy_seen seen = {want, 0, 0, 0};
        int64_t made = -1;
        gem_stage_times t0, t1;
        gem_session_times(s, &t0);
        TCHECK_STATUS(gem_session_greedy(s, prompt[n_prompt - 1], steps, got, &made,
                                         cb ? tgreedy_on_token : NULL, cb ? &seen : NULL),
                      GEM_OK);
        TCHECK_EQ_I64(made, steps);
        /* the stage times: the CPU's loop adds its tokens', CUDA's graphs leave them */
        gem_session_times(s, &t1);
        const int cuda = gem_session_backend(s) == GEM_BACKEND_CUDA;
        TCHECK_EQ_I64(t1.tokens, t0.tokens + (cuda ? 0 : steps));
        TCHECK(cuda ? t1.total == t0.total : t1.total > t0.total);
        TCHECK(memcmp(got, want, (size_t)steps * sizeof *got) == 0);
        TCHECK_EQ_I64(gem_session_pos(s), pos);
        TCHECK(!cb || (seen.calls == steps && !seen.wrong));
        TCHECK_STATUS(gem_session_eval(s, got[steps - 1], lb), GEM_OK);
        TCHECK(memcmp(la, lb, (size_t)n_vocab * sizeof *la) == 0);
    }
    /* a stop after the third token: three tokens, three positions; then the loop goes on
     * from there to the same tokens */
    if (steps > 4) {
        TCHECK_STATUS(tgreedy_prompt(s, prompt, n_prompt), GEM_OK);
        tgreedy_seen seen = {want, 0, 3, 0};
        int64_t made = -1;
        TCHECK_STATUS(gem_session_greedy(s, prompt[n_prompt - 1], steps, got, &made,
                                         tgreedy_on_token, &seen),
                      GEM_OK);
        TCHECK_EQ_I64(made, 3);
        TCHECK(seen.calls == 3 && !seen.wrong && memcmp(got, want, 3 * sizeof *got) == 0);
        TCHECK_EQ_I64(gem_session_pos(s), n_prompt - 1 + 3);
        TCHECK_STATUS(gem_session_greedy(s, got[2], steps - 3, got + 3, &made, NULL, NULL),
                      GEM_OK);
        TCHECK_EQ_I64(made, steps - 3);
        TCHECK(memcmp(got, want, (size_t)steps * sizeof *got) == 0);
        TCHECK_STATUS(gem_session_eval(s, got[steps - 1], lb), GEM_OK);
        TCHECK(memcmp(la, lb, (size_t)n_vocab * sizeof *la) == 0);
    }
    /* one token: the last prompt token's argmax */
    TCHECK_STATUS(tgreedy_prompt(s, prompt, n_prompt), GEM_OK);
    int64_t made = -1;
    TCHECK_STATUS(gem_session_greedy(s, prompt[n_prompt - 1], 1, got, &made, NULL, NULL), GEM_OK);
    TCHECK(made == 1 && got[0] == want[0]);
    /* bad calls: nothing evaluated, the position kept */
    const int64_t at = gem_session_pos(s);
    TCHECK_STATUS(gem_session_greedy(NULL, 0, 1, got, &made, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_session_greedy(s, 0, 1, NULL, &made, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_session_greedy(s, 0, 1, got, NULL, NULL, NULL), GEM_ERR_NULL);
    made = -1;
    TCHECK_STATUS(gem_session_greedy(s, 0, 0, got, &made, NULL, NULL), GEM_ERR_RANGE);
    TCHECK_EQ_I64(made, 0);
    TCHECK_STATUS(gem_session_greedy(s, -1, 1, got, &made, NULL, NULL), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_session_greedy(s, (int32_t)n_vocab, 1, got, &made, NULL, NULL),
                  GEM_ERR_RANGE);
    TCHECK_STATUS(gem_session_greedy(s, 0, INT64_MAX, got, &made, NULL, NULL), GEM_ERR_RANGE);
    TCHECK_EQ_I64(gem_session_pos(s), at);
out:
    free(want);
    free(got);
    free(la);
    free(lb);
}

#endif /* GEM_TGREEDY_H */
