/*
 * Internal: the CPU backend's thread pool. Created once per engine; each call
 * of cpu_pool_run hands out work items [0, n_items) to the workers and the
 * calling thread and returns when every item is done.
 *
 * Which thread runs which item is decided at run time (a shared counter), so a
 * work item's arithmetic must never depend on it: an item computes the same
 * bytes whichever thread runs it. The `thread` argument only selects per-thread
 * temporaries.
 */
#ifndef GEM_CPU_POOL_H
#define GEM_CPU_POOL_H

#include <stdint.h>

#include "gem/attn.h"

typedef struct cpu_pool cpu_pool;

/* One work item: ctx as given to cpu_pool_run, item in [0, n_items),
 * thread in [0, cpu_pool_threads()). */
typedef void (*cpu_pool_fn)(void *ctx, int64_t item, int64_t thread);

/* Starts threads - 1 workers (the caller is the last one). threads >= 1.
 * GEM_ERR_PARAM for threads < 1, GEM_ERR_NOMEM when a thread cannot start.
 * *out is NULL on error. */
gem_status cpu_pool_create(int64_t threads, cpu_pool **out);

/* Stops and joins the workers; NULL is fine. */
void cpu_pool_destroy(cpu_pool *pool);

/* Number of threads that run items, the caller included. */
int64_t cpu_pool_threads(const cpu_pool *pool);

/* Runs fn(ctx, i, thread) once for every i in [0, n_items) and waits for all.
 * Not reentrant: one run at a time per pool. n_items <= 0 returns at once. */
void cpu_pool_run(cpu_pool *pool, int64_t n_items, cpu_pool_fn fn, void *ctx);

/* Most items a run may own (cpu_pool_run_owned). */
#define CPU_POOL_OWNED_MAX_PER_THREAD 8

/* cpu_pool_run whose items [0, owned) have owners: thread t first runs the items t, t + T,
 * t + 2T, .. below owned (T = cpu_pool_threads), then takes items from owned on from the
 * counter, then any owned item that is still not taken (a thread that comes late to the run
 * holds nobody up). So a thread that prepared its owned items while it waited (the idle work
 * below) usually computes them itself. owned is clamped to [0, min(n_items, T x
 * CPU_POOL_OWNED_MAX_PER_THREAD)]. */
void cpu_pool_run_owned(cpu_pool *pool, int64_t n_items, int64_t owned, cpu_pool_fn fn,
                        void *ctx);

/* Work for the pool's threads while they wait: a polling worker between runs, and a thread
 * whose items of a run are done while others still compute, calls fn(ctx, arg, seq, thread)
 * again and again until it returns 0 (done with this arg), a run starts (the worker) or ends
 * (the caller, thread 0), each call a bounded piece (about a microsecond). seq numbers the
 * arguments (cpu_pool_idle_arg): a thread that sees a new seq starts that arg afresh. fn must
 * not write what runs read: it is meant for prefetches of what the next runs will read. */
typedef int (*cpu_pool_idle_fn)(void *ctx, uint32_t arg, uint32_t seq, int64_t thread);

typedef struct cpu_pool_idle {
    cpu_pool_idle_fn fn;
    void *ctx;
} cpu_pool_idle;

/* Sets the idle work (NULL: none). idle must stay valid until the next call; the call
 * returns once no thread is inside the previous one's fn. Not concurrent with a run. */
void cpu_pool_set_idle(cpu_pool *pool, const cpu_pool_idle *idle);

/* The idle work's argument from now on: each thread calls fn with it (and a new seq) until
 * fn returns 0. Any thread may be inside fn with the previous arg for one more piece. */
void cpu_pool_idle_arg(cpu_pool *pool, uint32_t arg);

#endif /* GEM_CPU_POOL_H */
