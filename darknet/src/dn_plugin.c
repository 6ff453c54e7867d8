#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dn_plugin.h"
#include "dn_rand.h"

dn_hooks dn_plugin = {0};

float *dn_grad_calloc(size_t n)
{
    return dn_plugin.owns_gradients ? NULL : calloc(n, sizeof(float));
}
static int seeded = 0;
static unsigned long seed_value = 0;
static int finished = 0;

int dn_seeded(void) { return seeded; }
unsigned long dn_seed(void) { return seed_value; }

size_t dn_sample_base(size_t step, int imgs)
{
    return (step * (size_t)DN_WORLD + (size_t)dn_plugin.rank) * (size_t)imgs;
}

/* Set before the loader threads start; read by them. */
static size_t layout_imgs = 0, layout_micro = 0;

void dn_sample_layout(int imgs, int micro)
{
    layout_imgs = imgs > 0 ? (size_t)imgs : 0;
    layout_micro = micro > 0 ? (size_t)micro : 0;
}

size_t dn_sample_index(size_t g)
{
    size_t world = (size_t)DN_WORLD;
    if(world == 1 || !layout_micro || layout_micro >= layout_imgs) return g;
    /* g = (step*world + rank)*imgs + k */
    size_t block = world * layout_imgs, in = g % block;
    size_t rank = in / layout_imgs, k = in % layout_imgs;
    return g - in + (k / layout_micro) * world * layout_micro + rank * layout_micro + k % layout_micro;
}

int dn_step_rand(size_t step)
{
    int r = seeded ? dn_rand_keyed(seed_value, step, DN_RAND_STREAM_STEP) : rand();
    DN_HOOK(broadcast_int, &r);
    return r;
}

int dn_bn_double(void)
{
    static int wide = -1;
    if(wide < 0){
        const char *v = getenv("DN_BN_DOUBLE");
        wide = v && !strcmp(v, "1");
    }
    return wide;
}

static size_t rows_total = 0, rows_threads = 0;

void dn_sample_rows(int total, int threads)
{
    rows_total = total > 0 ? (size_t)total : 0;
    rows_threads = threads > 0 ? (size_t)threads : 1;
}

/* Row r of a load as a position in the load's contiguous count: thread i
 * loads [i n / T, (i + 1) n / T), and the rows hold thread T - 1's block
 * first. */
static size_t load_position(size_t r)
{
    size_t n = rows_total, t = rows_threads, start = 0, i;
    if(!n || t <= 1 || r >= n) return r;
    for(i = t; i-- > 0;){
        size_t lo = i * n / t, hi = (i + 1) * n / t;
        if(r < start + (hi - lo)) return lo + (r - start);
        start += hi - lo;
    }
    return r;
}

size_t dn_micro_batch_index(const network *net)
{
    size_t world = (size_t)DN_WORLD, micro = net->batch > 0 ? (size_t)net->batch : 1;
    size_t seen = net->seen ? *net->seen : 0;
    return seen >= micro * world ? seen / (micro * world) - 1 : 0;
}

size_t dn_row_sample(const network *net, int b)
{
    size_t micro = net->batch > 0 ? (size_t)net->batch : 1, sub = net->subdivisions > 0 ? (size_t)net->subdivisions : 1;
    size_t mb = dn_micro_batch_index(net), row = (mb % sub) * micro + (size_t)b;
    return dn_sample_index(dn_sample_base(mb / sub, (int)(micro * sub)) + load_position(row));
}

/* Removes argv[i] and argv[i+1..i+n-1], keeping argv NULL-terminated. */
static void drop_args(int *argc, char **argv, int i, int n)
{
    int j;
    for(j = i; j + n <= *argc; ++j) argv[j] = argv[j + n];
    *argc -= n;
    argv[*argc] = 0;
}

/* Finds "-name VALUE" anywhere, removes both and returns VALUE (or NULL). */
static char *take_flag(int *argc, char **argv, const char *name)
{
    int i;
    for(i = 1; i < *argc; ++i){
        if(strcmp(argv[i], name) == 0){
            if(i + 1 >= *argc){
                fprintf(stderr, "darknet: %s needs a value\n", name);
                exit(2);
            }
            char *v = argv[i + 1];
            drop_args(argc, argv, i, 2);
            return v;
        }
    }
    return 0;
}

void dn_plugin_finish(int status)
{
    if(finished) return;
    finished = 1;
    if(dn_plugin.finish) dn_plugin.finish(dn_plugin.ctx, status);
}

int dn_plugin_check(int status)
{
    if(status >= 0) return status;
    dn_plugin_finish(status);
    exit(1);
}

static void load_plugin(const char *path, int *argc, char **argv);
static void refuse_plugin_flags(int argc, char **argv);

void dn_plugin_setup(int *argc, char **argv)
{
    char *path = take_flag(argc, argv, "-plugin");
    char *seed = take_flag(argc, argv, "-seed");
    if(seed){
        char *end = 0;
        errno = 0;
        unsigned long v = strtoul(seed, &end, 10);
        if(errno || !end || *end || seed[0] == '-' || seed[0] == 0){
            fprintf(stderr, "darknet: -seed %s: not a non-negative integer\n", seed);
            exit(2);
        }
        seeded = 1;
        seed_value = v;
        srand((unsigned)v);
    }
    if(!path){
        path = getenv("DARKNET_PLUGIN");
        if(path && !path[0]) path = 0;
    }
    dn_plugin.world = 1;
    if(path) load_plugin(path, argc, argv);
    refuse_plugin_flags(*argc, argv);
}

/* Loads the plugin at path and lets it take its flags out of argv. */
static void load_plugin(const char *path, int *argc, char **argv)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if(!h){
        fprintf(stderr, "darknet: cannot load plugin %s: %s\n", path, dlerror());
        exit(2);
    }
    dn_plugin_init_fn init = (dn_plugin_init_fn)dlsym(h, DN_PLUGIN_INIT_SYMBOL);
    if(!init){
        fprintf(stderr, "darknet: %s is not a Darknet plugin (no %s)\n", path, DN_PLUGIN_INIT_SYMBOL);
        exit(2);
    }
    dn_abi abi = DN_ABI_CURRENT;
    int st = init(&abi, argc, argv, &dn_plugin);
    if(st == DN_DONE) exit(0);   /* e.g. it printed its help */
    if(st < 0){
        fprintf(stderr, "darknet: plugin %s failed to start (status %d)\n", path, st);
        exit(st == DN_ERR_ABI ? 3 : 1);
    }
    if(dn_plugin.world < 1) dn_plugin.world = 1;
}

/* A -fsdp-* flag nobody took would reach the command, which takes it for a
 * file name ("Couldn't open file: -fsdp-stats"). */
static void refuse_plugin_flags(int argc, char **argv)
{
    int i;
    for(i = 1; i < argc; ++i){
        if(strncmp(argv[i], "-fsdp", 5) == 0){
            fprintf(stderr, "darknet: %s is a flag of the darknet-fsdp plugin, and no plugin took it: "
                    "load the plugin with -plugin PATH (build/libdarknet_fsdp.so) or DARKNET_PLUGIN=PATH\n", argv[i]);
            exit(2);
        }
    }
}

/* The darknet-fsdp plugin's cfg keys, when no loaded plugin claimed them.
 * frozen=1 changes what training computes, so training without the plugin
 * must not go on as if it were not there (dn_plugin_train_check); shard
 * keys, sync_bn and recompute only say how ranks share the work and what
 * they keep, and one process computes the same without them. */
static char *frozen_at = 0;   /* "file:line: frozen=V" of the first one */

int dn_plugin_unclaimed_key(const char *file, int line, const char *key, const char *val)
{
    static int noted = 0;
    if(strcmp(key, "frozen") == 0){
        if(strcmp(val, "0") != 0 && !frozen_at){
            size_t n = strlen(file) + strlen(val) + 48;
            frozen_at = malloc(n);
            if(frozen_at) snprintf(frozen_at, n, "%s:%d: frozen=%s", file, line, val);
        }
        return 1;
    }
    if(strncmp(key, "shard", 5) == 0 || strcmp(key, "reshard_after_forward") == 0 || strcmp(key, "sync_bn") == 0 ||
       strcmp(key, "recompute") == 0){
        if(!noted){
            fprintf(stderr, "%s:%d: note: %s=%s and the other sharding keys take effect only with the "
                    "darknet-fsdp plugin (-plugin PATH); without it this process runs the network unsharded\n",
                    file, line, key, val);
            noted = 1;
        }
        return 1;
    }
    return 0;
}

void dn_plugin_train_check(void)
{
    if(!frozen_at) return;
    fprintf(stderr, "%s needs the darknet-fsdp plugin: run with -plugin PATH "
            "(build/libdarknet_fsdp.so) or DARKNET_PLUGIN=PATH; without it Darknet would train this layer\n",
            frozen_at);
    dn_plugin_finish(DN_ERR_CONFIG);
    exit(1);
}

void dn_plugin_help(const char *prog)
{
    printf("usage: %s [global flags] COMMAND [ARGS...]\n"
           "\n"
           "Commands (pjreddie's Darknet; each prints its own usage when run without arguments):\n"
           "  classifier train|valid|predict|... DATA CFG [WEIGHTS]   image classification\n"
           "  detector train|valid|test|... DATA CFG [WEIGHTS]        object detection\n"
           "  rnn, segmenter, regressor, cifar, go, ...               other tasks\n"
           "  partial CFG WEIGHTS OUT N      write the first N layers of WEIGHTS to OUT\n"
           "  ops CFG, speed CFG             count a network's operations, time its forward pass\n"
           "\n"
           "Global flags (anywhere on the command line):\n"
           "  -plugin PATH    load a plugin before the command runs (or DARKNET_PLUGIN=PATH)\n"
           "  -seed S         reproducible run: the same seed gives the same weights file\n"
           "  -i N            the GPU to use (GPU builds)\n"
           "  -nogpu          compute on the CPU (GPU builds)\n"
           "  -clear          (train) start at step 0, not at the step the weights file was saved at\n"
           "  help, -h, --help  this help\n", prog);
    if(dn_plugin.help){
        printf("\n");
        fflush(stdout);
        dn_plugin.help(dn_plugin.ctx);
    }else{
        printf("\nNo plugin loaded.  With one (e.g. -plugin build/libdarknet_fsdp.so) this help\n"
               "also lists the plugin's flags and cfg keys.\n");
    }
    fflush(stdout);
}
