/*
 * wake_latency.c - how late a rank sleeping in MPI_Recv sees the message that ends its wait.
 *
 * usage: wake_latency ROUNDS [stuck]
 *
 * Two ranks. Each round rank 1 sleeps a pseudo-random 1..8 ms (so a wait's length cannot be predicted from the
 * last one), reads CLOCK_MONOTONIC and sends that stamp; rank 0, waiting in MPI_Recv, subtracts it from the
 * time the call returned. Rank 0 prints
 *   WAKE median_us=M p90_us=P wait_cpu_s=C wait_wall_s=W slice_ns=S
 * where S is the scheduler slice of its main thread (se.slice in /proc/thread-self/sched; -1 if not shown).
 * With "stuck", rank 0 first connects a TCP socket to itself and leaves unread bytes on both ends: sockets
 * that stay readable for ever, which a wait watching sockets must not spin on.
 */
#include <mpi.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long slice_ns(void)
{
    char line[256];
    long slice = -1;
    FILE *f = fopen("/proc/thread-self/sched", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "se.slice", 8) == 0 && strchr(line, ':') != NULL)
            slice = atol(strchr(line, ':') + 1);
    fclose(f);
    return slice;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void stuck_socket(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0 || client < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(listener, 1) != 0 || getsockname(listener, (struct sockaddr *)&addr, &len) != 0 ||
        connect(client, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("wake_latency: stuck socket");
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    int server = accept(listener, NULL, NULL);
    if (server < 0 || write(client, "x", 1) != 1 || write(server, "y", 1) != 1) {
        perror("wake_latency: stuck socket");
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    close(listener); /* client and server stay open, each with a byte nobody reads */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    if (size != 2 || rounds < 1) {
        fprintf(stderr, "wake_latency: needs 2 ranks and ROUNDS >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0 && argc > 2 && strcmp(argv[2], "stuck") == 0)
        stuck_socket();
    MPI_Barrier(MPI_COMM_WORLD); /* connections made */

    double *late = malloc(sizeof(double) * (size_t)rounds);
    double cpu0 = cpu_seconds(), wall0 = now_us();
    unsigned seed = 12345;
    for (int k = 0; k < rounds; k++) {
        double stamp = 0;
        if (rank == 1) {
            long delay_us = 1000 + (long)(rand_r(&seed) % 7000);
            struct timespec ts = {0, delay_us * 1000};
            nanosleep(&ts, NULL);
            stamp = now_us();
            MPI_Send(&stamp, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&stamp, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            late[k] = now_us() - stamp;
        }
    }
    if (rank == 0) {
        double cpu = cpu_seconds() - cpu0, wall = (now_us() - wall0) / 1e6;
        qsort(late, (size_t)rounds, sizeof(double), by_value);
        printf("WAKE median_us=%.1f p90_us=%.1f wait_cpu_s=%.4f wait_wall_s=%.4f slice_ns=%ld\n", late[rounds / 2],
               late[rounds * 9 / 10], cpu, wall, slice_ns());
        fflush(stdout);
    }
    free(late);
    MPI_Finalize();
    return 0;
}
