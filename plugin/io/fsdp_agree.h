/* fsdp_agree.h: what every rank must agree on before the first step, beyond
 * the layout plan the engine checks (docs/DESIGN.md, "Agreement"):
 *
 *   - every cfg option of every section, as text: [net] (batch,
 *     subdivisions, learning rate and policy, momentum, decay, max_batches,
 *     augmentation) and every layer's hyperparameters; a difference names
 *     the first option where the ranks' cfgs part, file:line, on every rank;
 *   - the weights file each rank loaded: whether one was, its size, its
 *     `seen` after -clear, and a checksum of its bytes; the training step
 *     counters it leaves (seen, Adam's t);
 *   - a rank that could not use its weights file stops the others.
 *
 * Each check is collective over host control (fsdp_ctl): every rank calls
 * them in the same order and every rank gets the same verdict. */
#ifndef FSDP_AGREE_H
#define FSDP_AGREE_H

#include <stdint.h>
#include "darknet.h"
#include "fsdp.h"
#include "fsdp_backend.h"

typedef struct fsdp_agree {
    uint64_t *prefix;   /* per cfg option seen: a checksum of every option up to it */
    char **where;       /* per option: "file:line: key=value", for the message */
    int n, cap;
    fsdp_status oom;
    /* The weights file Darknet loaded (none: all zero). */
    int loaded;
    uint64_t size, hash;
    char *file;
    fsdp_status load_error;   /* the file was refused on this rank; reported at agreement */
} fsdp_agree;

void fsdp_agree_free(fsdp_agree *a);
/* One cfg option, in the order Darknet reads them (layer -1: [net]).  The
 * file name is not part of what is compared: ranks may read copies. */
void fsdp_agree_note_option(fsdp_agree *a, const char *file, int line, int layer, const char *section,
                            const char *key, const char *val);
/* The weights file Darknet loaded: size and checksum of its bytes. */
fsdp_status fsdp_agree_note_weights(fsdp_agree *a, const char *file);

/* Collective: stops every rank when any rank's weights file was refused. */
fsdp_status fsdp_agree_loaded(fsdp_ctl *be, const fsdp_agree *a);
/* Collective: cfg options, weights file, seen and t.  On a difference every
 * rank prints what differs (file:line for cfg options) and gets
 * FSDP_ERR_MISMATCH. */
fsdp_status fsdp_agree_network(fsdp_ctl *be, const fsdp_agree *a, const network *net);

/* The data files on the command line: the first argument ending in .data
 * and the train list it names (`train=`), and rnn train's `-file` text:
 * *hash a checksum of their bytes, shown[0..n) the first one's name ("none"
 * and 0: none given).  Ranks given different lists would train on other
 * samples than one process would.  The images a list names are not read.
 * An error naming the file when one cannot be read (a refusal on this
 * rank). */
fsdp_status fsdp_agree_data(int argc, char **argv, uint64_t *hash, char *shown, size_t n);
/* The command's .data file (the first argument ending in .data), or NULL. */
const char *fsdp_data_arg(int argc, char **argv);
/* KEY's value in a .data file, as Darknet reads it (blanks dropped): 1 and
 * out filled when it is there, else 0. */
int fsdp_data_value(const char *data, const char *key, char *out, size_t n);

/* One command-line setting every rank must share: a flag's name and its
 * value (a switch: 0/1; a string: its checksum) and how to show it. */
typedef struct fsdp_agree_flag {
    const char *name;
    uint64_t value;
    const char *shown;   /* "given", "not given", the value's text */
} fsdp_agree_flag;

/* At start-up, over host control right after it is made, before any
 * other collective.  Stops every rank when any rank's flags were refused
 * (`local`), or when the flags differ, naming the flag on every rank. */
fsdp_status fsdp_agree_start(fsdp_ctl *be, fsdp_status local, const fsdp_agree_flag *flags, int n);

/* Whether every rank holds the same v; *differs set on every rank alike. */
fsdp_status fsdp_agree_u64(fsdp_ctl *be, uint64_t v, int *differs);

#endif
