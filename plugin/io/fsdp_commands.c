/* fsdp_commands.c: which Darknet commands may train on more than one rank.
 *
 * A training command is exact on N ranks only when its loader hands each
 * rank its block of the global sample stream and its loop counts the global
 * batch (patches 0006, 0007, 0024, 0027, 0039): `classifier train`,
 * `detector train`, `regressor train` and `rnn train`.
 * Every other training command would run on N ranks, but each rank would
 * draw its own samples from its own rand() and the weights would match no
 * single process: refused before any work, on every rank alike. */
#include <string.h>
#include "fsdp_commands.h"

static const char *const exact[][2] = {
    {"classifier", "train"},
    {"detector", "train"},
    {"regressor", "train"},
    {"rnn", "train"},
};

/* Darknet's own global flags may precede the command; skip them. */
static int next_word(int argc, char **argv, int i)
{
    while (i < argc && argv[i][0] == '-') i += !strcmp(argv[i], "-i") ? 2 : 1;
    return i;
}

static int trains(const char *sub)
{
    return strstr(sub, "train") != NULL || !strcmp(sub, "distill");
}

int fsdp_command_trains_exactly(int argc, char **argv)
{
    int c = next_word(argc, argv, 1);
    int s = next_word(argc, argv, c + 1);
    if (c >= argc || s >= argc) return 0;
    for (size_t k = 0; k < sizeof exact / sizeof exact[0]; ++k)
        if (!strcmp(argv[c], exact[k][0]) && !strcmp(argv[s], exact[k][1])) return 1;
    return 0;
}

fsdp_status fsdp_check_command(int argc, char **argv, int world)
{
    if (world <= 1) return FSDP_OK;
    int c = next_word(argc, argv, 1);
    int s = next_word(argc, argv, c + 1);
    if (c >= argc || s >= argc || !trains(argv[s]) || fsdp_command_trains_exactly(argc, argv)) return FSDP_OK;
    return fsdp_fail(FSDP_ERR_CONFIG, "'%s %s' cannot train exactly on %d ranks (its data loader and loop do "
                     "not split the global batch); run it as one process, or use 'classifier train', "
                     "'detector train', 'regressor train' or 'rnn train'", argv[c], argv[s], world);
}
