/* test_agree: start-up's agreement alone (no MPI). */
#include <criterion/criterion.h>
#include "fsdp_agree.h"

/* Without MPI (the self backend) there is nobody to disagree with: the
 * rank's own verdict. */
Test(agree, start_without_mpi_is_local)
{
    fsdp_ctl *be = NULL;
    cr_assert_eq(fsdp_backend_self_create(&be, NULL), FSDP_OK);
    fsdp_agree_flag f = { "-seed", 1, "1" };
    cr_assert_eq(fsdp_agree_start(be, FSDP_OK, &f, 1), FSDP_OK);
    cr_assert_eq(fsdp_agree_start(be, FSDP_ERR_CONFIG, &f, 1), FSDP_ERR_CONFIG);
    fsdp_ctl_free(be);
}
