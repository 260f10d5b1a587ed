/*
 * placement_kernels.c - three small MPI kernels, one per profile class of the placement policy
 * (Liu and Guitart's HPC Challenge picks, shrunk to seconds):
 *
 *   dgemm  N ITER   CPU bound: each rank multiplies two N x N matrices ITER times (EP-DGEMM, no communication)
 *   triad  N ITER   memory bound: a = b + s * c over N doubles per rank, ITER passes (STREAM triad)
 *   ring   N ITER   network bound: each rank sends N bytes to its right neighbour and receives N from its left,
 *                   ITER times (RandomRing bandwidth's natural ring)
 *
 * Every iteration ends with MPI_Barrier (the PMPI duty-cycle boundary). Every rank reads its own scheduler
 * counters - context switches (voluntary + involuntary, /proc/self/status) and CPU migrations (se.nr_migrations,
 * /proc/self/sched) - before and after the timed loop, so start-up (MPI_Init's wire-up) is not counted, and
 * rank 0 prints one JSON line with the differences, the wall time, the time spent in MPI and the bytes each
 * rank sent, so a caller can classify the job and compare placements. Each rank also reports the CPUs it may
 * run on (Cpus_allowed_list: is it pinned, and to what) and the CPU time its pod's broker (the nearest
 * ancestor named flux or flux-broker, all its threads) used during the loop: what sharing cores with it costs.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long status_field(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long value = -1;
    size_t n = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) == 0) {
            char *p = line + n;
            while (*p == ' ' || *p == '\t' || *p == ':')
                p++;
            value = strtol(p, NULL, 10);
            break;
        }
    }
    fclose(f);
    return value;
}

static void status_text(const char *key, char *value, size_t size)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[512];
    size_t n = strlen(key);
    value[0] = 0;
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) == 0) {
            char *p = line + n;
            while (*p == ' ' || *p == '\t' || *p == ':')
                p++;
            size_t len = strcspn(p, "\n");
            if (len >= size)
                len = size - 1;
            memcpy(value, p, len);
            value[len] = 0;
            break;
        }
    }
    fclose(f);
}

/* /proc/PID/stat: comm, ppid and utime+stime (clock ticks, every thread); -1 if unreadable */
static int proc_stat(long pid, char *comm, size_t size, long *ppid, long *ticks)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    char *open = strchr(text, '('), *close = strrchr(text, ')');
    if (!open || !close)
        return -1;
    snprintf(comm, size, "%.*s", (int)(close - open - 1), open + 1);
    long utime = 0, stime = 0;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(close + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", ppid, &utime, &stime) != 3)
        return -1;
    *ticks = utime + stime;
    return 0;
}

static long broker_of_this_pod(void)
{
    long pid = (long)getppid();
    for (int depth = 0; depth < 8 && pid > 1; depth++) {
        char comm[64];
        long ppid, ticks;
        if (proc_stat(pid, comm, sizeof comm, &ppid, &ticks) < 0)
            return -1;
        if (!strcmp(comm, "flux") || !strcmp(comm, "flux-broker"))
            return pid;
        pid = ppid;
    }
    return -1;
}

static double broker_cpu_ms(long pid)
{
    char comm[64];
    long ppid, ticks;
    if (pid < 0 || proc_stat(pid, comm, sizeof comm, &ppid, &ticks) < 0)
        return -1.0;
    return 1000.0 * (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

static double dgemm_step(int n, const double *a, const double *b, double *c)
{
    memset(c, 0, sizeof(double) * (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double aik = a[(size_t)i * n + k];
            for (int j = 0; j < n; j++)
                c[(size_t)i * n + j] += aik * b[(size_t)k * n + j];
        }
    return c[0];
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4 || (strcmp(argv[1], "dgemm") && strcmp(argv[1], "triad") && strcmp(argv[1], "ring"))) {
        if (rank == 0)
            fprintf(stderr, "usage: %s dgemm|triad|ring N ITERATIONS\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *kind = argv[1];
    long n = atol(argv[2]);
    int iterations = atoi(argv[3]);
    if (n < 1 || iterations < 1) {
        if (rank == 0)
            fprintf(stderr, "N and ITERATIONS must be positive\n");
        MPI_Finalize();
        return 2;
    }
    double checksum = 0.0, mpi_time = 0.0, sent = 0.0;
    double *a = NULL, *b = NULL, *c = NULL;
    char *out = NULL, *in = NULL;
    if (!strcmp(kind, "dgemm")) {
        size_t cells = (size_t)n * (size_t)n;
        a = malloc(cells * sizeof *a), b = malloc(cells * sizeof *b), c = malloc(cells * sizeof *c);
        for (size_t i = 0; i < cells; i++)
            a[i] = 1.0 + (double)(i % 7), b[i] = 0.5 * (double)(i % 5);
    } else if (!strcmp(kind, "triad")) {
        a = malloc((size_t)n * sizeof *a), b = malloc((size_t)n * sizeof *b), c = malloc((size_t)n * sizeof *c);
        for (long i = 0; i < n; i++)
            a[i] = 0.0, b[i] = 1.0 + (double)(i % 3), c[i] = 2.0;
    } else {
        out = malloc((size_t)n), in = malloc((size_t)n);
        memset(out, rank & 0xff, (size_t)n);
    }
    if ((!out && !a) || (a && (!b || !c)) || (out && !in)) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long broker = broker_of_this_pod();
    double broker_before = broker_cpu_ms(broker);
    long before[3] = {
        status_field("/proc/self/status", "voluntary_ctxt_switches"),
        status_field("/proc/self/status", "nonvoluntary_ctxt_switches"),
        status_field("/proc/self/sched", "se.nr_migrations"),
    };
    double start = MPI_Wtime();
    for (int it = 0; it < iterations; it++) {
        if (!strcmp(kind, "dgemm")) {
            checksum += dgemm_step((int)n, a, b, c);
        } else if (!strcmp(kind, "triad")) {
            double s = 3.0 + it;
            for (long i = 0; i < n; i++)
                a[i] = b[i] + s * c[i];
            checksum += a[it % n];
        } else {
            double t0 = MPI_Wtime();
            MPI_Sendrecv(out, (int)n, MPI_BYTE, (rank + 1) % size, 7, in, (int)n, MPI_BYTE,
                         (rank + size - 1) % size, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            mpi_time += MPI_Wtime() - t0;
            sent += (double)n;
            checksum += in[it % n];
        }
        double t0 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        mpi_time += MPI_Wtime() - t0;
    }
    double elapsed = MPI_Wtime() - start;
    long counters[3] = {
        status_field("/proc/self/status", "voluntary_ctxt_switches") - before[0],
        status_field("/proc/self/status", "nonvoluntary_ctxt_switches") - before[1],
        status_field("/proc/self/sched", "se.nr_migrations") - before[2],
    };
    double broker_after = broker_cpu_ms(broker);
    double mine[4] = {elapsed, mpi_time, sent, broker_before >= 0 && broker_after >= 0 ? broker_after - broker_before : -1.0};
    long *all_counters = rank == 0 ? malloc(sizeof(long) * 3 * (size_t)size) : NULL;
    double *all_times = rank == 0 ? malloc(sizeof(double) * 4 * (size_t)size) : NULL;
    char host[64] = {0}, cpus[64] = {0};
    char *hosts = rank == 0 ? malloc(64 * (size_t)size) : NULL;
    char *all_cpus = rank == 0 ? malloc(64 * (size_t)size) : NULL;
    gethostname(host, sizeof host - 1);
    status_text("Cpus_allowed_list", cpus, sizeof cpus);
    MPI_Gather(counters, 3, MPI_LONG, all_counters, 3, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Gather(mine, 4, MPI_DOUBLE, all_times, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(host, 64, MPI_CHAR, hosts, 64, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(cpus, 64, MPI_CHAR, all_cpus, 64, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"kind\": \"%s\", \"ranks\": %d, \"n\": %ld, \"iterations\": %d, \"checksum\": %.6g, \"per_rank\": [",
               kind, size, n, iterations, checksum);
        for (int r = 0; r < size; r++)
            printf("%s{\"rank\": %d, \"host\": \"%s\", \"seconds\": %.6f, \"mpi_seconds\": %.6f, \"bytes_sent\": %.0f, "
                   "\"voluntary_ctxt_switches\": %ld, \"nonvoluntary_ctxt_switches\": %ld, \"migrations\": %ld, "
                   "\"cpus\": \"%s\", \"broker_cpu_ms\": %.1f}",
                   r ? ", " : "", r, hosts + 64 * r, all_times[4 * r], all_times[4 * r + 1], all_times[4 * r + 2],
                   all_counters[3 * r], all_counters[3 * r + 1], all_counters[3 * r + 2], all_cpus + 64 * r,
                   all_times[4 * r + 3]);
        printf("]}\n");
        fflush(stdout);
    }
    free(a), free(b), free(c), free(out), free(in), free(all_counters), free(all_times), free(hosts), free(all_cpus);
    MPI_Finalize();
    return 0;
}
