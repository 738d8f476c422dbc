/*
 * tcheck: the tiny assertion helper of gem's tests. Each check prints a line
 * only when it fails; tcheck_summary prints "<name>: N passed, N failed" and
 * returns the process exit status (0 only when nothing failed and something ran).
 */
#ifndef GEM_TCHECK_H
#define GEM_TCHECK_H

#include <inttypes.h>
#include <stdio.h>

#include "gem/attn.h"

static long tcheck_passed_;
static long tcheck_failed_;

static inline int tcheck_record_(int ok, const char *file, int line, const char *what)
{
    if (ok) {
        tcheck_passed_++;
    } else {
        tcheck_failed_++;
        fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what);
    }
    return ok;
}

#define TCHECK(cond) tcheck_record_(!!(cond), __FILE__, __LINE__, #cond)

#define TCHECK_EQ_I64(a, b)                                                                    \
    do {                                                                                       \
        int64_t tc_a_ = (int64_t)(a), tc_b_ = (int64_t)(b);                                    \
        if (!tcheck_record_(tc_a_ == tc_b_, __FILE__, __LINE__, #a " == " #b))                 \
            fprintf(stderr, "     %" PRId64 " != %" PRId64 "\n", tc_a_, tc_b_);                \
    } while (0)

#define TCHECK_STATUS(expr, want)                                                              \
    do {                                                                                       \
        gem_status tc_got_ = (expr), tc_want_ = (want);                                        \
        if (!tcheck_record_(tc_got_ == tc_want_, __FILE__, __LINE__, #expr " -> " #want))      \
            fprintf(stderr, "     got %s: %s\n", gem_status_name(tc_got_),                     \
                    gem_status_str(tc_got_));                                                  \
    } while (0)

static inline int tcheck_summary(const char *name)
{
    printf("%s: %ld passed, %ld failed\n", name, tcheck_passed_, tcheck_failed_);
    return (tcheck_failed_ == 0 && tcheck_passed_ > 0) ? 0 : 1;
}

#endif /* GEM_TCHECK_H */
