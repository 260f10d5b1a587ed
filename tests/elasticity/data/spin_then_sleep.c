/* spin_then_sleep.c DELAY_US COUNT: rank 1 sleeps DELAY_US, then sends rank 0 a message, COUNT times; rank 0 waits
 * for each in MPI_Recv. Under the sleep wait mode (MC_MPI_WAIT_STATS=1) rank 0's statistics line says how many of
 * its waits completed while spinning and how many napped. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long delay_us = argc > 1 ? atol(argv[1]) : 1000;
    int count = argc > 2 ? atoi(argv[2]) : 50;
    struct timespec delay = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < count; i++) {
        int value = i;
        if (rank == 1) {
            nanosleep(&delay, NULL);
            MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Recv(&value, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (value != i) {
                fprintf(stderr, "rank 0: message %d carried %d\n", i, value);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    MPI_Finalize();
    return 0;
}
