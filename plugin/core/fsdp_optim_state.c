/* fsdp_optim_state.c: the optimizer's state beside a rank's own part
 * (fsdp_optim.h).  A file of its own: what links the optimizer's steps
 * alone (the GPU kernels' test) needs no memory placement. */
#include "fsdp_optim.h"

fsdp_status fsdp_optim_state_alloc(const fsdp_mem_ctx *mem, fsdp_optim_state *s, size_t n, int adam, int world)
{
    s->m = fsdp_mem_alloc(mem, n, 1);
    s->v = adam ? fsdp_mem_alloc(mem, n, 1) : NULL;
    s->grad_in_m = world == 1 && !adam;
    return !s->m || (adam && !s->v) ? FSDP_ERR_NOMEM : FSDP_OK;
}

void fsdp_optim_state_free(const fsdp_mem_ctx *mem, fsdp_optim_state *s)
{
    fsdp_mem_free(mem, s->m);
    fsdp_mem_free(mem, s->v);
    *s = (fsdp_optim_state){ 0 };
}
