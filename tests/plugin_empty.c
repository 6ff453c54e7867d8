/* A plugin that registers no hooks: Darknet must behave exactly as stock. */
#include "darknet_plugin.h"
int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *h) { return DN_OK; }
