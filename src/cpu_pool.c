/*
 * The CPU backend's thread pool: persistent pthread workers that take a run
 * from a generation counter; items are claimed from an atomic counter.
 *
 * Waiting is poll-then-sleep on both sides. A worker that finished a run polls
 * the generation for up to CPU_POOL_POLL_NS before it sleeps on a condition
 * variable, and the caller polls the count of busy workers as long before it
 * sleeps. A decode step runs its parallel regions tens of microseconds apart
 * (the model: four matrix products and two attention passes a layer, with
 * serial norms between them), and a futex wake-up of a sleeping worker costs
 * tens of microseconds on a virtual machine, once per worker and run; polling
 * workers start within a fraction of a microsecond. After CPU_POOL_POLL_NS
 * without work the workers sleep, so an idle pool holds no core. A pool with
 * more threads than the machine has online processors never polls (its
 * pollers would take the cores its workers need: 8 threads on 2 cores ran a
 * decode 1.6x slower polling), and a poller yields its core every 64 polls, so
 * that other processes' threads are not kept waiting.
 *
 * Lost wake-ups: the caller bumps the generation, then broadcasts under the
 * mutex; a worker re-reads the generation under the mutex before it waits.
 * The last worker to finish signals under the mutex after its decrement; the
 * caller re-reads the count under the mutex before it waits.
 */
#define _DEFAULT_SOURCE 1 /* sysconf(_SC_NPROCESSORS_ONLN) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_pool.h"

/* How long a worker polls for the next run, and the caller for the end of its run, before
 * sleeping (nanoseconds). */
#define CPU_POOL_POLL_NS 500000

/* The counters every thread writes during a run (the item counter at each claim, the busy
 * count at each worker's end) lie on cache lines of their own: on a line shared with the
 * generation, which idle workers poll, every claim took the line from every poller. */
#define CPU_POOL_LINE 64

struct cpu_pool {
    int64_t threads;       /* workers + the caller */
    pthread_t *workers;    /* (threads - 1) */
    int64_t started;       /* workers actually started */
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* sleeping workers wait here for a new generation */
    pthread_cond_t done;   /* a sleeping caller waits here for the last worker */
    atomic_uint_least64_t generation; /* bumped by every run (release) */
    atomic_int quit;
    int poll;              /* 1: wait by polling first (threads <= online processors) */
    /* the current run: written before the generation's release, read after its acquire */
    cpu_pool_fn fn;
    void *ctx;
    int64_t n_items;
    _Alignas(CPU_POOL_LINE) atomic_int_least64_t next; /* the next item to claim */
    _Alignas(CPU_POOL_LINE) atomic_int_least64_t busy; /* workers still inside the current run */
};

typedef struct worker_arg {
    cpu_pool *pool;
    int64_t index;
} worker_arg;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls until cond(pool, arg) holds or CPU_POOL_POLL_NS pass; 1 when it holds. A pool that
 * does not poll answers cond at once. */
static int poll_for(int (*cond)(cpu_pool *, uint64_t), cpu_pool *pool, uint64_t arg)
{
    if (!pool->poll)
        return cond(pool, arg);
    int64_t t0 = -1;
    for (unsigned i = 1;; i++) {
        if (cond(pool, arg))
            return 1;
        cpu_relax();
        if (i % 64 == 0) { /* the clock and a yield every 64 polls */
            sched_yield();
            const int64_t t = now_ns();
            if (t0 < 0)
                t0 = t;
            else if (t - t0 > CPU_POOL_POLL_NS)
                return 0;
        }
    }
}

static int new_run(cpu_pool *pool, uint64_t seen)
{
    return atomic_load_explicit(&pool->quit, memory_order_relaxed) ||
           atomic_load_explicit(&pool->generation, memory_order_acquire) != seen;
}

static int run_done(cpu_pool *pool, uint64_t unused)
{
    (void)unused;
    return atomic_load_explicit(&pool->busy, memory_order_acquire) == 0;
}

static void drain(cpu_pool *pool, int64_t thread)
{
    for (;;) {
        const int64_t i = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (i >= pool->n_items)
            return;
        pool->fn(pool->ctx, i, thread);
    }
}

static void *worker_main(void *p)
{
    worker_arg *arg = p;
    cpu_pool *pool = arg->pool;
    const int64_t index = arg->index;
    free(arg);
    uint64_t seen = 0;
    for (;;) {
        if (!poll_for(new_run, pool, seen)) {
            pthread_mutex_lock(&pool->mu);
            while (!new_run(pool, seen))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load_explicit(&pool->quit, memory_order_relaxed))
            break;
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        drain(pool, index);
        if (atomic_fetch_sub_explicit(&pool->busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu); /* the last one: wake a sleeping caller */
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
    return NULL;
}

gem_status cpu_pool_create(int64_t threads, cpu_pool **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    if (threads < 1 || threads > 4096)
        return GEM_ERR_PARAM;
    /* sizeof is a multiple of the struct's alignment, CPU_POOL_LINE */
    cpu_pool *pool = aligned_alloc(CPU_POOL_LINE, sizeof *pool);
    if (!pool)
        return GEM_ERR_NOMEM;
    memset(pool, 0, sizeof *pool);
    pool->threads = threads;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    pool->poll = online < 1 || threads <= (int64_t)online;
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->busy, 0);
    atomic_init(&pool->quit, 0);
    atomic_init(&pool->next, 0);
    if (threads > 1) {
        pool->workers = calloc((size_t)(threads - 1), sizeof *pool->workers);
        if (!pool->workers) {
            free(pool);
            return GEM_ERR_NOMEM;
        }
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    for (int64_t i = 0; i < threads - 1; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) {
            cpu_pool_destroy(pool);
            return GEM_ERR_NOMEM;
        }
        arg->pool = pool;
        arg->index = i + 1; /* the caller is thread 0 */
        if (pthread_create(&pool->workers[i], NULL, worker_main, arg) != 0) {
            free(arg);
            cpu_pool_destroy(pool);
            return GEM_ERR_NOMEM;
        }
        pool->started++;
    }
    *out = pool;
    return GEM_OK;
}

void cpu_pool_destroy(cpu_pool *pool)
{
    if (!pool)
        return;
    atomic_store_explicit(&pool->quit, 1, memory_order_relaxed);
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int64_t i = 0; i < pool->started; i++)
        pthread_join(pool->workers[i], NULL);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool);
}

int64_t cpu_pool_threads(const cpu_pool *pool) { return pool->threads; }

void cpu_pool_run(cpu_pool *pool, int64_t n_items, cpu_pool_fn fn, void *ctx)
{
    if (n_items <= 0)
        return;
    if (pool->started == 0 || n_items == 1) {
        for (int64_t i = 0; i < n_items; i++)
            fn(ctx, i, 0);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_items = n_items;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->busy, pool->started, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_mutex_lock(&pool->mu); /* wakes the workers that sleep (none while they poll) */
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    drain(pool, 0);
    if (!poll_for(run_done, pool, 0)) {
        pthread_mutex_lock(&pool->mu);
        while (!run_done(pool, 0))
            pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}
