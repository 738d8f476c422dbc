/*
 * Internal: the model's thread pool for matrix-vector products and other
 * per-row work. (The library's pool is internal to it; the decode context
 * keeps its own.) mpool_run hands items [0, n) to the workers and the caller
 * and returns when all are done. Which thread runs an item is decided at run
 * time, so an item's arithmetic must not depend on it: with every output row
 * computed whole by one item in a fixed order, results are the same bits for
 * any thread count.
 */
#ifndef GEM_MODEL_MPOOL_H
#define GEM_MODEL_MPOOL_H

#include <stdint.h>

#include "gem/attn.h"

typedef struct mpool mpool;
typedef void (*mpool_fn)(void *ctx, int64_t item);

/* threads >= 1 (the caller counts as one). *out NULL on error. */
gem_status mpool_create(int64_t threads, mpool **out);
void mpool_destroy(mpool *p);
int64_t mpool_threads(const mpool *p);
/* fn(ctx, i) for every i in [0, n); one run at a time. */
void mpool_run(mpool *p, int64_t n, mpool_fn fn, void *ctx);

#endif /* GEM_MODEL_MPOOL_H */
