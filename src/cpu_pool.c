/*
 * The CPU backend's thread pool: persistent pthread workers woken by a
 * generation counter; items are claimed from an atomic counter.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_pool.h"

struct cpu_pool {
    int64_t threads;       /* workers + the caller */
    pthread_t *workers;    /* (threads - 1) */
    int64_t started;       /* workers actually started */
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* workers wait here for a new generation */
    pthread_cond_t done;   /* the caller waits here for the workers */
    uint64_t generation;   /* bumped by every run; guarded by mu */
    int64_t busy;          /* workers still inside the current run; guarded by mu */
    int quit;              /* guarded by mu */
    /* the current run */
    cpu_pool_fn fn;
    void *ctx;
    int64_t n_items;
    atomic_int_least64_t next;
};

typedef struct worker_arg {
    cpu_pool *pool;
    int64_t index;
} worker_arg;

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
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->quit && pool->generation == seen)
            pthread_cond_wait(&pool->wake, &pool->mu);
        if (pool->quit)
            break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->mu);
        drain(pool, index);
        pthread_mutex_lock(&pool->mu);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

gem_status cpu_pool_create(int64_t threads, cpu_pool **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    if (threads < 1 || threads > 4096)
        return GEM_ERR_PARAM;
    cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return GEM_ERR_NOMEM;
    pool->threads = threads;
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
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
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
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_items = n_items;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    pool->busy = pool->started;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    drain(pool, 0);
    pthread_mutex_lock(&pool->mu);
    while (pool->busy > 0)
        pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}
