/*
 * Strict JSON field checks shared by the analyzers (see analyze.h). Every
 * check names the file, the field path and the defect class in one line.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analyze.h"
#include "gem/receipt.h"

int an_fail(an_ctx *c, const char *path, const char *cls, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    c->failed = 1;
    char detail[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(c->msg, sizeof c->msg, "%s: %s: %s: %s", c->file ? c->file : "(input)",
             path && path[0] ? path : "(top)", cls, detail);
    /* One line, whatever the detail held. */
    for (char *p = c->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return -1;
}

int an_load(an_ctx *c, const char *path, json_t **out)
{
    json_error_t err;
    *out = NULL;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!doc)
        return an_fail(c, "", "unreadable", "%s (line %d)", err.text, err.line);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    }
    *out = doc;
    return 0;
}

static const char *type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

static void join(char *buf, size_t cap, const char *path, const char *key)
{
    if (path && path[0])
        snprintf(buf, cap, "%s.%s", path, key);
    else
        snprintf(buf, cap, "%s", key);
}

int an_digest(an_ctx *c, const char *path, char sha[65])
{
    if (gem_sha256_file_hex(path, sha) != GEM_OK)
        return an_fail(c, "", "unreadable", "cannot digest the file");
    return 0;
}

int an_keys(an_ctx *c, const json_t *o, const char *path, const char *const *keys, size_t n)
{
    if (!json_is_object(o))
        return an_fail(c, path, AN_TYPE, "expected an object, found %s", type_name(o));
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(o, keys[i])) {
            char p[512];
            join(p, sizeof p, path, keys[i]);
            return an_fail(c, p, AN_MISSING, "'%s' is required", keys[i]);
        }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        size_t i = 0;
        while (i < n && strcmp(k, keys[i]) != 0)
            i++;
        if (i == n) {
            char p[512];
            join(p, sizeof p, path, k);
            return an_fail(c, p, AN_EXTRA, "'%s' is not part of the schema", k);
        }
    }
    return 0;
}

static const json_t *field(an_ctx *c, const json_t *o, const char *path, const char *key,
                           char *p, size_t cap)
{
    join(p, cap, path, key);
    if (!json_is_object(o)) {
        an_fail(c, path, AN_TYPE, "expected an object, found %s", o ? type_name(o) : "nothing");
        return NULL;
    }
    const json_t *v = json_object_get(o, key);
    if (!v)
        an_fail(c, p, AN_MISSING, "'%s' is required", key);
    return v;
}

int an_int(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t *out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (!json_is_integer(v))
        return an_fail(c, p, AN_TYPE, "expected integer, found %s", type_name(v));
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int an_real(an_ctx *c, const json_t *o, const char *path, const char *key, double *out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (json_is_null(v))
        return an_fail(c, p, AN_NONFINITE, "null (NaN or infinity in the producer)");
    if (!json_is_number(v))
        return an_fail(c, p, AN_TYPE, "expected number, found %s", type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x))
        return an_fail(c, p, AN_NONFINITE, "%g", x);
    *out = x;
    return 0;
}

int an_bool(an_ctx *c, const json_t *o, const char *path, const char *key, int *out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (!json_is_boolean(v))
        return an_fail(c, p, AN_TYPE, "expected boolean, found %s", type_name(v));
    *out = json_is_true(v);
    return 0;
}

int an_str(an_ctx *c, const json_t *o, const char *path, const char *key, const char **out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (!json_is_string(v))
        return an_fail(c, p, AN_TYPE, "expected string, found %s", type_name(v));
    if (strlen(json_string_value(v)) != json_string_length(v))
        return an_fail(c, p, AN_VALUE, "string holds a NUL byte");
    *out = json_string_value(v);
    return 0;
}

int an_sha(an_ctx *c, const json_t *o, const char *path, const char *key, const char **out)
{
    const char *s = NULL;
    if (an_str(c, o, path, key, &s))
        return -1;
    size_t n = strlen(s);
    int ok = n == 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (!ok) {
        char p[512];
        join(p, sizeof p, path, key);
        return an_fail(c, p, AN_TYPE, "expected a 64-digit lower-case hex SHA-256");
    }
    *out = s;
    return 0;
}

int an_u64(an_ctx *c, const json_t *o, const char *path, const char *key, uint64_t *out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (gem_receipt_parse_u64(v, out) != 0)
        return an_fail(c, p, AN_TYPE, "expected a decimal u64 string, found %s",
                       type_name(v));
    return 0;
}

int an_obj(an_ctx *c, const json_t *o, const char *path, const char *key, const json_t **out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (!json_is_object(v))
        return an_fail(c, p, AN_TYPE, "expected object, found %s", type_name(v));
    *out = v;
    return 0;
}

int an_arr(an_ctx *c, const json_t *o, const char *path, const char *key, const json_t **out)
{
    char p[512];
    const json_t *v = field(c, o, path, key, p, sizeof p);
    if (!v)
        return -1;
    if (!json_is_array(v))
        return an_fail(c, p, AN_TYPE, "expected array, found %s", type_name(v));
    *out = v;
    return 0;
}

int an_int_eq(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t want,
              const char *cls)
{
    int64_t v = 0;
    if (an_int(c, o, path, key, &v))
        return -1;
    if (v != want) {
        char p[512];
        join(p, sizeof p, path, key);
        return an_fail(c, p, cls ? cls : AN_GEOMETRY, "%lld, the design fixes %lld",
                       (long long)v, (long long)want);
    }
    return 0;
}

int an_str_eq(an_ctx *c, const json_t *o, const char *path, const char *key, const char *want,
              const char *cls)
{
    const char *v = NULL;
    if (an_str(c, o, path, key, &v))
        return -1;
    if (strcmp(v, want) != 0) {
        char p[512];
        join(p, sizeof p, path, key);
        return an_fail(c, p, cls ? cls : AN_GEOMETRY, "'%.100s', expected '%s'", v, want);
    }
    return 0;
}

int an_schema(an_ctx *c, const json_t *doc, const char *schema)
{
    const char *s = NULL;
    if (an_str(c, doc, "", "schema", &s))
        return -1;
    if (strcmp(s, schema) != 0)
        return an_fail(c, "schema", AN_SWAPPED, "this is a '%.100s' document, expected '%s'", s,
                       schema);
    return 0;
}

int an_tool(an_ctx *c, const json_t *doc, const char *name)
{
    static const char *const keys[] = {"name", "version", "git_commit"};
    const json_t *t = NULL;
    const char *s = NULL;
    if (an_obj(c, doc, "", "tool", &t) || an_keys(c, t, "tool", keys, 3) ||
        an_str_eq(c, t, "tool", "name", name, AN_SWAPPED) || an_str(c, t, "tool", "version", &s))
        return -1;
    if (!s[0])
        return an_fail(c, "tool.version", AN_VALUE, "empty");
    if (an_str(c, t, "tool", "git_commit", &s))
        return -1;
    if (!s[0])
        return an_fail(c, "tool.git_commit", AN_VALUE, "empty");
    return 0;
}
