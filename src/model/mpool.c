/*
 * The model's thread pool: persistent workers woken per run by a generation
 * counter; items are taken from a shared atomic counter.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "mpool.h"

struct mpool {
    int64_t threads;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation; /* bumped per run */
    int64_t busy;        /* workers still in the current run */
    int stop;
    /* the current run */
    mpool_fn fn;
    void *ctx;
    int64_t n;
    atomic_int_fast64_t next;
};

static void drain(mpool *p)
{
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return;
        p->fn(p->ctx, i);
    }
}

static void *worker(void *arg)
{
    mpool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

gem_status mpool_create(int64_t threads, mpool **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    if (threads < 1 || threads > 4096)
        return GEM_ERR_PARAM;
    mpool *p = calloc(1, sizeof *p);
    if (!p)
        return GEM_ERR_NOMEM;
    p->threads = threads;
    p->tid = calloc((size_t)threads, sizeof *p->tid);
    if (!p->tid) {
        free(p);
        return GEM_ERR_NOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    for (int64_t i = 0; i + 1 < threads; i++)
        if (pthread_create(&p->tid[i], NULL, worker, p) != 0) {
            p->threads = i + 1; /* join the ones that started */
            mpool_destroy(p);
            return GEM_ERR_NOMEM;
        }
    *out = p;
    return GEM_OK;
}

void mpool_destroy(mpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int64_t i = 0; i + 1 < p->threads; i++)
        pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}

int64_t mpool_threads(const mpool *p) { return p ? p->threads : 0; }

void mpool_run(mpool *p, int64_t n, mpool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (p->threads == 1 || n == 1) {
        for (int64_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
