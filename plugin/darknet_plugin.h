/* darknet_plugin.h: the interface between patched Darknet and a plugin.
 *
 * Darknet loads a plugin with `darknet -plugin PATH ...` or DARKNET_PLUGIN=PATH,
 * calls its `darknet_plugin_init` once before the command runs, and then calls
 * the hooks the plugin filled in (a NULL hook is never called).  With no plugin,
 * or a plugin that fills in no hook, Darknet behaves exactly as stock.
 *
 * Hook return values: DN_OK, DN_SKIP where a hook documents it, or a negative
 * dn_status.  A negative value ends the run: Darknet calls `finish` with the
 * status and exits non-zero.  The plugin prints its own message first.
 *
 * Layers are passed by value inside Darknet's loops; a hook that changes a
 * layer must change net->layers[i], which the "before" hooks see before the
 * loop copies it.
 */
#ifndef DARKNET_PLUGIN_H
#define DARKNET_PLUGIN_H

#include <stddef.h>
#include "darknet.h"

/* 2: dn_hooks gained owns_gradients, layer_built and load_layer, and dn_abi
 * hooks_size.  3: train_inputs, sample_input and forward_start, and
 * load_args plugin_inputs. */
#define DN_PLUGIN_API_VERSION 3

typedef enum {
    DN_OK = 0,
    DN_SKIP = 1,          /* before-hooks: Darknet skips the step itself */
    DN_ERR_CONFIG = -1,   /* bad cfg, flag or file: the user's to fix */
    DN_ERR_ABI = -2,      /* plugin and Darknet built differently */
    DN_ERR_RUNTIME = -3,  /* communication, memory, I/O */
    DN_DONE = 2,          /* init: the plugin did all the command line asked
                             (printed its help); Darknet exits 0 */
} dn_status;

typedef enum { DN_BEFORE = 0, DN_AFTER = 1 } dn_when;

/* What a bn_sync call carries: one float per channel of a batch-norm layer
 * in training, right after Darknet computed it over this process's batch. */
typedef enum {
    DN_BN_MEAN = 0,           /* forward: the batch mean */
    DN_BN_VARIANCE = 1,       /* forward: the variance about that mean, divided by count - 1 */
    DN_BN_MEAN_DELTA = 2,     /* backward: mean_delta */
    DN_BN_VARIANCE_DELTA = 3, /* backward: variance_delta */
} dn_bn_what;

/* What Darknet was built as; the plugin refuses to run on a mismatch, since
 * `layer` and `network` change layout with -DGPU and with our patches, and
 * `dn_hooks` grows at its end with each new hook: a plugin that fills in a
 * hook an older Darknet lacks would write past that Darknet's struct.  New
 * fields go at the end, so a dn_abi of another API version still has
 * api_version and the sizes where this one has them. */
typedef struct dn_abi {
    int api_version;
    size_t layer_size;
    size_t network_size;
    size_t load_args_size;
    int gpu;
    size_t hooks_size;
} dn_abi;

#ifdef GPU
#define DN_ABI_GPU 1
#else
#define DN_ABI_GPU 0
#endif
/* sizeof(dn_hooks) is taken where the macro is used, after dn_hooks below. */
#define DN_ABI_CURRENT { DN_PLUGIN_API_VERSION, sizeof(layer), sizeof(network), \
                         sizeof(load_args), DN_ABI_GPU, sizeof(dn_hooks) }

/* Field by field: padding bytes in dn_abi are not comparable.  api_version
 * first: a Darknet of API 1 passes a dn_abi without hooks_size, which is read
 * only when the versions agree. */
static inline int dn_abi_equal(const dn_abi *a, const dn_abi *b)
{
    return a->api_version == b->api_version && a->layer_size == b->layer_size &&
           a->network_size == b->network_size && a->load_args_size == b->load_args_size &&
           a->gpu == b->gpu && a->hooks_size == b->hooks_size;
}

typedef struct dn_hooks {
    void *ctx;
    /* Every option of every cfg section, after Darknet built that section's
     * layer (layer = -1 for [net]).  Return 1 to claim the key (Darknet then
     * does not call it unused), 0 to leave it. */
    int (*cfg_option)(void *ctx, const char *cfg, int line, int layer,
                      const char *section, const char *key, const char *val);
    /* After load_network: cfg parsed, weights loaded, -clear applied. */
    int (*network_built)(void *ctx, network *net, const char *cfg);
    /* Around each layer in the forward, backward and update loops (CPU and
     * GPU).  backward/update DN_BEFORE may return DN_SKIP. */
    int (*forward_layer)(void *ctx, network *net, int i, dn_when when);
    int (*backward_layer)(void *ctx, network *net, int i, dn_when when);
    int (*update_layer)(void *ctx, network *net, int i, dn_when when, update_args *a);
    /* Around the whole update; DN_BEFORE may return DN_SKIP, which skips
     * every layer's own update (the per-layer hooks still run). */
    int (*update)(void *ctx, network *net, dn_when when, update_args *a);
    /* After train_network (and each step of rnn train): the loss Darknet
     * will report, which the hook may replace (e.g. by its mean over ranks). */
    int (*train_step)(void *ctx, network *net, float *loss);
    /* After load_weights read `file` into net. */
    int (*weights_loaded)(void *ctx, network *net, const char *file);
    /* Saving: begin returns DN_OK to write the file in this process, DN_SKIP
     * to go through the layers without writing (other ranks); save_layer runs
     * around each layer; end runs after the file is in place. */
    int (*save_begin)(void *ctx, network *net, const char *file);
    int (*save_layer)(void *ctx, network *net, int i, dn_when when);
    int (*save_end)(void *ctx, network *net, const char *file);
    /* Before free_network() frees net's layers: the plugin takes back any
     * buffer it pointed a layer at. */
    int (*network_free)(void *ctx, network *net);
    /* Once, at the end of the run (status 0) or before an error exit. */
    void (*finish)(void *ctx, int status);
    /* Rank and world size, for Darknet's data loader and batch accounting. */
    int rank;
    int world;
    /* The GPU Darknet uses unless -i says otherwise (GPU builds; 0 if unset). */
    int device;
    /* Batch norm in training (net->train: [convolutional], [connected],
     * [batchnorm], and the layers inside recurrent ones), after Darknet
     * computed `what` into x[0 .. channels) over `count` values per channel
     * (batch * out_h * out_w); the hook may replace x, e.g. by the statistics
     * of the batch of every rank, before Darknet uses it.  `layer` is
     * net->index; net is the loop's by-value copy (compare net->layers to
     * identify the network).  x is a device pointer when net->gpu_index >= 0
     * (GPU builds).  While it is set, GPU builds with cuDNN take Darknet's own
     * batch-norm kernels instead of cuDNN's (which give no point to step in
     * between); the plugin may clear it once the network is built.  Darknet
     * reads mean_delta only after the variance_delta call (normalize_delta),
     * so a plugin may replace both at that call. */
    int (*bn_sync)(void *ctx, network *net, int layer, dn_bn_what what, float *x, int channels, int count);
    /* A choice every rank must make alike (the multi-scale input size drawn
     * without -seed): every rank leaves with rank 0's *value. */
    int (*broadcast_int)(void *ctx, int *value);
    /* After resize_network() reallocated net's outputs, deltas and workspace
     * (weights are untouched): the plugin re-applies what it did to those
     * buffers at network_built. */
    int (*network_resized)(void *ctx, network *net);
    /* `darknet help`: print the plugin's flags and cfg keys on stdout. */
    void (*help)(void *ctx);
    /* Set by the plugin at init: layer constructors then allocate no
     * gradient arrays (weight_updates, bias_updates, scale_updates are
     * NULL, on the host; the device twins are zeroed as from a NULL host
     * array), and the plugin points them at its own buffers while a layer
     * runs backward.  Saves a model's worth of memory before the network
     * is sharded. */
    int owns_gradients;
    /* While parsing, right after layer i was stored in net->layers (its
     * parameters allocated and initialised; later layers not yet built). */
    int (*layer_built)(void *ctx, network *net, int i);
    /* Around load_weights reading layer i (layers marked dontload are
     * skipped): DN_BEFORE ahead of Darknet's by-value copy of the layer, so
     * the hook may give it arrays to read into; DN_AFTER once read. */
    int (*load_layer)(void *ctx, network *net, int i, dn_when when);
    /* classifier train, before its loader's first load: the loader's
     * arguments.  DN_SKIP: the plugin supplies each sample's input through
     * sample_input, and the loader decodes no image. */
    int (*train_inputs)(void *ctx, network *net, load_args *args);
    /* In a loader thread, for each sample once its random draws are made
     * (the same draws as without the plugin): write the row Darknet trains
     * on (cols floats) for the image at `path`, mirrored when flip is 1. */
    int (*sample_input)(void *ctx, const char *path, int flip, float *row, int cols);
    /* forward_network (host), before its loop: returns the first layer to
     * run (0: all), having filled the outputs that layer and the ones after
     * it read from the layers before it. */
    int (*forward_start)(void *ctx, network *net);
} dn_hooks;

/* The one symbol a plugin exports.  It may remove its own flags from argv
 * (updating *argc).  Returns DN_OK or a negative dn_status. */
typedef int (*dn_plugin_init_fn)(const dn_abi *abi, int *argc, char **argv, dn_hooks *hooks);
#define DN_PLUGIN_INIT_SYMBOL "darknet_plugin_init"
int darknet_plugin_init(const dn_abi *abi, int *argc, char **argv, dn_hooks *hooks);

#endif
