/*
 * The CPU thread pool (src/cpu_pool.c): every item of a run executes exactly once, on a
 * thread index in range, and the run returns only after all of them; whether the workers are
 * polling (runs back to back) or asleep (runs more than the polling window apart, so that the
 * wake-up path of both sides is taken); for runs of 1 item, fewer items than threads and many
 * more; a pool destroyed while its workers poll and while they sleep; bad arguments. Runs
 * with owned items (cpu_pool_run_owned) likewise, for every owned count from none to more
 * than the run has. The idle work: called with a thread index in range, the current argument
 * and sequence number, never again for a sequence number once it said it was done, again for
 * a new argument, and never once cpu_pool_set_idle(NULL) has returned.
 */
#define _DEFAULT_SOURCE 1 /* sysconf(_SC_NPROCESSORS_ONLN) */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_pool.h"
#include "tcheck.h"

typedef struct run_job {
    int64_t threads;
    atomic_int *hits;       /* (n): times item i ran */
    atomic_int bad_thread;  /* items that saw a thread index out of range */
    atomic_int running;     /* items running now */
    atomic_int max_running; /* the most seen at once */
} run_job;

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void count_item(void *ctx, int64_t item, int64_t thread)
{
    run_job *j = ctx;
    if (thread < 0 || thread >= j->threads)
        atomic_fetch_add(&j->bad_thread, 1);
    const int now = atomic_fetch_add(&j->running, 1) + 1;
    int seen = atomic_load(&j->max_running);
    while (now > seen && !atomic_compare_exchange_weak(&j->max_running, &seen, now))
        ;
    if (item % 7 == 0)
        sleep_us(50); /* some items slower, so that threads take several */
    atomic_fetch_add(&j->hits[item], 1);
    atomic_fetch_sub(&j->running, 1);
}

/* One run of n items, [0, owned) owned (-1: cpu_pool_run); 1 when every item ran once on a
 * valid thread and none is still running. */
static int owned_run(cpu_pool *pool, int64_t threads, int64_t n, int64_t owned, int *max_running)
{
    run_job j;
    j.threads = threads;
    j.hits = calloc((size_t)(n > 0 ? n : 1), sizeof *j.hits);
    atomic_init(&j.bad_thread, 0);
    atomic_init(&j.running, 0);
    atomic_init(&j.max_running, 0);
    for (int64_t i = 0; i < n; i++)
        atomic_init(&j.hits[i], 0);
    if (owned < 0)
        cpu_pool_run(pool, n, count_item, &j);
    else
        cpu_pool_run_owned(pool, n, owned, count_item, &j);
    int ok = atomic_load(&j.bad_thread) == 0 && atomic_load(&j.running) == 0;
    for (int64_t i = 0; i < n; i++)
        ok &= atomic_load(&j.hits[i]) == 1;
    if (max_running)
        *max_running = atomic_load(&j.max_running);
    free(j.hits);
    return ok;
}

static int one_run(cpu_pool *pool, int64_t threads, int64_t n, int *max_running)
{
    return owned_run(pool, threads, n, -1, max_running);
}

#define IDLE_STEPS 5 /* calls a thread's idle function wants for one argument */

typedef struct idle_job {
    int64_t threads;
    atomic_uint arg, seq; /* what the test last set: arg, and seq once known */
    atomic_int calls, bad, after_stop, stopped;
    struct {
        _Alignas(64) uint32_t seq;
        int steps; /* calls for seq */
    } per[8];
} idle_job;

static int idle_fn(void *ctx, uint32_t arg, uint32_t seq, int64_t thread)
{
    idle_job *j = ctx;
    atomic_fetch_add(&j->calls, 1);
    if (atomic_load(&j->stopped))
        atomic_fetch_add(&j->after_stop, 1);
    if (thread < 0 || thread >= j->threads) {
        atomic_fetch_add(&j->bad, 1);
        return 0;
    }
    /* the argument of this seq: the test sets arg before it asks for the next seq, and a
     * thread may still be at the previous one for one more call */
    if (arg != atomic_load(&j->arg) && seq == atomic_load(&j->seq))
        atomic_fetch_add(&j->bad, 1);
    if (j->per[thread].seq != seq) {
        j->per[thread].seq = seq;
        j->per[thread].steps = 0;
    }
    if (++j->per[thread].steps > IDLE_STEPS) /* called again after it said done */
        atomic_fetch_add(&j->bad, 1);
    return j->per[thread].steps < IDLE_STEPS;
}

int main(void)
{
    cpu_pool *p = NULL;
    TCHECK_STATUS(cpu_pool_create(0, &p), GEM_ERR_PARAM);
    TCHECK(p == NULL);
    TCHECK_STATUS(cpu_pool_create(4097, &p), GEM_ERR_PARAM);
    TCHECK_STATUS(cpu_pool_create(2, NULL), GEM_ERR_NULL);

    const int64_t thread_counts[] = {1, 2, 5};
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        const int64_t threads = thread_counts[t];
        TCHECK_STATUS(cpu_pool_create(threads, &p), GEM_OK);
        TCHECK_EQ_I64(cpu_pool_threads(p), threads);
        const int64_t sizes[] = {0, 1, 2, threads, threads + 1, 3 * threads + 2, 257};
        /* back to back: the workers poll between runs */
        int all = 1, most = 0;
        for (int rep = 0; rep < 100; rep++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                int m = 0;
                all &= one_run(p, threads, sizes[k], &m);
                most = m > most ? m : most;
            }
        TCHECK(all);
        TCHECK(most <= threads); /* never more items at once than threads */
        /* owned items: none, some, one a thread, several a thread, all, more than the run has */
        all = 1, most = 0;
        for (int rep = 0; rep < 30; rep++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                const int64_t owned[] = {0, 1, threads, 3 * threads, sizes[k], sizes[k] + 5,
                                         1000000};
                for (size_t o = 0; o < sizeof owned / sizeof owned[0]; o++) {
                    int m = 0;
                    all &= owned_run(p, threads, sizes[k], owned[o], &m);
                    most = m > most ? m : most;
                }
            }
        TCHECK(all);
        TCHECK(most <= threads);
        /* owned runs after the workers have gone to sleep: the caller may take them all */
        all = 1;
        for (int rep = 0; rep < 4; rep++) {
            sleep_us(2000);
            all &= owned_run(p, threads, 4 * threads, 2 * threads, NULL);
        }
        TCHECK(all);
        /* runs further apart than the polling window (0.5 ms): the workers and the caller sleep
         * on their condition variables and are woken */
        all = 1;
        for (int rep = 0; rep < 6; rep++) {
            sleep_us(2000);
            all &= one_run(p, threads, 3 * threads + 2, NULL);
        }
        TCHECK(all);
        cpu_pool_destroy(p); /* workers asleep */
        p = NULL;
    }
    /* the idle work, on pools of 2 and 5 threads whose workers poll between runs */
    for (int64_t threads = 2; threads <= 5; threads += 3) {
        TCHECK_STATUS(cpu_pool_create(threads, &p), GEM_OK);
        idle_job *ij = aligned_alloc(64, sizeof *ij);
        memset(ij, 0, sizeof *ij);
        ij->threads = threads;
        const cpu_pool_idle idle = {idle_fn, ij};
        cpu_pool_set_idle(p, &idle);
        int all = 1;
        for (uint32_t arg = 1; arg <= 20; arg++) {
            atomic_store(&ij->arg, arg);
            atomic_store(&ij->seq, 0xFFFFFFFFu); /* not known until the call returns */
            cpu_pool_idle_arg(p, arg);
            atomic_store(&ij->seq, (uint32_t)(arg + 1)); /* set_idle took seq 1 */
            for (int rep = 0; rep < 20; rep++)
                all &= one_run(p, threads, threads + 1, NULL);
        }
        TCHECK(all);
        /* the waiting threads did call it, where they poll (no more threads than processors) */
        if (threads <= sysconf(_SC_NPROCESSORS_ONLN))
            TCHECK(atomic_load(&ij->calls) > 0);
        TCHECK_EQ_I64(atomic_load(&ij->bad), 0);
        cpu_pool_set_idle(p, NULL);
        atomic_store(&ij->stopped, 1);
        cpu_pool_idle_arg(p, 99);
        for (int rep = 0; rep < 50; rep++)
            all &= one_run(p, threads, threads + 1, NULL);
        TCHECK(all);
        TCHECK_EQ_I64(atomic_load(&ij->after_stop), 0);
        cpu_pool_destroy(p);
        free(ij);
    }
    /* destroyed right after a run, while the workers still poll */
    TCHECK_STATUS(cpu_pool_create(3, &p), GEM_OK);
    TCHECK(one_run(p, 3, 64, NULL));
    cpu_pool_destroy(p);
    cpu_pool_destroy(NULL);
    return tcheck_summary("test_cpu_pool");
}
