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

#endif /* GEM_CPU_POOL_H */
