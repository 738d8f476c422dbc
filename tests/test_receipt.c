/*
 * Receipt helpers: provenance object, geometry, non-finite reals as null,
 * u64 seeds as exact strings, atomic write with trailing newline.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gem/receipt.h"
#include "tcheck.h"

static void test_new(void)
{
    json_t *d = gem_receipt_new("gem.test.v1", "gem test", "abc");
    TCHECK(d != NULL);
    TCHECK(!strcmp(json_string_value(json_object_get(d, "schema")), "gem.test.v1"));
    json_t *t = json_object_get(d, "tool");
    TCHECK(json_object_size(t) == 3);
    TCHECK(!strcmp(json_string_value(json_object_get(t, "name")), "gem test"));
    TCHECK(!strcmp(json_string_value(json_object_get(t, "version")), GEM_VERSION));
    TCHECK(!strcmp(json_string_value(json_object_get(t, "git_commit")), "abc"));
    json_decref(d);
    TCHECK(gem_receipt_new(NULL, "x", "y") == NULL);
    TCHECK(gem_receipt_new("x", NULL, "y") == NULL);
    TCHECK(gem_receipt_new("x", "y", NULL) == NULL);
}

static void test_geometry_compare(void)
{
    gem_attn_shape s = {32, 4, 512, 512, 8191, 8200, 0.125f};
    json_t *g = gem_receipt_geometry(&s);
    TCHECK(json_object_size(g) == 9);
    TCHECK(json_integer_value(json_object_get(g, "n_q_heads")) == 32);
    TCHECK(json_integer_value(json_object_get(g, "capacity")) == 8200);
    TCHECK(json_real_value(json_object_get(g, "scale")) == 0.125);
    TCHECK(!strcmp(json_string_value(json_object_get(g, "dtype")), "f32"));
    TCHECK(json_integer_value(json_object_get(g, "window")) == 0);
    json_decref(g);
    TCHECK(gem_receipt_geometry(NULL) == NULL);

    gem_compare c = {10, 1, NAN, INFINITY, 0.5, 0.25, 0.5};
    json_t *j = gem_receipt_compare(&c);
    TCHECK(json_object_size(j) == 5);
    TCHECK(json_integer_value(json_object_get(j, "nonfinite")) == 1);
    TCHECK(json_is_null(json_object_get(j, "correlation")));
    TCHECK(json_is_null(json_object_get(j, "nmse")));
    TCHECK(json_real_value(json_object_get(j, "max_abs")) == 0.5);
    json_decref(j);
    TCHECK(json_is_null(gem_receipt_real(-INFINITY)));
}

static void test_u64(void)
{
    uint64_t v = 0;
    json_t *j = gem_receipt_u64(UINT64_MAX);
    TCHECK(gem_receipt_parse_u64(j, &v) == 0 && v == UINT64_MAX);
    json_decref(j);
    const char *bad[] = {"", "01", "-1", "18446744073709551616", "1x", " 1", "1.0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = json_string(bad[i]);
        v = 7;
        TCHECK(gem_receipt_parse_u64(j, &v) == -1 && v == 7);
        json_decref(j);
    }
    j = json_integer(5);
    TCHECK(gem_receipt_parse_u64(j, &v) == -1);
    json_decref(j);
    j = json_string("0");
    TCHECK(gem_receipt_parse_u64(j, &v) == 0 && v == 0);
    json_decref(j);
}

static void test_write(void)
{
    char dir[] = "/tmp/gem_receipt_XXXXXX";
    TCHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/r.json", dir);
    json_t *d = gem_receipt_new("gem.test.v1", "gem test", "abc");
    json_object_set_new(d, "x", gem_receipt_real(0.1));
    TCHECK_STATUS(gem_receipt_write(path, d), GEM_OK);
    FILE *f = fopen(path, "rb");
    TCHECK(f != NULL);
    char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    TCHECK(n > 0 && buf[n - 1] == '\n');
    json_error_t err;
    json_t *back = json_loads(buf, 0, &err);
    TCHECK(back && json_real_value(json_object_get(back, "x")) == 0.1); /* round trip exact */
    TCHECK(json_equal(back, d));
    json_decref(back);
    TCHECK_STATUS(gem_receipt_write(NULL, d), GEM_ERR_NULL);
    TCHECK_STATUS(gem_receipt_write(path, NULL), GEM_ERR_NULL);
    char bad[300];
    snprintf(bad, sizeof bad, "%s/no/such/dir/r.json", dir);
    TCHECK_STATUS(gem_receipt_write(bad, d), GEM_ERR_IO);
    json_decref(d);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_new();
    test_geometry_compare();
    test_u64();
    test_write();
    return tcheck_summary("test_receipt");
}
