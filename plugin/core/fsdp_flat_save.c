/* fsdp_flat_save.c: a flat around saving its group's layers, and the
 * scratch that lasts as long (fsdp_flat_save). */
#include <stdlib.h>
#include "fsdp_flat.h"

fsdp_status fsdp_flat_save_begin(const fsdp_flat_ctx *c, fsdp_flat *f, uint64_t *bytes)
{
    *bytes = 0;
    FSDP_ASSERT(f->res.state != FSDP_FLAT_GATHERING, "flat save_begin: not GATHERING");
    if (f->lay.nt && f->res.state != FSDP_FLAT_GATHERED) {
        FSDP_TRY(fsdp_flat_unshard(c, f, bytes));
        f->save.gathered = 1;
    }
    /* Darknet's pull_*_layer copies the parameters and the gradients to
     * host arrays, which GPU runs do not keep: lent for the group's save. */
    if (c->mem->device && f->lay.nt && !f->save.grad) {
        f->save.grad = fsdp_mem_take(c->mem, f->lay.nfull, 1);
        if (!f->save.grad) return FSDP_ERR_NOMEM;
        fsdp_flat_point_grad(f, f->save.grad);
        for (int k = 0; k < f->lay.nt; ++k) {
            *f->lay.t[k].grad = calloc(f->lay.t[k].count, sizeof(float));
            *f->lay.t[k].data = calloc(f->lay.t[k].count, sizeof(float));
            if (!*f->lay.t[k].grad || !*f->lay.t[k].data) return fsdp_fail(FSDP_ERR_NOMEM, "out of memory saving");
        }
    }
    FSDP_CHECK(fsdp_flat_check(c, f));
    return FSDP_OK;
}

void fsdp_flat_save_end(const fsdp_flat_ctx *c, fsdp_flat *f)
{
    int gathered = f->save.gathered;
    f->save.gathered = 0;
    if (gathered) fsdp_flat_reshard(c, f);
    if (f->save.grad) {
        fsdp_flat_point_grad(f, NULL);
        for (int k = 0; k < f->lay.nt; ++k) {
            free(*f->lay.t[k].grad);
            free(*f->lay.t[k].data);
            *f->lay.t[k].grad = *f->lay.t[k].data = NULL;
        }
        fsdp_mem_give(c->mem, f->save.grad);
        f->save.grad = NULL;
    }
    FSDP_CHECK(fsdp_flat_check(c, f));
}
