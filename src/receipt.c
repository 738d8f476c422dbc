/*
 * JSON receipt helpers (see include/gem/receipt.h).
 */
#include "gem/receipt.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *gem_receipt_new(const char *schema, const char *tool_name, const char *git_commit)
{
    if (!schema || !tool_name || !git_commit)
        return NULL;
    json_t *doc = json_object();
    json_t *tool = json_object();
    if (!doc || !tool)
        goto fail;
    if (json_object_set_new(tool, "name", json_string(tool_name)) ||
        json_object_set_new(tool, "version", json_string(GEM_VERSION)) ||
        json_object_set_new(tool, "git_commit", json_string(git_commit)))
        goto fail;
    if (json_object_set_new(doc, "schema", json_string(schema)))
        goto fail;
    if (json_object_set_new(doc, "tool", tool)) {
        tool = NULL; /* set_new consumed it even on failure */
        goto fail;
    }
    return doc;
fail:
    json_decref(tool);
    json_decref(doc);
    return NULL;
}

json_t *gem_receipt_real(double x)
{
    if (!isfinite(x))
        return json_null();
    return json_real(x);
}

json_t *gem_receipt_u64(uint64_t x)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, x);
    return json_string(buf);
}

int gem_receipt_parse_u64(const json_t *j, uint64_t *out)
{
    if (!json_is_string(j) || !out)
        return -1;
    const char *s = json_string_value(j);
    size_t len = json_string_length(j);
    if (len == 0 || len > 20 || strlen(s) != len)
        return -1;
    if (len > 1 && s[0] == '0')
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

json_t *gem_receipt_geometry(const gem_attn_shape *shape)
{
    if (!shape)
        return NULL;
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:s, s:i}",
                     "n_q_heads", (json_int_t)shape->n_q_heads,
                     "n_kv_heads", (json_int_t)shape->n_kv_heads,
                     "dk", (json_int_t)shape->dk,
                     "dv", (json_int_t)shape->dv,
                     "live", (json_int_t)shape->live,
                     "capacity", (json_int_t)shape->capacity,
                     "scale", gem_receipt_real((double)shape->scale),
                     "dtype", "f32",
                     "window", 0);
}

json_t *gem_receipt_compare(const gem_compare *c)
{
    if (!c)
        return NULL;
    return json_pack("{s:I, s:I, s:o, s:o, s:o}",
                     "n", (json_int_t)c->n,
                     "nonfinite", (json_int_t)c->nonfinite,
                     "correlation", gem_receipt_real(c->correlation),
                     "nmse", gem_receipt_real(c->nmse),
                     "max_abs", gem_receipt_real(c->max_abs));
}

gem_status gem_receipt_save(const char *path, const json_t *doc, char *why, size_t why_cap)
{
    if (why && why_cap)
        why[0] = '\0';
    if (!path || !doc) {
        if (why && why_cap)
            snprintf(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!text) {
        if (why && why_cap)
            snprintf(why, why_cap, "the document cannot be serialized as JSON");
        return GEM_ERR_FORMAT;
    }
    size_t tlen = strlen(text);
    gem_status st = GEM_ERR_NOMEM;
    char *line = malloc(tlen + 2);
    if (line) {
        memcpy(line, text, tlen);
        line[tlen] = '\n';
        line[tlen + 1] = '\0';
        st = gem_file_write_atomic(path, line, tlen + 1, why, why_cap);
        if (st == GEM_ERR_PARAM)
            st = GEM_ERR_IO;
    } else if (why && why_cap) {
        snprintf(why, why_cap, "out of memory");
    }
    free(line);
    free(text);
    return st;
}

gem_status gem_receipt_write(const char *path, const json_t *doc)
{
    return gem_receipt_save(path, doc, NULL, 0);
}

gem_status gem_receipt_load(const char *path, size_t max_bytes, json_t **doc, char sha256[65],
                            char *why, size_t why_cap)
{
    if (why && why_cap)
        why[0] = '\0';
    if (doc)
        *doc = NULL;
    if (!path || !doc) {
        if (why && why_cap)
            snprintf(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    char *text = NULL;
    size_t len = 0;
    gem_status st = gem_file_read(path, max_bytes, &text, &len, why, why_cap);
    if (st != GEM_OK)
        return st;
    char hex[65];
    st = gem_sha256_hex(text, len, hex);
    if (st != GEM_OK) {
        free(text);
        if (why && why_cap)
            snprintf(why, why_cap, "cannot digest the file");
        return st;
    }
    json_error_t err;
    json_t *d = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!d) {
        if (why && why_cap)
            snprintf(why, why_cap, "not JSON: %s (line %d, column %d)", err.text, err.line,
                     err.column);
        return GEM_ERR_FORMAT;
    }
    if (!json_is_object(d)) {
        json_decref(d);
        if (why && why_cap)
            snprintf(why, why_cap, "the top level is not a JSON object");
        return GEM_ERR_FORMAT;
    }
    if (sha256)
        memcpy(sha256, hex, sizeof hex);
    *doc = d;
    return GEM_OK;
}
