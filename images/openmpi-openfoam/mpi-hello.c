/* mpi-hello: every rank prints its rank, the world size and the host it runs on (examples/hello.yaml). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank = 0, size = 0, length = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &length);
    printf("hello from rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
