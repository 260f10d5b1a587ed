/*
 * spin_mpi.c - an MPI program with a known duty cycle per rank, for the PMPI tests.
 *
 * usage: spin_mpi ITERATIONS BASE_US [DIE_AFTER]
 *
 * Each iteration rank r busy-spins (r+1)*BASE_US microseconds of wall time, then
 * meets the others in MPI_Allreduce (where the lighter ranks wait), exchanges a
 * word around a ring with MPI_Sendrecv and with Isend/Irecv + MPI_Waitall, and
 * ends the iteration with MPI_Barrier.  Rank r's expected duty cycle is therefore
 * about (r+1)/size.  With DIE_AFTER, rank 0 sends itself SIGTERM after that many
 * iterations (to test that traces survive an abnormal end).
 */
#include <mpi.h>

#include <signal.h>
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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s ITERATIONS BASE_US [DIE_AFTER]\n", argv[0]);
        return 2;
    }
    int iterations = atoi(argv[1]);
    double base_us = atof(argv[2]);
    int die_after = argc > 3 ? atoi(argv[3]) : -1;

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    double sink = 0.0;
    for (int it = 0; it < iterations; it++) {
        if (it == die_after && rank == 0)
            raise(SIGTERM);
        sink += spin((rank + 1) * base_us);

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
    if (rank == 0)
        printf("done %d iterations (%g)\n", iterations, sink > 0 ? 1.0 : 0.0);
    MPI_Finalize();
    return 0;
}
