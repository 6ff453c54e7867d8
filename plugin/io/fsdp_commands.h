/* fsdp_commands.h: refuse training commands the plugin cannot make exact. */
#ifndef FSDP_COMMANDS_H
#define FSDP_COMMANDS_H
#include "fsdp.h"

/* argv as the plugin sees it (its own flags taken out).  FSDP_OK at world 1,
 * for non-training commands and for the commands that split the global
 * batch; otherwise an error naming the command. */
fsdp_status fsdp_check_command(int argc, char **argv, int world);
/* Whether the command is one of those (`classifier train`, `detector
 * train`, `regressor train`, `rnn train`): they build their one network
 * with load_network, so the network_built hook follows the build. */
int fsdp_command_trains_exactly(int argc, char **argv);

#endif
