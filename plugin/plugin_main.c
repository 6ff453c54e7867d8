/* Placeholder entry point while the engine is being built. */
#include "darknet_plugin.h"
int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *hooks)
{
    (void)abi; (void)argc; (void)argv; (void)hooks;
    return DN_OK;
}
