/*
 * Host memory for long K/V streams (cpu_memory.h).
 */
#define _DEFAULT_SOURCE 1 /* madvise */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu_memory.h"

#define HUGE_PAGE ((size_t)2 << 20)

gem_status cpu_stream_alloc(size_t bytes, int zero, void **out)
{
    const size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    size_t rounded = 0;
    if (gem_add_size(bytes, align - 1, &rounded) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    rounded = rounded / align * align;
    if (rounded == 0)
        rounded = align;
    void *p = NULL;
    if (posix_memalign(&p, align, rounded) != 0)
        return GEM_ERR_NOMEM;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE)
        (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    if (zero)
        memset(p, 0, rounded);
    *out = p;
    return GEM_OK;
}
