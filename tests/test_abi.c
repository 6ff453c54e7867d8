/* test_abi: the ABI stamp Darknet and the plugin compare at load. */
#include <criterion/criterion.h>
#include <string.h>
#include "darknet_plugin.h"

/* ---- the ABI stamp ------------------------------------------------------ */

/* A Darknet and a plugin that differ in any one field refuse each other:
 * test_abi.sh sees layer, network and GPU differ at once; here each alone. */
Test(abi, every_field_counts)
{
    const dn_abi cur = DN_ABI_CURRENT;
    cr_assert_eq(cur.hooks_size, sizeof(dn_hooks));
    dn_abi a = cur;
    cr_assert(dn_abi_equal(&a, &cur));
    a = cur; a.api_version++; cr_assert(!dn_abi_equal(&a, &cur), "api_version");
    a = cur; a.layer_size++; cr_assert(!dn_abi_equal(&a, &cur), "layer_size");
    a = cur; a.network_size++; cr_assert(!dn_abi_equal(&a, &cur), "network_size");
    a = cur; a.load_args_size++; cr_assert(!dn_abi_equal(&a, &cur), "load_args_size");
    a = cur; a.gpu = !a.gpu; cr_assert(!dn_abi_equal(&a, &cur), "gpu");
    a = cur; a.hooks_size -= sizeof(void *); cr_assert(!dn_abi_equal(&a, &cur), "hooks_size: a hook fewer");
}
