/* The plugin's cfg keys: the one table fsdp_cfg.c checks keys against and
 * -fsdp-help prints (docs/DESIGN.md, "cfg keys").  A key fsdp_cfg.c reads
 * belongs here, with its line of help. */
#include <string.h>
#include "fsdp_cfg.h"
#include "fsdp_groups.h"

const fsdp_cfg_key fsdp_cfg_keys[] = {
    { "frozen", FSDP_KEY_LAYER, "0|1", "0",
      "1: the layer's weights never change (no gradient, optimizer state, decay or momentum); it runs as in inference" },
    { "shard_group", FSDP_KEY_LAYER, "a.b.c", "the root group",
      "the layer's group: c nested in b nested in a ([A-Za-z0-9_-]+ joined by dots)" },
    { "shard", FSDP_KEY_NET, "full|grad_op|none", "full",
      "shard parameters, gradients and optimizer state (full), gradients and state (grad_op), or nothing" },
    { "reshard_after_forward", FSDP_KEY_NET, "1|0", FSDP_STR(FSDP_CFG_DEFAULT_RESHARD),
      "free a group's gathered parameters after its forward (the root keeps its own)" },
    { "shard_prefetch", FSDP_KEY_NET, "0|1",
      "1 where the exchanges go machine to machine (ranks on several machines, as many on each, FSDP_SHM not 0); 0 "
      "otherwise",
      "gather the next group while this one computes" },
    { "shard_node_shared", FSDP_KEY_NET, "1|0", "1 where every rank shares one machine; 0 on several",
      "shard=full: keep the parameters once per machine in shared memory, so gathering moves nothing; on several "
      "machines 1 is hybrid sharding" },
    { "shard_wire", FSDP_KEY_NET, "fp32|bf16|int8", "fp32",
      "how parameters and gradient sums cross between machines: fp32 (exact), bf16, or int8 in blocks of 256 "
      "with an fp32 scale each; the optimizer's part and state stay fp32, and nothing changes within a machine" },
    { "shard_auto_group", FSDP_KEY_NET, "N",
      "where the cfg names no shard_group: a " FSDP_STR(FSDP_DEFAULT_GROUPS) "th of the model, at least "
      FSDP_STR(FSDP_DEFAULT_GROUP_MIN) "; else 0",
      "put ungrouped layers into groups auto0, auto1, ... of at least N parameters; 0: none" },
    { "sync_bn", FSDP_KEY_NET, "1|0", FSDP_STR(FSDP_CFG_DEFAULT_SYNC_BN),
      "1: trainable batch norm normalises with the global batch's statistics; 0: each rank's own" },
    { "recompute", FSDP_KEY_BOTH, "0|1", "0",
      "1: the layer's group keeps only its output between forward and backward and runs its forward again "
      "before its backward (activation checkpointing); in [net], every group that can" },
};
const int fsdp_ncfg_keys = (int)(sizeof fsdp_cfg_keys / sizeof fsdp_cfg_keys[0]);

const fsdp_cfg_key *fsdp_cfg_key_find(const char *name)
{
    for (int i = 0; i < fsdp_ncfg_keys; ++i)
        if (!strcmp(fsdp_cfg_keys[i].name, name)) return &fsdp_cfg_keys[i];
    return NULL;
}

const char *fsdp_cfg_keys_known(fsdp_key_where where)
{
    static char list[2][512];
    char *out = list[where == FSDP_KEY_NET];
    if (out[0]) return out;
    for (int i = 0; i < fsdp_ncfg_keys; ++i) {
        if (!(fsdp_cfg_keys[i].where & where)) continue;
        if (out[0]) strncat(out, ", ", sizeof list[0] - strlen(out) - 1);
        strncat(out, fsdp_cfg_keys[i].name, sizeof list[0] - strlen(out) - 1);
    }
    return out;
}
