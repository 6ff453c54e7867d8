#include <stdio.h>
#include <sys/stat.h>
#include "fsdp_weights.h"

/* Floats Darknet reads for one convolutional or connected (sub-)layer. */
static size_t conv_floats(const layer *l)
{
    size_t n = (size_t)l->n;
    return n + (l->batch_normalize && !l->dontloadscales ? 3 * n : 0) + (size_t)l->nweights;
}

static size_t connected_floats(const layer *l)
{
    size_t o = (size_t)l->outputs;
    return o + (size_t)l->inputs * o + (l->batch_normalize && !l->dontloadscales ? 3 * o : 0);
}

/* What load_weights_upto reads for layer l; 0 for layers it skips. */
static size_t layer_floats(const layer *l)
{
    switch (l->type) {
    case CONVOLUTIONAL: case DECONVOLUTIONAL: return conv_floats(l);
    case CONNECTED: return connected_floats(l);
    case BATCHNORM: return 3 * (size_t)l->c;
    case CRNN: return conv_floats(l->input_layer) + conv_floats(l->self_layer) + conv_floats(l->output_layer);
    case RNN:
        return connected_floats(l->input_layer) + connected_floats(l->self_layer) + connected_floats(l->output_layer);
    case LSTM: {
        const layer *s[] = { l->wi, l->wf, l->wo, l->wg, l->ui, l->uf, l->uo, l->ug };
        size_t n = 0;
        for (int i = 0; i < 8; ++i) n += connected_floats(s[i]);
        return n;
    }
    case GRU: {
        const layer *s[] = { l->wz, l->wr, l->wh, l->uz, l->ur, l->uh };
        size_t n = 0;
        for (int i = 0; i < 6; ++i) n += connected_floats(s[i]);
        return n;
    }
    case LOCAL:
        return (size_t)l->outputs + (size_t)l->size * l->size * l->c * l->n * l->out_w * l->out_h;
    default:
        return 0;
    }
}

fsdp_status fsdp_weights_check(const network *net, const char *file)
{
    FILE *f = fopen(file, "rb");
    if (!f) return fsdp_fail(FSDP_ERR_IO, "%s: cannot open the weights file", file);
    int v[3] = { 0, 0, 0 };
    size_t got = fread(v, sizeof(int), 3, f);
    fclose(f);
    struct stat st;
    if (stat(file, &st) != 0) return fsdp_fail(FSDP_ERR_IO, "%s: cannot read the weights file", file);
    if (got == 3 && (v[0] < 0 || v[0] >= 1000 || v[1] < 0 || v[1] >= 1000))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: its header's version (field major %d, minor %d) is none Darknet "
                         "writes (0 to 999 each): not a Darknet weights file, or corrupt", file, v[0], v[1]);
    size_t header = 3 * sizeof(int) + ((v[0] * 10 + v[1]) >= 2 ? sizeof(size_t) : sizeof(int));
    if (got != 3 || (size_t)st.st_size < header)
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: %lld bytes, shorter than a weights file's header", file,
                         (long long)st.st_size);
    if ((st.st_size - header) % sizeof(float))
        return fsdp_fail(FSDP_ERR_CONFIG, "%s: not a whole number of floats after the header "
                         "(truncated or not a Darknet weights file)", file);
    size_t floats = (st.st_size - header) / sizeof(float), at = 0;
    for (int i = 0; i < net->n && at < floats; ++i) {
        const layer *l = &net->layers[i];
        if (l->dontload) continue;
        if (l->numload) return FSDP_OK;   /* numload reads fewer filters: no layout to check */
        size_t n = layer_floats(l);
        if (at + n > floats)
            return fsdp_fail(FSDP_ERR_CONFIG, "%s ends inside layer %d: it holds %zu floats, %zu of them "
                             "before that layer, which needs %zu; the file is truncated or was written "
                             "for another cfg", file, i, floats, at, n);
        at += n;
    }
    return FSDP_OK;
}
