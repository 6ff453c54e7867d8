/* -fsdp-help: the flags' table (fsdp_flags.c), the cfg keys' table
 * (fsdp_cfg_keys.c) and the environment's (fsdp_env.c), printed one line
 * each, or as the markdown tools/reference writes into docs/usage.md,
 * docs/cfg-keys.md and docs/environment.md.  Nothing here names a flag,
 * key or variable: a new one is a line in its table. */
#include <string.h>
#include "fsdp_cfg.h"
#include "fsdp_env.h"
#include "fsdp_flags.h"

static void flag_head(const fsdp_flag *fl, char *head, size_t n)
{
    if (fl->word) snprintf(head, n, "%s [%s]", fl->name, fl->word);
    else snprintf(head, n, "%s%s%s", fl->name, fl->arg ? " " : "", fl->arg ? fl->arg : "");
}

/* "  HEAD   HELP (default: D)": -fsdp-help's line. */
static void line(FILE *f, const char *head, const char *help, const char *dflt)
{
    fprintf(f, "  %-32s %s", head, help);
    if (dflt) fprintf(f, " (default: %s)", dflt);
    fputc('\n', f);
}

static void print_keys(FILE *f, fsdp_key_where where)
{
    for (int i = 0; i < fsdp_ncfg_keys; ++i) {
        const fsdp_cfg_key *k = &fsdp_cfg_keys[i];
        if (!(k->where & where)) continue;
        char head[64];
        snprintf(head, sizeof head, "%s=%s", k->name, k->values);
        line(f, head, k->help, k->dflt);
    }
}

void fsdp_help_print(FILE *f)
{
    fputs("darknet-fsdp (libdarknet_fsdp.so): fully sharded data parallel training.\n"
          "  mpirun -np N darknet -plugin libdarknet_fsdp.so [flags] classifier train DATA CFG [WEIGHTS]\n"
          "The cfg's batch is per rank (global batch = batch x N).  docs/usage.md, docs/cfg-keys.md and\n"
          "docs/environment.md are the reference.\n"
          "\nFlags (anywhere on the command line):\n", f);
    for (int i = 0; i < fsdp_nflags; ++i) {
        char head[64];
        flag_head(&fsdp_flag_table[i], head, sizeof head);
        line(f, head, fsdp_flag_table[i].help, fsdp_flag_table[i].dflt);
    }
    fputs("\ncfg keys, per layer:\n", f);
    print_keys(f, FSDP_KEY_LAYER);
    fputs("\ncfg keys, in [net]:\n", f);
    print_keys(f, FSDP_KEY_NET);
    fputs("\nEnvironment (pass it to every rank: mpirun -x NAME):\n", f);
    for (int i = 0; i < fsdp_nenv; ++i) {
        const fsdp_env_var *v = &fsdp_env_table[i];
        if (v->scope != FSDP_ENV_PLUGIN || v->tests_only || strncmp(v->name, "FSDP_", 5)) continue;
        char head[64];
        snprintf(head, sizeof head, "%s=%s", v->name, v->values);
        line(f, head, v->help, v->dflt);
    }
}

/* ---- markdown ------------------------------------------------------------ */

/* S in a table's cell: '|' escaped, NAME replaced by `name` where given. */
static void cell(FILE *f, const char *s, const char *name)
{
    fputs("| ", f);
    for (; s && *s; ++s) {
        if (name && !strncmp(s, "NAME", 4)) { fputs(name, f); s += 3; continue; }
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
    fputc(' ', f);
}

static void code_cell(FILE *f, const char *s)
{
    char c[160];
    snprintf(c, sizeof c, "`%s`", s);
    cell(f, c, NULL);
}

static void md_flags(FILE *f)
{
    fputs("<!-- reference: flags -->\n| flag | default | what it does |\n| --- | --- | --- |\n", f);
    for (int i = 0; i < fsdp_nflags; ++i) {
        char head[64];
        flag_head(&fsdp_flag_table[i], head, sizeof head);
        code_cell(f, head);
        cell(f, fsdp_flag_table[i].dflt ? fsdp_flag_table[i].dflt : "not given: off", NULL);
        cell(f, fsdp_flag_table[i].help, NULL);
        fputs("|\n", f);
    }
}

static void md_keys(FILE *f, fsdp_key_where where)
{
    fprintf(f, "<!-- reference: keys-%s -->\n| key | default | what it does |\n| --- | --- | --- |\n",
            where == FSDP_KEY_NET ? "net" : "layer");
    for (int i = 0; i < fsdp_ncfg_keys; ++i) {
        const fsdp_cfg_key *k = &fsdp_cfg_keys[i];
        if (!(k->where & where)) continue;
        char head[96];
        snprintf(head, sizeof head, "%s=%s", k->name, k->values);
        code_cell(f, head);
        cell(f, k->dflt, NULL);
        cell(f, k->help, NULL);
        fputs("|\n", f);
    }
}

static void md_env(FILE *f)
{
    static const char *title[FSDP_ENV_NSCOPES] = {
        "Read by the plugin", "Set by the launcher, read by the plugin", "Read by Darknet",
        "Read by the tools", "CMake options" };
    fputs("<!-- reference: env -->\n", f);
    for (int s = 0; s < FSDP_ENV_NSCOPES; ++s) {
        fprintf(f, "%s### %s\n\n| variable | default | mpirun -x | what it does |\n| --- | --- | --- | --- |\n",
                s ? "\n" : "", title[s]);
        for (int i = 0; i < fsdp_nenv; ++i) {
            const fsdp_env_var *v = &fsdp_env_table[i];
            if ((int)v->scope != s) continue;
            char head[96], help[512];
            snprintf(head, sizeof head, "%s=%s", v->name, v->values);
            snprintf(help, sizeof help, "%s%s", v->tests_only ? "tests only: " : "", v->help);
            code_cell(f, head);
            cell(f, v->dflt, NULL);
            cell(f, v->pass, v->name);
            cell(f, help, NULL);
            fputs("|\n", f);
        }
    }
}

void fsdp_help_markdown(FILE *f)
{
    md_flags(f);
    md_keys(f, FSDP_KEY_LAYER);
    md_keys(f, FSDP_KEY_NET);
    md_env(f);
}
