/* fsdp_stop.h: a run stopped from outside (SIGTERM from the launcher when
 * mpirun gets ^C or SIGTERM, Slurm's scancel, SIGHUP) says so on rank 0,
 * with the step it reached and the last weights file it wrote, then dies of
 * the signal as it would have: the launcher tears the job down without
 * another word, and a user would not know what is on disk. */
#ifndef FSDP_STOP_H
#define FSDP_STOP_H

#include <stddef.h>

/* Rank 0: handles SIGTERM, SIGINT and SIGHUP from now on. */
void fsdp_stop_install(void);
/* Every rank, right after MPI_Init: a crash (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT) prints one line naming the rank and the signal and ends
 * the process at once, with the signal.  In place of MPI's own handler,
 * whose backtrace takes the dynamic loader's lock: a crash in a thread that
 * held it (Darknet's loader threads start and end all the time) left the
 * rank hanging, and with it the job. */
void fsdp_stop_install_crash(int rank);
/* After a step or a save (not from a signal handler): what a stop reports. */
void fsdp_stop_note_step(size_t step, size_t max_steps);
void fsdp_stop_note_saved(const char *file);

#endif
