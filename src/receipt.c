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
#include <unistd.h>

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

gem_status gem_receipt_write(const char *path, const json_t *doc)
{
    if (!path || !doc)
        return GEM_ERR_NULL;
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!text)
        return GEM_ERR_IO;
    size_t plen = strlen(path);
    size_t cap = plen + 48;
    char *tmp = malloc(cap);
    if (!tmp) {
        free(text);
        return GEM_ERR_NOMEM;
    }
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());

    gem_status st = GEM_ERR_IO;
    FILE *f = fopen(tmp, "wb");
    if (!f)
        goto out;
    size_t tlen = strlen(text);
    int ok = fwrite(text, 1, tlen, f) == tlen && fputc('\n', f) != EOF && fflush(f) == 0 &&
             fsync(fileno(f)) == 0;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        goto out;
    }
    st = GEM_OK;
out:
    free(tmp);
    free(text);
    return st;
}
