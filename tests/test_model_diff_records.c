/*
 * gem model-diff's records against the correctness gate's model-record check
 * (an_model_doc): the writer and the analyzer must agree on every field and on
 * the case id that the analyzer rebuilds from the record's own fields
 * (model-<model.name>-<prompt.id>-ctx<prompt.context_tokens>). The 60-layer
 * synthetic model (gem synth --preset diff, the model of the committed
 * boundary records in results/cpu/model/model-diff/) runs at two short
 * contexts, and each record is checked at the context it declares; the gate
 * itself also requires the contexts 8191/8192/8193, which would take this
 * model half an hour. The tiny model cannot stand in: it has 6 layers, not the
 * 60-layer identity the check requires. Records of --compare k-from-v are
 * refused as another comparison, with or without their "comparison" field.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "cli_model.h"
#include "tcheck.h"

static char dir[64];

static int run(int (*cmd)(int, char **), char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    fflush(stdout);
    return cmd(argc, argv);
}

/* an_model_doc on the record at path, at context; 0 on a pass. The defect
 * line, if any, is left in *c. */
static int check_record(an_ctx *c, const char *path, int64_t context, json_t **keep)
{
    memset(c, 0, sizeof *c);
    c->file = path;
    json_t *doc = NULL;
    if (an_load(c, path, &doc, NULL))
        return -1;
    int rc = an_model_doc(c, doc, context);
    if (keep)
        *keep = doc;
    else
        json_decref(doc);
    return rc;
}

static void remove_file(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gem_model_diff_XXXXXX");
    if (!TCHECK(mkdtemp(dir) != NULL))
        return tcheck_summary("test_model_diff_records");
    setenv("GEM_QUIET", "1", 1);
    char model[128], out[128];
    snprintf(model, sizeof model, "%s/diff60.gguf", dir);
    snprintf(out, sizeof out, "%s", dir);

    char *synth[] = {"synth", "--preset", "diff", "--out", model, NULL};
    TCHECK(run(gem_cmd_synth, synth) == 0);
    char *routes[] = {"model-diff", "--model", model, "--contexts", "30,31", "--steps", "8",
                      "--threads", "2", "--out", out, NULL};
    TCHECK(run(gem_cmd_model_diff, routes) == 0);
    char *kfv[] = {"model-diff", "--model", model, "--contexts", "30,31", "--steps", "8",
                   "--threads", "2", "--compare", "k-from-v", "--out", out, NULL};
    TCHECK(run(gem_cmd_model_diff, kfv) == 0);

    for (int ctx = 30; ctx <= 31; ctx++) {
        char path[256], want[128];
        an_ctx c;
        json_t *doc = NULL;

        /* The baseline-vs-fused record passes the gate's record check as written. */
        snprintf(path, sizeof path, "%s/model-diff-gem-synth-diff60-ctx%d-seed1.json", dir, ctx);
        if (!TCHECK(check_record(&c, path, ctx, &doc) == 0))
            fprintf(stderr, "     %s\n", c.msg);
        snprintf(want, sizeof want, "model-gem-synth-diff60-synthetic-seed1-len%d-ctx%d", ctx,
                 ctx);
        const json_t *id = doc ? json_object_get(doc, "case_id") : NULL;
        TCHECK(json_is_string(id) && !strcmp(json_string_value(id), want));

        /* The check is not vacuous: another context, or the case id this writer once
         * wrote, is refused. */
        TCHECK(check_record(&c, path, ctx + 2, NULL) != 0 && strstr(c.msg, AN_GEOMETRY));
        if (doc) {
            char old[128];
            snprintf(old, sizeof old, "model-gem-synth-diff60-ctx%d-baseline-vs-fused-seed1",
                     ctx);
            json_object_set_new(doc, "case_id", json_string(old));
            memset(&c, 0, sizeof c);
            c.file = "edited";
            TCHECK(an_model_doc(&c, doc, ctx) != 0 && strstr(c.msg, "case_id: " AN_VALUE));
            json_decref(doc);
            doc = NULL;
        }

        /* The K-from-V record is another comparison: refused as a swapped file, and
         * still refused with its "comparison" field taken away. */
        snprintf(path, sizeof path, "%s/model-diff-gem-synth-diff60-ctx%d-seed1-k-from-v.json",
                 dir, ctx);
        TCHECK(check_record(&c, path, ctx, &doc) != 0 && strstr(c.msg, AN_SWAPPED) &&
               strstr(c.msg, "K-from-V comparison"));
        if (doc) {
            json_object_del(doc, "comparison");
            memset(&c, 0, sizeof c);
            c.file = "edited";
            TCHECK(an_model_doc(&c, doc, ctx) != 0);
            json_decref(doc);
        }
    }

    const char *files[] = {"diff60.gguf",
                           "model-diff-gem-synth-diff60-ctx30-seed1.json",
                           "model-diff-gem-synth-diff60-ctx31-seed1.json",
                           "model-diff-gem-synth-diff60-ctx30-seed1-k-from-v.json",
                           "model-diff-gem-synth-diff60-ctx31-seed1-k-from-v.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        remove_file(files[i]);
    TCHECK(rmdir(dir) == 0);
    return tcheck_summary("test_model_diff_records");
}
