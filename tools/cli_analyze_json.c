/*
 * Strict JSON field checks shared by the analyzers (see analyze.h). Every
 * check names the file, the field path and the defect class in one line.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/file.h"
#include "gem/receipt.h"

int an_fail(an_ctx *c, const char *path, const char *cls, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    c->failed = 1;
    char detail[700], raw[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(raw, sizeof raw, "%s: %s: %s: %s", c->file ? c->file : "(input)",
             path && path[0] ? path : "(top)", cls, detail);
    /* One line, nothing a terminal would act on, whatever the input held. */
    cli_escape(raw, c->msg, sizeof c->msg);
    return -1;
}

int an_io(an_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    c->failed = 1;
    c->io = 1;
    char detail[700], raw[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(raw, sizeof raw, "%s: %s", c->file ? c->file : "(input)", detail);
    cli_escape(raw, c->msg, sizeof c->msg);
    return -1;
}

int an_load(an_ctx *c, const char *path, json_t **out, char sha[65])
{
    char why[512];
    *out = NULL;
    gem_status st = gem_receipt_load(path, GEM_FILE_MAX_JSON_BYTES, out, sha, why, sizeof why);
    if (st == GEM_ERR_FORMAT)
        return an_fail(c, "", AN_MALFORMED, "%s", why);
    if (st != GEM_OK)
        return an_io(c, "cannot read the file: %s", why);
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
    const char *str = json_string_value(v);
    if (strlen(str) != json_string_length(v))
        return an_fail(c, p, AN_VALUE, "string holds a NUL byte");
    for (const char *q = str; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7F)
            return an_fail(c, p, AN_VALUE, "string holds the control character 0x%02x",
                           (unsigned)(unsigned char)*q);
    *out = str;
    return 0;
}

int an_int_in(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t lo,
              int64_t hi, int64_t *out)
{
    int64_t v = 0;
    if (an_int(c, o, path, key, &v))
        return -1;
    if (v < lo || v > hi) {
        char p[512];
        join(p, sizeof p, path, key);
        return an_fail(c, p, AN_RANGE, "%lld is outside [%lld, %lld]", (long long)v,
                       (long long)lo, (long long)hi);
    }
    if (out)
        *out = v;
    return 0;
}

int an_real_in(an_ctx *c, const json_t *o, const char *path, const char *key, double lo,
               double hi, double *out)
{
    double v = 0;
    if (an_real(c, o, path, key, &v))
        return -1;
    if (!(v >= lo && v <= hi)) {
        char p[512];
        join(p, sizeof p, path, key);
        return an_fail(c, p, AN_RANGE, "%.17g is outside [%.17g, %.17g]", v, lo, hi);
    }
    *out = v;
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
    /* MAJOR.MINOR.PATCH, decimal. */
    int parts = 0, ok = 1;
    for (const char *q = s; ok;) {
        size_t n = 0;
        while (q[n] >= '0' && q[n] <= '9')
            n++;
        ok = n >= 1 && n <= 9;
        parts++;
        q += n;
        if (*q == '\0')
            break;
        ok = ok && *q == '.';
        q++;
    }
    if (!ok || parts != 3)
        return an_fail(c, "tool.version", AN_VALUE, "'%.40s' is not MAJOR.MINOR.PATCH", s);
    if (an_str(c, t, "tool", "git_commit", &s))
        return -1;
    if (!cli_commit_ok(s))
        return an_fail(c, "tool.git_commit", AN_VALUE,
                       "'%.60s' is not a commit id (7-40 hex digits, optional -dirty) or "
                       "'unknown'",
                       s);
    return 0;
}

/* The first field (depth first) where a and b differ, into p; 0 when equal. */
static int first_difference(const json_t *a, const json_t *b, const char *path, char *p,
                            size_t cap)
{
    if (json_equal(a, b))
        return 0;
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)b, k, v) {
            char q[512];
            join(q, sizeof q, path, k);
            const json_t *w = json_object_get(a, k);
            if (!w) {
                snprintf(p, cap, "%s", q);
                return 1;
            }
            if (first_difference(w, v, q, p, cap))
                return 1;
        }
        json_object_foreach((json_t *)a, k, v) {
            if (!json_object_get(b, k)) {
                join(p, cap, path, k);
                return 1;
            }
        }
    }
    if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
        for (size_t i = 0; i < json_array_size(a); i++) {
            char q[512];
            snprintf(q, sizeof q, "%s[%zu]", path, i);
            if (first_difference(json_array_get(a, i), json_array_get(b, i), q, p, cap))
                return 1;
        }
    }
    snprintf(p, cap, "%s", path && path[0] ? path : "(top)");
    return 1;
}

int an_analysis_matches(an_ctx *c, const json_t *given, const json_t *want)
{
    if (!json_is_object(given))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    const char *schema = json_string_value(json_object_get(want, "schema"));
    const char *tool = json_string_value(json_object_get(json_object_get(want, "tool"), "name"));
    if (!schema || !tool)
        return an_fail(c, "", "internal", "the expected analysis is incomplete");
    if (an_schema(c, given, schema) || an_tool(c, given, tool))
        return -1;
    /* The same field set first: a missing or invented field is named as such. */
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)want, k, v) {
        if (!json_object_get(given, k))
            return an_fail(c, k, AN_MISSING, "'%s' is required", k);
    }
    json_object_foreach((json_t *)given, k, v) {
        if (!json_object_get(want, k))
            return an_fail(c, k, AN_EXTRA, "'%.60s' is not part of the schema", k);
    }
    const json_t *gr = json_object_get(given, "receipt"), *wr = json_object_get(want, "receipt");
    const char *gs = json_string_value(json_object_get(gr, "sha256"));
    const char *ws = json_string_value(json_object_get(wr, "sha256"));
    if (ws && (!gs || strcmp(gs, ws) != 0))
        return an_fail(c, "receipt.sha256", AN_SWAPPED,
                       "the analysis is of another receipt (%.12s..., given %.12s...)",
                       gs ? gs : "(none)", ws);
    json_t *g = json_deep_copy(given);
    if (!g)
        return an_io(c, "out of memory");
    /* Only the analyzer's own provenance may differ. */
    json_object_set(g, "tool", json_object_get(want, "tool"));
    char p[512] = "";
    int differ = first_difference(g, want, "", p, sizeof p);
    json_decref(g);
    if (differ)
        return an_fail(c, p, AN_VALUE,
                       "differs from the analysis re-derived from the receipt (a hand-written "
                       "or edited analysis)");
    return 0;
}
