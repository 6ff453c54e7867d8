/* test_bn: synchronized batch norm's guards.  A hook call from a recurrent
 * layer's sub-network (`network s = {0}`) is not the run's and changes
 * nothing; GPU runs that would need such calls refuse the layer by name. */
#include <string.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include "fsdp_bn.h"

typedef struct fixture {
    layer layers[2];
    network net;
    fsdp_ctl *ctl;
    fsdp_coll *coll;
    fsdp_mem_ctx mem;
    fsdp_layout_plan plan;
    fsdp_bn bn;
} fixture;

/* A run's network of two layers on 2 ranks (null collectives: the sum over
 * ranks is the value itself), host memory, attached as the engine does. */
static void attach(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->net = (network){ .n = 2, .layers = f->layers, .train = 1 };
    cr_assert_eq(fsdp_backend_null_create(2, &f->ctl, &f->coll), FSDP_OK);
    f->plan = (fsdp_layout_plan){ .ngroups = 1, .layer_group = (int[]){ 0, 0 }, .nlayers = 2 };
    cr_assert_eq(fsdp_bn_attach(&f->bn, &f->net, f->ctl, f->coll, &f->mem, &f->plan), FSDP_OK);
}

static void detach(fixture *f)
{
    fsdp_bn_free(&f->bn);
    fsdp_coll_free(f->coll);
    fsdp_ctl_free(f->ctl);
}

/* The run's network (Darknet's by-value copy of it) combines: a mean is
 * averaged over the 2 ranks and its bytes counted.  A sub-network with no
 * layers, as a GPU rnn or gru layer makes, is left alone. */
Test(bn, sub_network_ignored)
{
    fixture f;
    attach(&f);
    network copy = f.net, sub = { .train = 1 };
    float x[3] = { 2, 4, 6 };
    cr_assert(fsdp_bn_of_run(&f.bn, &copy));
    cr_assert(!fsdp_bn_of_run(&f.bn, &sub));
    cr_assert_eq(fsdp_bn_sync(&f.bn, &sub, 0, DN_BN_MEAN, x, 3, 8), FSDP_OK);
    cr_assert(x[0] == 2 && x[1] == 4 && x[2] == 6 && f.bn.bytes == 0, "a sub-network's call changed the run");
    cr_assert_eq(fsdp_bn_sync(&f.bn, &copy, 0, DN_BN_MEAN, x, 3, 8), FSDP_OK);
    cr_assert(x[0] == 1 && x[1] == 2 && x[2] == 3, "the run's mean is averaged over 2 ranks: %g", x[0]);
    cr_assert_eq(f.bn.bytes, 3 * sizeof(float));
    cr_assert_eq(f.bn.group_bytes[0], 3 * sizeof(float));
    detach(&f);
}

/* Before the engine attaches, no network is the run's. */
Test(bn, unattached_is_no_run)
{
    fsdp_bn bn = { 0 };
    layer l[1];
    network net = { .n = 1, .layers = l };
    cr_assert(!fsdp_bn_of_run(&bn, &net));
}

static layer rnn_with_bn(LAYER_TYPE type, layer *sub)
{
    *sub = (layer){ .batch_normalize = 1 };
    layer l = { .type = type };
    if (type == GRU) l.uz = sub;
    else if (type == LSTM) l.uf = sub;
    else l.input_layer = sub;
    return l;
}

/* GPU, 2 ranks, sync_bn: a trained rnn, gru or lstm layer with batch norm
 * is refused by name, on the host lstm alone; frozen, alone, without
 * sync_bn, or a crnn (whose device passes use the run's network) passes. */
Test(bn, recurrent_on_gpu_refused, .init = cr_redirect_stderr)
{
    layer sub, layers[2] = { { .type = CONVOLUTIONAL } };
    network net = { .n = 2, .layers = layers };
    unsigned char trained[2] = { 0, 0 }, frozen[2] = { 0, 1 };
    fsdp_bn_run gpu = { "rnn.cfg", 1, 2, 1, trained };
    LAYER_TYPE refused[] = { RNN, GRU, LSTM };
    for (int i = 0; i < 3; ++i) {
        layers[1] = rnn_with_bn(refused[i], &sub);
        cr_assert_eq(fsdp_bn_check_recurrent(&gpu, &net), FSDP_ERR_UNSUPPORTED, "type %d", refused[i]);
    }
    fsdp_bn_run host = { "rnn.cfg", 0, 2, 1, trained };
    layers[1] = rnn_with_bn(LSTM, &sub);
    cr_assert_eq(fsdp_bn_check_recurrent(&host, &net), FSDP_ERR_UNSUPPORTED, "lstm on the host");
    layers[1] = rnn_with_bn(GRU, &sub);
    fsdp_bn_run ok[] = { { "rnn.cfg", 1, 2, 1, frozen }, { "rnn.cfg", 0, 2, 1, trained },
                         { "rnn.cfg", 1, 1, 1, trained }, { "rnn.cfg", 1, 2, 0, trained } };
    for (int i = 0; i < 4; ++i) cr_assert_eq(fsdp_bn_check_recurrent(&ok[i], &net), FSDP_OK, "case %d", i);
    layers[1] = rnn_with_bn(CRNN, &sub);
    cr_assert_eq(fsdp_bn_check_recurrent(&gpu, &net), FSDP_OK);
    sub.batch_normalize = 0;
    layers[1] = (layer){ .type = RNN, .input_layer = &sub };
    cr_assert_eq(fsdp_bn_check_recurrent(&gpu, &net), FSDP_OK);
    fflush(stderr);
    char buf[4096] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, cr_get_redirected_stderr());
    buf[n] = 0;
    cr_assert(strstr(buf, "fsdp: rnn.cfg: layer 1 (gru, with batch_normalize): synchronized batch norm cannot reach"),
              "%s", buf);
    cr_assert(strstr(buf, "set sync_bn=0 in [net], or train on the CPU (-nogpu)\n"), "%s", buf);
    cr_assert(strstr(buf, "layer 1 (lstm, with batch_normalize)") && strstr(buf, "set sync_bn=0 in [net]\n"),
              "lstm: no CPU remedy: %s", buf);
}
