/* A test plugin that registers every hook and counts its calls, to prove
 * that patched Darknet calls each hook where documented.  At the end of the
 * run it writes "name count" lines to $FSDP_COUNT_FILE.  It changes nothing,
 * so a run with it must give the same weights as a run without a plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "darknet_plugin.h"

enum { C_CFG, C_CFG_CLAIMED, C_BUILT, C_FWD_B, C_FWD_A, C_BWD_B, C_BWD_A, C_UPDL_B, C_UPDL_A,
       C_UPD_B, C_UPD_A, C_STEP, C_LOADED, C_SAVE_BEGIN, C_SAVE_LAYER_B, C_SAVE_LAYER_A,
       C_SAVE_END, C_N };
static const char *names[C_N] = { "cfg_option", "cfg_claimed", "network_built", "forward_before",
    "forward_after", "backward_before", "backward_after", "update_layer_before",
    "update_layer_after", "update_before", "update_after", "train_step", "weights_loaded",
    "save_begin", "save_layer_before", "save_layer_after", "save_end" };
static long counts[C_N];
static int layers;

static int cfg_option(void *c, const char *cfg, int line, int layer, const char *sec,
                      const char *key, const char *val)
{
    ++counts[C_CFG];
    /* Claims the key "counter_key" so the "Unused field" warning can be checked. */
    if (strcmp(key, "counter_key") == 0) { ++counts[C_CFG_CLAIMED]; return 1; }
    return 0;
}
static int built(void *c, network *net, const char *cfg) { ++counts[C_BUILT]; layers = net->n; return DN_OK; }
static int fwd(void *c, network *net, int i, dn_when w) { ++counts[w ? C_FWD_A : C_FWD_B]; return DN_OK; }
static int bwd(void *c, network *net, int i, dn_when w) { ++counts[w ? C_BWD_A : C_BWD_B]; return DN_OK; }
static int updl(void *c, network *net, int i, dn_when w, update_args *a) { ++counts[w ? C_UPDL_A : C_UPDL_B]; return DN_OK; }
static int upd(void *c, network *net, dn_when w, update_args *a) { ++counts[w ? C_UPD_A : C_UPD_B]; return DN_OK; }
static int step(void *c, network *net, float *loss) { ++counts[C_STEP]; return DN_OK; }
static int loaded(void *c, network *net, const char *f) { ++counts[C_LOADED]; return DN_OK; }
static int sbegin(void *c, network *net, const char *f) { ++counts[C_SAVE_BEGIN]; return DN_OK; }
static int slayer(void *c, network *net, int i, dn_when w) { ++counts[w ? C_SAVE_LAYER_A : C_SAVE_LAYER_B]; return DN_OK; }
static int send(void *c, network *net, const char *f) { ++counts[C_SAVE_END]; return DN_OK; }

static void finish(void *c, int status)
{
    const char *path = getenv("FSDP_COUNT_FILE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) return;
    fprintf(f, "layers %d\nstatus %d\n", layers, status);
    for (int i = 0; i < C_N; ++i) fprintf(f, "%s %ld\n", names[i], counts[i]);
    fclose(f);
}

int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *h)
{
    dn_abi mine = DN_ABI_CURRENT;
    if (!dn_abi_equal(abi, &mine)) return DN_ERR_ABI;
    h->cfg_option = cfg_option; h->network_built = built; h->forward_layer = fwd;
    h->backward_layer = bwd; h->update_layer = updl; h->update = upd; h->train_step = step;
    h->weights_loaded = loaded; h->save_begin = sbegin; h->save_layer = slayer;
    h->save_end = send; h->finish = finish;
    return DN_OK;
}
