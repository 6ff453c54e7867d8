#ifndef DN_PLUGIN_INTERNAL_H
#define DN_PLUGIN_INTERNAL_H
/* Darknet's side of the plugin interface (see darknet_plugin.h). */
#include "darknet_plugin.h"

extern dn_hooks dn_plugin;

/* Takes -plugin PATH, DARKNET_PLUGIN and -seed S out of argv, loads the
 * plugin and lets it take its own flags.  Exits non-zero on failure. */
void dn_plugin_setup(int *argc, char **argv);
/* `darknet help`: Darknet's commands and global flags, then the plugin's. */
void dn_plugin_help(const char *prog);
/* A cfg option no plugin claimed: returns 1 if it is a darknet-fsdp key
 * (noted, or refused at training by dn_plugin_train_check), 0 if not. */
int dn_plugin_unclaimed_key(const char *file, int line, const char *key, const char *val);
/* Before a training step: ends the run if the cfg froze a layer that no
 * plugin will keep frozen. */
void dn_plugin_train_check(void);
/* Returns status when it is not an error; otherwise ends the run. */
int dn_plugin_check(int status);
void dn_plugin_finish(int status);

/* A layer's gradient array of n floats: zeroed, or NULL when the plugin
 * keeps gradients itself (dn_hooks.owns_gradients). */
float *dn_grad_calloc(size_t n);

int dn_seeded(void);
unsigned long dn_seed(void);
/* Index in the global sample stream of this rank's first sample at a step
 * of `imgs` samples per rank. */
size_t dn_sample_base(size_t step, int imgs);
/* A rand() value for a choice every rank must make alike at `step` (the
 * multi-scale input size): with -seed drawn from (seed, step), so whatever
 * else consumed rand() does not matter; without, rank 0's rand(). */
int dn_step_rand(size_t step);
/* DN_BN_DOUBLE=1 in the environment: batch norm's sums over the batch
 * (mean, variance and their deltas on the host) accumulate in double.  For
 * the tests' oracle: how far batch norm's float rounding alone moves a net,
 * what N ranks' sums in another order may move it too. */
int dn_bn_double(void);
/* The loader's shape (load_threads): `total` rows per load, split among
 * `threads` threads whose blocks it concatenates last thread first. */
void dn_sample_rows(int total, int threads);
/* The micro-batch being trained, counted over the run in the world's
 * micro-batches (net->seen already counts it): the same on every rank and
 * in one process with the world's batch. */
size_t dn_micro_batch_index(const network *net);
/* The global sample in row b of the micro-batch being trained: where the
 * loader put it (dn_sample_rows) and which one it is (dn_sample_base,
 * dn_sample_index), as in one process with the world's batch.  Forward's
 * keyed draws (dn_keyed.h) use it. */
size_t dn_row_sample(const network *net, int b);
/* How a step's samples fall into micro-batches (subdivisions): each rank
 * loads `imgs` samples per step and trains them in micro-batches of `micro`.
 * Its k-th sample is then the global stream's micro-batch k/micro, position
 * rank*micro + k%micro, as in one process with the world's batch, so batch
 * statistics (batch norm) see the same samples together.  Without a call, or
 * with one micro-batch per step, or one rank, a rank's samples are one
 * contiguous block (dn_sample_base + k). */
void dn_sample_layout(int imgs, int micro);
/* The loader's sample index under that layout: g counts contiguously from
 * dn_sample_base (what the loader threads count); returns the index whose
 * generator the sample uses. */
size_t dn_sample_index(size_t g);

#define DN_WORLD (dn_plugin.world > 0 ? dn_plugin.world : 1)
#define DN_HOOK(name, ...) \
    (dn_plugin.name ? dn_plugin_check(dn_plugin.name(dn_plugin.ctx, __VA_ARGS__)) : DN_OK)

#endif
