/*
 * spin_mpi.c - an MPI program with a known duty cycle per rank, for the PMPI tests.
 *
 * usage: spin_mpi ITERATIONS BASE_US [DIE_AFTER [sleep]]
 *
 * Each iteration rank r busy-spins (r+1)*BASE_US microseconds of wall time, then
 * meets the others in MPI_Allreduce (where the lighter ranks wait), exchanges a
 * word around a ring with MPI_Sendrecv and with Isend/Irecv + MPI_Waitall, and
 * ends the iteration with MPI_Barrier.  Rank r's expected duty cycle is therefore
 * about (r+1)/size.  With DIE_AFTER, rank 0 sends itself SIGTERM after that many
 * iterations (to test that traces survive an abnormal end; -1 = never).
 *
 * With "sleep", the rank sleeps instead of spinning for its share. On a machine with fewer
 * cores than ranks, busy ranks overrun their wall-clock deadline whenever they are preempted at
 * it, so only the sleeping variant keeps the exact (r+1)/size duty ratios under oversubscription.
 *
 * At the end every rank prints its own measurement as ground truth for the profiler:
 *   MC_SELF rank=R iterations=N spin_s=S span_s=T
 * where S is the wall time spent spinning and T the time from MPI_Init's return to the
 * exit of the last MPI_Barrier.
 */
#include <mpi.h>

#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double spin(double us)
{
    double end = now_us() + us, acc = 0.0;
    long i = 0;
    while (now_us() < end)
        acc += (double)(++i % 7) * 1e-9;
    return acc;
}

static void nap(double us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1e6), .tv_nsec = (long)((us - (double)(long)(us / 1e6) * 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s ITERATIONS BASE_US [DIE_AFTER [sleep]]\n", argv[0]);
        return 2;
    }
    int iterations = atoi(argv[1]);
    double base_us = atof(argv[2]);
    int die_after = argc > 3 ? atoi(argv[3]) : -1;
    int sleeping = argc > 4 && strcmp(argv[4], "sleep") == 0;

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    double sink = 0.0, spin_us = 0.0, t_start = now_us();
    for (int it = 0; it < iterations; it++) {
        if (it == die_after && rank == 0)
            raise(SIGTERM);
        double t0 = now_us();
        if (sleeping)
            nap((rank + 1) * base_us);
        else
            sink += spin((rank + 1) * base_us);
        spin_us += now_us() - t0;

        double local = sink, total = 0.0;
        MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

        int out = it, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, right, 1, &in, 1, MPI_INT, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Request req[2];
        MPI_Irecv(&in, 1, MPI_INT, left, 2, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(&out, 1, MPI_INT, right, 2, MPI_COMM_WORLD, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);

        MPI_Barrier(MPI_COMM_WORLD);
    }
    double span_us = now_us() - t_start;
    printf("MC_SELF rank=%d iterations=%d spin_s=%.6f span_s=%.6f sink=%d\n", rank, iterations,
           spin_us / 1e6, span_us / 1e6, sink >= 0.0);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
