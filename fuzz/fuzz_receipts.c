/*
 * libFuzzer harness for the receipt parsers and analyzers. The first byte
 * selects the analyzer, the rest is parsed as JSON and checked with digest
 * recomputation and file access off (they are exercised by the tests).
 * Every input must end in a pass or a one-line defect: no crash, no leak,
 * no undefined behaviour.
 *   build: cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-14 -DGEM_FUZZ=ON \
 *            -DGEM_CUDA=OFF && cmake --build build-fuzz --target fuzz_receipts
 *   run:   build-fuzz/fuzz/fuzz_receipts fuzz/corpus -max_total_time=300
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "gem/receipt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned kind = data[0] % 6u;
    json_error_t err;
    json_t *doc = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, &err);
    if (!doc)
        return 0;
    an_ctx c;
    memset(&c, 0, sizeof c);
    c.file = "fuzz";
    an_opts o = {.recompute_digests = 0, .root = NULL};
    int rc = 0;
    switch (kind) {
    case 0: rc = an_merge_boundary_doc(&c, doc, &o); break;
    case 1: rc = an_resources_doc(&c, doc, &o); break;
    case 2: rc = an_diff_doc(&c, doc, 8191, &o); break;
    case 3: rc = an_model_doc(&c, doc, 8192); break;
    case 4: rc = an_profile_doc(&c, doc, 65536); break;
    default: {
        uint64_t v = 0;
        rc = gem_receipt_parse_u64(json_is_object(doc) ? json_object_get(doc, "seed") : doc, &v);
        rc = 0;
        break;
    }
    }
    /* A failure must have left exactly one non-empty line. */
    if (rc != 0 && (!c.failed || !c.msg[0] || strchr(c.msg, '\n')))
        abort();
    if (rc == 0 && c.failed)
        abort();
    json_decref(doc);
    return 0;
}
