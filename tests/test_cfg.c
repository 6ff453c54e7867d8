/* test_cfg: the plugin's cfg keys: what it claims, the values it refuses
 * (by file and line) while reading on, group names, and the bound on their
 * nesting. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>
#include "fsdp_cfg.h"

/* ---- cfg keys ---------------------------------------------------------- */

Test(cfg, claims_its_keys_and_parses_values)
{
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 2, -1, "shard", "grad_op"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 3, -1, "shard_auto_group", "1000"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 4, -1, "batch", "8"), 0, "Darknet's own key is not ours");
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 9, 2, "frozen", "1"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 10, 2, "shard_group", "trunk.block-1_a"), 1);
    cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 11, 2, "filters", "8"), 0);
    cr_assert_eq(c.strategy, FSDP_SHARD_GRAD_OP);
    cr_assert_eq(c.auto_group, 1000);
    cr_assert_eq(c.nlayers, 3);
    cr_assert_eq(c.layers[2].frozen, 1);
    cr_assert_str_eq(c.layers[2].group, "trunk.block-1_a");
    cr_assert_eq(c.layers[2].group_line, 10);
    cr_assert_eq(c.error, FSDP_OK);
    fsdp_cfg_free(&c);
}

Test(cfg, rejects_bad_values_but_keeps_reading)
{
    const char *bad[][3] = { { "-1", "shard", "zero3" }, { "-1", "reshard_after_forward", "2" },
                             { "-1", "shard_prefetch", "yes" }, { "-1", "shard_auto_group", "1e3" },
                             { "-1", "shard_foo", "1" }, { "-1", "frozen", "1" }, { "0", "frozen", "true" },
                             { "0", "shard_group", "a..b" }, { "0", "shard_group", ".a" },
                             { "0", "shard_group", "a." }, { "0", "shard_group", "a/b" }, { "0", "shards", "1" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        fsdp_cfg c;
        fsdp_cfg_init(&c);
        cr_assert_eq(fsdp_cfg_option(&c, "a.cfg", 7, atoi(bad[i][0]), bad[i][1], bad[i][2]), 1,
                     "%s=%s is the plugin's key", bad[i][1], bad[i][2]);
        cr_assert_eq(c.error, FSDP_ERR_CONFIG, "%s=%s must be an error", bad[i][1], bad[i][2]);
        fsdp_cfg_free(&c);
    }
}

Test(cfg, group_names)
{
    cr_assert(fsdp_group_name_valid("a"));
    cr_assert(fsdp_group_name_valid("trunk.block1.conv-2_x"));
    cr_assert_not(fsdp_group_name_valid(""));
    cr_assert_not(fsdp_group_name_valid("a..b"));
    cr_assert_not(fsdp_group_name_valid("a.b."));
    cr_assert_not(fsdp_group_name_valid("(root)"));
}


static char *nested(int levels)
{
    char *s = malloc((size_t)levels * 8 + 1);
    s[0] = 0;
    for (int i = 0; i < levels; ++i) sprintf(s + strlen(s), "%sg%d", i ? "." : "", i);
    return s;
}

/* A 20,000-level name once took 1.7 GB in the plan: refused by its line. */
Test(cfg, group_nesting_is_bounded, .init = cr_redirect_stderr)
{
    fsdp_cfg c;
    fsdp_cfg_init(&c);
    char *ok = nested(FSDP_MAX_GROUP_DEPTH), *deep = nested(FSDP_MAX_GROUP_DEPTH + 1);
    fsdp_cfg_option(&c, "net.cfg", 3, 0, "shard_group", ok);
    cr_assert_eq(c.error, FSDP_OK);
    fsdp_cfg_option(&c, "net.cfg", 9, 1, "shard_group", deep);
    cr_assert_eq(c.error, FSDP_ERR_CONFIG);
    fflush(stderr);
    cr_assert_stderr_eq_str("fsdp: net.cfg:9: shard_group=g0.g1.g2.g3.g4.g5.g6.g7.g8.g9.g10.g11.g1...: 65 levels; "
                            "groups nest at most 64 deep\n");
    free(ok);
    free(deep);
    fsdp_cfg_free(&c);
}

/* ---- the defaults -fsdp-help prints are the ones applied ----------------- */

/* Whether V is one of VALUES ("full|grad_op|none"): a default said as a
 * value, which given explicitly must change nothing. */
static int one_of(const char *v, const char *values)
{
    size_t n = strlen(v);
    for (const char *p = values; p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (!strncmp(p, v, n) && (p[n] == '|' || !p[n])) return 1;
    return 0;
}

static void same_as_unset(const fsdp_cfg *a, const fsdp_cfg *b, const char *key)
{
    cr_assert_eq(a->strategy, b->strategy, "%s", key);
    cr_assert_eq(a->reshard_after_forward, b->reshard_after_forward, "%s", key);
    cr_assert_eq(a->wire, b->wire, "%s", key);
    cr_assert_eq(a->sync_bn, b->sync_bn, "%s", key);
    cr_assert_eq(a->recompute, b->recompute, "%s", key);
    cr_assert_eq(a->error, FSDP_OK, "%s", key);
    if (a->nlayers) {
        cr_assert_eq(a->layers[0].frozen, 0, "%s", key);
        cr_assert_eq(a->layers[0].recompute, 0, "%s", key);
        cr_assert_null(a->layers[0].group, "%s", key);
    }
}

Test(cfg, each_default_the_table_prints_is_the_one_applied)
{
    int checked = 0;
    for (int i = 0; i < fsdp_ncfg_keys; ++i) {
        const fsdp_cfg_key *k = &fsdp_cfg_keys[i];
        if (!one_of(k->dflt, k->values)) continue;   /* said in words: a run decides (fsdp_engine.c) */
        for (int where = FSDP_KEY_LAYER; where <= FSDP_KEY_NET; ++where) {
            if (!(k->where & where)) continue;
            fsdp_cfg unset, given;
            fsdp_cfg_init(&unset);
            fsdp_cfg_init(&given);
            cr_assert_eq(fsdp_cfg_option(&given, "d.cfg", 1, where == FSDP_KEY_NET ? -1 : 0, k->name, k->dflt), 1,
                         "%s", k->name);
            same_as_unset(&given, &unset, k->name);
            fsdp_cfg_free(&unset);
            fsdp_cfg_free(&given);
            ++checked;
        }
    }
    cr_assert_geq(checked, 7, "the keys with a value as default: %d", checked);
}
