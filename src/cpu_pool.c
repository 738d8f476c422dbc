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
 *
 * Owned items (cpu_pool_run_owned): item i below `owned` carries a tag, the generation of the
 * last run that took it; a thread takes it by exchanging the run's generation in, so each is
 * run once whoever takes it, and the tags need no reset between runs.
 *
 * Idle work (cpu_pool_set_idle): a thread marks itself inside the idle function before it
 * reads the function's pointer, and cpu_pool_set_idle stores the new pointer before it reads
 * the marks (both sequentially consistent), so once it returns no thread can still be inside
 * the old function. The argument and its sequence number share one word, so a thread never
 * sees the one without the other.
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

/* What only thread t writes, on a line of its own. */
typedef struct thread_slot {
    _Alignas(CPU_POOL_LINE) atomic_int in_idle; /* 1 while inside the idle function */
    uint64_t idle_done;                         /* the idle word this thread finished */
} thread_slot;

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
    int64_t owned;                 /* items [0, owned) have owners (cpu_pool_run_owned) */
    atomic_uint_least64_t *owned_tag; /* (threads x CPU_POOL_OWNED_MAX_PER_THREAD) */
    thread_slot *slots;            /* (threads) */
    _Atomic(const cpu_pool_idle *) idle;
    atomic_uint_least64_t idle_word; /* sequence number << 32 | argument */
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

/* One piece of the idle work for `thread`; 1 when it has more for the current word. */
static int idle_step(cpu_pool *pool, int64_t thread)
{
    thread_slot *sl = &pool->slots[thread];
    const uint64_t w = atomic_load_explicit(&pool->idle_word, memory_order_acquire);
    if (w == sl->idle_done)
        return 0;
    atomic_store_explicit(&sl->in_idle, 1, memory_order_seq_cst);
    const cpu_pool_idle *d = atomic_load_explicit(&pool->idle, memory_order_seq_cst);
    const int more = d && d->fn && d->fn(d->ctx, (uint32_t)w, (uint32_t)(w >> 32), thread);
    atomic_store_explicit(&sl->in_idle, 0, memory_order_release);
    if (!more)
        sl->idle_done = w;
    return more;
}

/* Polls until cond(pool, arg) holds or CPU_POOL_POLL_NS pass; 1 when it holds. Between
 * polls `thread` does its idle work. A pool that does not poll answers cond at once. */
static int poll_for(int (*cond)(cpu_pool *, uint64_t), cpu_pool *pool, uint64_t arg,
                    int64_t thread)
{
    if (!pool->poll)
        return cond(pool, arg);
    int64_t t0 = -1;
    for (unsigned i = 1;; i++) {
        if (cond(pool, arg))
            return 1;
        if (!idle_step(pool, thread))
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

/* 1 when this thread takes owned item i in run gen (nobody had). */
static int take_owned(cpu_pool *pool, int64_t i, uint64_t gen)
{
    atomic_uint_least64_t *tag = &pool->owned_tag[i];
    return atomic_load_explicit(tag, memory_order_relaxed) != gen &&
           atomic_exchange_explicit(tag, gen, memory_order_relaxed) != gen;
}

/* The items of run gen that `thread` gets: its owned ones, the counter's, what is left of the
 * owned ones. */
static void drain(cpu_pool *pool, int64_t thread, uint64_t gen)
{
    const int64_t owned = pool->owned;
    for (int64_t i = thread; i < owned; i += pool->threads)
        if (take_owned(pool, i, gen))
            pool->fn(pool->ctx, i, thread);
    for (;;) {
        const int64_t i = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (i >= pool->n_items)
            break;
        pool->fn(pool->ctx, i, thread);
    }
    for (int64_t i = 0; i < owned; i++)
        if (take_owned(pool, i, gen))
            pool->fn(pool->ctx, i, thread);
}

static void *worker_main(void *p)
{
    worker_arg *arg = p;
    cpu_pool *pool = arg->pool;
    const int64_t index = arg->index;
    free(arg);
    uint64_t seen = 0;
    for (;;) {
        if (!poll_for(new_run, pool, seen, index)) {
            pthread_mutex_lock(&pool->mu);
            while (!new_run(pool, seen))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load_explicit(&pool->quit, memory_order_relaxed))
            break;
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        drain(pool, index, seen);
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
    atomic_init(&pool->idle, NULL);
    atomic_init(&pool->idle_word, 0);
    const int64_t tags = threads * CPU_POOL_OWNED_MAX_PER_THREAD;
    pool->owned_tag = malloc((size_t)tags * sizeof *pool->owned_tag);
    pool->slots = aligned_alloc(CPU_POOL_LINE, (size_t)threads * sizeof *pool->slots);
    if (!pool->owned_tag || !pool->slots) {
        free(pool->owned_tag);
        free(pool->slots);
        free(pool);
        return GEM_ERR_NOMEM;
    }
    for (int64_t i = 0; i < tags; i++)
        atomic_init(&pool->owned_tag[i], 0);
    for (int64_t t = 0; t < threads; t++) {
        atomic_init(&pool->slots[t].in_idle, 0);
        pool->slots[t].idle_done = 0;
    }
    if (threads > 1) {
        pool->workers = calloc((size_t)(threads - 1), sizeof *pool->workers);
        if (!pool->workers) {
            free(pool->owned_tag);
            free(pool->slots);
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
    free(pool->owned_tag);
    free(pool->slots);
    free(pool);
}

int64_t cpu_pool_threads(const cpu_pool *pool) { return pool->threads; }

void cpu_pool_run(cpu_pool *pool, int64_t n_items, cpu_pool_fn fn, void *ctx)
{
    cpu_pool_run_owned(pool, n_items, 0, fn, ctx);
}

void cpu_pool_run_owned(cpu_pool *pool, int64_t n_items, int64_t owned, cpu_pool_fn fn,
                        void *ctx)
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
    const int64_t owned_max = pool->threads * CPU_POOL_OWNED_MAX_PER_THREAD;
    pool->owned = owned < 0 ? 0 : owned;
    pool->owned = pool->owned < n_items ? pool->owned : n_items;
    pool->owned = pool->owned < owned_max ? pool->owned : owned_max;
    atomic_store_explicit(&pool->next, pool->owned, memory_order_relaxed);
    atomic_store_explicit(&pool->busy, pool->started, memory_order_relaxed);
    const uint64_t gen =
        atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release) + 1;
    pthread_mutex_lock(&pool->mu); /* wakes the workers that sleep (none while they poll) */
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    drain(pool, 0, gen);
    if (!poll_for(run_done, pool, 0, 0)) {
        pthread_mutex_lock(&pool->mu);
        while (!run_done(pool, 0))
            pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}

void cpu_pool_set_idle(cpu_pool *pool, const cpu_pool_idle *idle)
{
    atomic_store_explicit(&pool->idle, idle, memory_order_seq_cst);
    cpu_pool_idle_arg(pool, (uint32_t)atomic_load_explicit(&pool->idle_word,
                                                           memory_order_relaxed));
    for (int64_t t = 0; t < pool->threads; t++)
        while (atomic_load_explicit(&pool->slots[t].in_idle, memory_order_seq_cst))
            cpu_relax();
}

void cpu_pool_idle_arg(cpu_pool *pool, uint32_t arg)
{
    const uint64_t w = atomic_load_explicit(&pool->idle_word, memory_order_relaxed);
    const uint64_t seq = ((w >> 32) + 1) & 0xFFFFFFFFu;
    atomic_store_explicit(&pool->idle_word, seq << 32 | arg, memory_order_release);
}
