/* tools/mpi-baseline.c: Open MPI's own memory as the ranks grow, for
 * tools/bench scale.  A bare MPI program (no Darknet, no plugin) that does
 * what the plugin's start-up and collectives ask of MPI on one machine:
 * a shared window of the plugin's segment size per rank, each rank writing
 * its segment and reading two slots of every other rank's (fsdp_shm.c's
 * pattern), barriers, small all-reduces, and a point-to-point exchange with
 * every other rank.  Its peak RSS at N ranks less at 2 is the growth the
 * plugin cannot remove.  Build: mpicc -O2 -o mpi-baseline mpi-baseline.c */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm node;
    int rank, world;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &rank);
    MPI_Comm_size(node, &world);
    /* fsdp_shm_part_floats */
    size_t part = ((size_t)1 << 18) / (size_t)world;
    if (part > ((size_t)1 << 16)) part = (size_t)1 << 16;
    if (part < ((size_t)1 << 13)) part = (size_t)1 << 13;
    float *base;
    MPI_Win win;
    MPI_Win_allocate_shared((MPI_Aint)(2 * part * (size_t)world * sizeof(float)), sizeof(float), MPI_INFO_NULL,
                            node, &base, &win);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    float **seg = malloc((size_t)world * sizeof *seg);
    for (int q = 0; q < world; ++q) {
        MPI_Aint size;
        int unit;
        MPI_Win_shared_query(win, q, &size, &unit, &seg[q]);
    }
    float *buf = calloc(2 * part, sizeof(float)), sum = 0;
    for (int round = 0; round < 4; ++round) {
        memset(seg[rank], round, 2 * part * (size_t)world * sizeof(float));
        MPI_Win_sync(win);
        MPI_Barrier(node);
        MPI_Win_sync(win);
        for (int q = 0; q < world; ++q) {
            memcpy(buf, seg[q] + (size_t)rank * 2 * part, 2 * part * sizeof(float));
            sum += buf[0];
            memcpy(buf, seg[q] + (size_t)q * 2 * part, 2 * part * sizeof(float));
            sum += buf[1];
        }
        MPI_Barrier(node);
        MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    /* Every pair exchanges a part, as the point-to-point path would. */
    MPI_Request *req = malloc(2 * (size_t)world * sizeof *req);
    float *in = calloc(part * (size_t)world, sizeof(float));
    int n = 0;
    for (int q = 0; q < world; ++q) {
        if (q == rank) continue;
        MPI_Irecv(in + (size_t)q * part, (int)part, MPI_FLOAT, q, 0, node, &req[n++]);
        MPI_Isend(buf, (int)part, MPI_FLOAT, q, 0, node, &req[n++]);
    }
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
    free(seg); free(buf); free(in); free(req);
    MPI_Finalize();
    return sum < 0;
}
