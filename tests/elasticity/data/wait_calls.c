/*
 * wait_calls.c - every blocking call the PMPI library's sleep wait mode replaces, with checked results.
 *
 * usage: wait_calls IDLE_MS
 *
 * Each wrapped call is made with data whose result is known, on 3 or more ranks; a wrong result aborts with
 * the call's name. Then rank 0 waits in MPI_Barrier while the others sleep IDLE_MS milliseconds, and prints
 * the CPU time it used while waiting, and how long its waiting thread was runnable (on a CPU or queued for one,
 * from /proc/thread-self/schedstat; -1 when the kernel does not show it):
 *   WAIT_CALLS rank=0 ok=1 idle_wait_cpu_s=S idle_wait_wall_s=W idle_wait_runnable_s=R
 * (the other ranks print ok=1 only). A polling wait is runnable for all of W, and uses as much of it as the
 * machine gives it (less when other work shares the cores); a sleeping wait is runnable for almost none of W.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static int rank, size;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "wait_calls: rank %d: %s returned a wrong result\n", rank, what);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* on-CPU plus run-queue time of the calling thread (seconds), or -1 */
static double runnable_seconds(void)
{
    unsigned long long on_cpu = 0, queued = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f == NULL)
        return -1.0;
    int got = fscanf(f, "%llu %llu", &on_cpu, &queued);
    fclose(f);
    return got == 2 ? (double)(on_cpu + queued) / 1e9 : -1.0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int idle_ms = argc > 1 ? atoi(argv[1]) : 500;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    int sum = 0, one = rank + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(sum == size * (size + 1) / 2, "MPI_Allreduce");

    int root_value = rank == 0 ? 42 : 0;
    MPI_Bcast(&root_value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check(root_value == 42, "MPI_Bcast");

    int reduced = -1;
    MPI_Reduce(&one, &reduced, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    check(rank != 0 || reduced == size, "MPI_Reduce");

    int *gathered = malloc(sizeof(int) * (size_t)size);
    MPI_Allgather(&rank, 1, MPI_INT, gathered, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        check(gathered[r] == r, "MPI_Allgather");

    int *out = malloc(sizeof(int) * (size_t)size), *in = malloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++)
        out[r] = rank * 100 + r;
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        check(in[r] == r * 100 + rank, "MPI_Alltoall");

    int got = -1;
    MPI_Status status;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 7, &got, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, &status);
    check(got == prev && status.MPI_SOURCE == prev && status.MPI_TAG == 7, "MPI_Sendrecv");

    /* a ring of blocking sends: even ranks send first, odd ranks receive first (no deadlock) */
    got = -1;
    if (rank % 2 == 0) {
        MPI_Send(&rank, 1, MPI_INT, next, 8, MPI_COMM_WORLD);
        MPI_Recv(&got, 1, MPI_INT, prev, 8, MPI_COMM_WORLD, &status);
    } else {
        MPI_Recv(&got, 1, MPI_INT, prev, 8, MPI_COMM_WORLD, &status);
        MPI_Ssend(&rank, 1, MPI_INT, next, 8, MPI_COMM_WORLD);
    }
    check(got == prev && status.MPI_SOURCE == prev, "MPI_Send/MPI_Recv");

    if (rank == 0) {
        int count = 0;
        MPI_Probe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &status);
        MPI_Get_count(&status, MPI_INT, &count);
        check(count == 3 && status.MPI_SOURCE == 1, "MPI_Probe");
        int three[3];
        MPI_Recv(three, 3, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(three[2] == 3, "MPI_Recv after MPI_Probe");
    } else if (rank == 1) {
        int three[3] = {1, 2, 3};
        MPI_Send(three, 3, MPI_INT, 0, 9, MPI_COMM_WORLD);
    }

    MPI_Request reqs[2];
    int a = -1, b = -1, index = -1, outcount = 0, indices[2];
    MPI_Irecv(&a, 1, MPI_INT, prev, 10, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&rank, 1, MPI_INT, next, 10, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    check(a == prev, "MPI_Waitall");
    MPI_Irecv(&b, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&rank, 1, MPI_INT, next, 11, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitany(2, reqs, &index, MPI_STATUS_IGNORE);
    MPI_Wait(&reqs[1 - index], MPI_STATUS_IGNORE);
    check(b == prev, "MPI_Waitany/MPI_Wait");
    b = -1;
    MPI_Irecv(&b, 1, MPI_INT, prev, 12, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&rank, 1, MPI_INT, next, 12, MPI_COMM_WORLD, &reqs[1]);
    int done = 0;
    while (done < 2) {
        MPI_Waitsome(2, reqs, &outcount, indices, MPI_STATUSES_IGNORE);
        check(outcount >= 1 && outcount != MPI_UNDEFINED, "MPI_Waitsome");
        done += outcount;
    }
    check(b == prev, "MPI_Waitsome");

    /* the idle wait: rank 0 in MPI_Barrier while the others sleep */
    MPI_Barrier(MPI_COMM_WORLD);
    double cpu0 = cpu_seconds(), wall0 = MPI_Wtime(), runnable0 = runnable_seconds();
    if (rank != 0) {
        struct timespec ts = {idle_ms / 1000, (long)(idle_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double cpu = cpu_seconds() - cpu0, wall = MPI_Wtime() - wall0, runnable1 = runnable_seconds();
    double runnable = runnable0 < 0 || runnable1 < 0 ? -1.0 : runnable1 - runnable0;
    if (rank == 0)
        printf("WAIT_CALLS rank=0 ok=1 idle_wait_cpu_s=%.4f idle_wait_wall_s=%.4f idle_wait_runnable_s=%.4f\n", cpu,
               wall, runnable);
    else
        printf("WAIT_CALLS rank=%d ok=1\n", rank);
    free(gathered);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
