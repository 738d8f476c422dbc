/*
 * Host memory for long K/V streams, shared by the CPU backend's KV cache
 * helper and the CPU measuring harness.
 */
#ifndef GEM_CPU_MEMORY_H
#define GEM_CPU_MEMORY_H

#include <stddef.h>

#include "gem/attn.h"

/* `bytes` of memory for streaming reads, released with free(): 64-byte
 * aligned; from 2 MiB up, aligned to 2 MiB and advised to use transparent huge
 * pages (a long K/V stream then takes no TLB miss every 4 KiB; the advice
 * changes speed only). Zeroed when `zero` is non-zero. out (1): the memory.
 * GEM_ERR_OVERFLOW when the rounded size overflows size_t, GEM_ERR_NOMEM when
 * it cannot be had. */
gem_status cpu_stream_alloc(size_t bytes, int zero, void **out);

#endif
