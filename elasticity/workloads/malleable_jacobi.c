/*
 * malleable_jacobi.c - a real MPI Jacobi solver that can be resized by checkpoint/restart, for malleable jobs.
 *
 * A 2-D Jacobi (5-point) relaxation on an NX x NX interior with a fixed boundary (top edge 1.0, the other edges
 * 0.0), for a fixed number of iterations, split into row blocks over the P ranks of MPI_COMM_WORLD (the first
 * NX % P ranks get one row more). Every cell is updated as 0.25 * (((up + down) + left) + right) from the previous
 * iteration's values, the same operands in the same order whatever P is, so the grid after N iterations is
 * bit-identical for any P and any sequence of checkpoints and restarts.
 *
 * A resize request is a signal (SIGUSR1 unless --signal names another): its handler only sets a flag, and every
 * rank reduces the flag (MPI_MAX) at the end of every iteration, so one signalled rank is enough (Open MPI's
 * mpirun forwards SIGUSR1/SIGUSR2 to every rank; `flux job kill --signal` signals the tasks). When it is set, rank
 * 0 gathers the grid, writes DIR/checkpoint and DIR/status ("checkpoint K"), and every rank exits 0. A later run
 * with the same DIR, on any number of ranks, resumes from iteration K.
 *
 * usage: malleable_jacobi --grid NX --iterations N --state DIR [--pace-ms MS] [--serial-fraction S] [--signal NAME]
 *   --pace-ms T, --serial-fraction s: every iteration lasts at least T * (s + (1 - s) / P) ms (Amdahl's law with
 *   T the iteration time on one rank), so the run time follows the rank count on a machine with few cores.
 *
 * Files in DIR, each replaced atomically (written to NAME.tmp, then renamed):
 *   checkpoint  40-byte header: 8 bytes magic "MJACOBI\0", then little-endian uint64 version (1), NX, iterations
 *               done K, total iterations N; then the NX x NX interior as float64 in row-major order (the
 *               machine's byte order). Written with fsync.
 *   status      "checkpoint K" or "done N".
 *   answer      "fnv1a64 <16 hex digits>\niterations N\ngrid NX\n": FNV-1a 64 of the interior's bytes.
 *   progress    the number of iterations done, every max(1, N / 100) iterations (a controller's view).
 * Rank 0 prints one line: "restart K ranks P" on resuming, "checkpoint K ranks P" or "answer HEX ranks P" at the
 * end. Exit codes: 0 done or checkpointed, 2 bad arguments, checkpoint or DIR, 1 a write failing later.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "malleable_jacobi"
#define MAGIC "MJACOBI" /* and its terminating NUL: 8 bytes */
#define MAGIC_BYTES 8
#define VERSION 1
#define HEADER_BYTES (MAGIC_BYTES + 4 * 8)
#define MAX_GRID 46340          /* NX * NX counts fit in an int (MPI_Gatherv's counts) */
#define MAX_ITERATIONS 1000000000
#define MAX_PACE_MS 3600000.0
#define PATH_BYTES 4096
#define TMP_BYTES (PATH_BYTES + 8) /* a path and ".tmp" */

static volatile sig_atomic_t resize_requested = 0;

static void on_resize_signal(int sig)
{
    (void)sig;
    resize_requested = 1;
}

struct options {
    long grid;
    long iterations;
    const char *state;
    double pace_ms;
    double serial_fraction;
    int signal;
};

static const struct {
    const char *name;
    int number;
} SIGNALS[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"INT", SIGINT}, {"TERM", SIGTERM}, {"ALRM", SIGALRM},
};

static int signal_number(const char *name)
{
    if (strncmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < sizeof SIGNALS / sizeof SIGNALS[0]; i++)
        if (strcmp(name, SIGNALS[i].name) == 0)
            return SIGNALS[i].number;
    return -1;
}

static int parse_long(const char *text, long low, long high, long *out)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < low || value > high)
        return -1;
    *out = value;
    return 0;
}

static int parse_double(const char *text, double low, double high, double *out)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(value) || value < low || value > high)
        return -1;
    *out = value;
    return 0;
}

/* Parse argv into opts; on error write a message naming the flag into err and return -1. */
static int parse_options(int argc, char **argv, struct options *opts, char *err, size_t errlen)
{
    *opts = (struct options){.grid = 0, .iterations = 0, .state = NULL, .pace_ms = 0.0, .serial_fraction = 0.0,
                             .signal = SIGUSR1};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *value = NULL;
        size_t flag_len = strlen(flag);
        const char *eq = strchr(flag, '=');
        if (strncmp(flag, "--", 2) == 0 && eq) { /* --flag=value */
            flag_len = (size_t)(eq - flag);
            value = eq + 1;
        }
#define IS(name) (flag_len == strlen(name) && strncmp(flag, name, flag_len) == 0)
        int known = IS("--grid") || IS("--iterations") || IS("--state") || IS("--pace-ms") ||
                    IS("--serial-fraction") || IS("--signal");
        if (!known) {
            if (strncmp(flag, "--", 2) != 0)
                snprintf(err, errlen, "unexpected argument '%s' (flags are --grid, --iterations, --state, ...)", flag);
            else
                snprintf(err, errlen, "unknown flag %.*s", (int)flag_len, flag);
            return -1;
        }
        if (!value) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "%s needs a value", flag);
                return -1;
            }
            value = argv[++i];
        }
        if (IS("--grid")) {
            if (parse_long(value, 1, MAX_GRID, &opts->grid)) {
                snprintf(err, errlen, "--grid must be an integer from 1 to %d, not '%s'", MAX_GRID, value);
                return -1;
            }
        } else if (IS("--iterations")) {
            if (parse_long(value, 1, MAX_ITERATIONS, &opts->iterations)) {
                snprintf(err, errlen, "--iterations must be an integer from 1 to %d, not '%s'", MAX_ITERATIONS,
                         value);
                return -1;
            }
        } else if (IS("--state")) {
            if (!*value || strlen(value) > PATH_BYTES - 32) {
                snprintf(err, errlen, "--state must name a directory (at most %d characters)", PATH_BYTES - 32);
                return -1;
            }
            opts->state = value;
        } else if (IS("--pace-ms")) {
            if (parse_double(value, 0.0, MAX_PACE_MS, &opts->pace_ms)) {
                snprintf(err, errlen, "--pace-ms must be a number from 0 to %.0f, not '%s'", MAX_PACE_MS, value);
                return -1;
            }
        } else if (IS("--serial-fraction")) {
            if (parse_double(value, 0.0, 1.0, &opts->serial_fraction)) {
                snprintf(err, errlen, "--serial-fraction must be a number from 0 to 1, not '%s'", value);
                return -1;
            }
        } else { /* --signal */
            opts->signal = signal_number(value);
            if (opts->signal < 0) {
                snprintf(err, errlen, "--signal must name one of SIGUSR1 SIGUSR2 SIGHUP SIGINT SIGTERM SIGALRM "
                                      "(with or without SIG), not '%s'", value);
                return -1;
            }
        }
#undef IS
    }
    if (opts->grid == 0 || opts->iterations == 0 || !opts->state) {
        snprintf(err, errlen, "%s is required", opts->grid == 0 ? "--grid" : opts->iterations == 0 ? "--iterations"
                                                                                                   : "--state");
        return -1;
    }
    return 0;
}

/* ---- files in DIR ---- */

static void state_path(char *out, const char *dir, const char *name)
{
    snprintf(out, PATH_BYTES, "%s/%s", dir, name);
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * Replace DIR/NAME with the concatenation of the parts: written to DIR/NAME.tmp, optionally fsynced (with the
 * directory after the rename), then renamed, so a reader sees the old file or the new one, never half of one.
 * On failure returns -1 with the failing path in failed.
 */
static int write_atomic(const char *dir, const char *name, const void *part1, size_t len1, const void *part2,
                        size_t len2, int sync, char *failed)
{
    char path[PATH_BYTES], tmp[TMP_BYTES];
    state_path(path, dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(failed, TMP_BYTES, "%s", tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    if (write_all(fd, part1, len1) || (len2 && write_all(fd, part2, len2)) || (sync && fsync(fd))) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved;
        return -1;
    }
    if (close(fd)) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    snprintf(failed, TMP_BYTES, "%s", path);
    if (rename(tmp, path)) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    if (sync) {
        int dfd = open(dir, O_RDONLY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}

static int write_text(const char *dir, const char *name, const char *text, int sync, char *failed)
{
    return write_atomic(dir, name, text, strlen(text), NULL, 0, sync, failed);
}

static void put_u64(unsigned char *out, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(value >> (8 * i));
}

static uint64_t get_u64(const unsigned char *in)
{
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--)
        value = (value << 8) | in[i];
    return value;
}

/*
 * Read DIR/checkpoint into grid (NX * NX doubles) and its iteration count into done. Returns 1 if there was a
 * valid checkpoint, 0 if there is none, -1 with a message in err if it cannot be used.
 */
static int read_checkpoint(const struct options *opts, double *grid, long *done, char *err, size_t errlen)
{
    char path[PATH_BYTES];
    state_path(path, opts->state, "checkpoint");
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char header[HEADER_BYTES];
    int result = -1;
    size_t cells = (size_t)opts->grid * (size_t)opts->grid;
    if (fread(header, 1, sizeof header, f) != sizeof header || memcmp(header, MAGIC, MAGIC_BYTES) != 0) {
        snprintf(err, errlen, "%s is not a malleable_jacobi checkpoint (bad magic or short header)", path);
        goto out;
    }
    uint64_t version = get_u64(header + 8), nx = get_u64(header + 16), k = get_u64(header + 24),
             total = get_u64(header + 32);
    if (version != VERSION) {
        snprintf(err, errlen, "%s has version %llu; this solver reads version %d", path, (unsigned long long)version,
                 VERSION);
    } else if (nx != (uint64_t)opts->grid) {
        snprintf(err, errlen, "%s is for grid %llu, not --grid %ld", path, (unsigned long long)nx, opts->grid);
    } else if (total != (uint64_t)opts->iterations) {
        snprintf(err, errlen, "%s is for %llu iterations, not --iterations %ld", path, (unsigned long long)total,
                 opts->iterations);
    } else if (k >= total) {
        snprintf(err, errlen, "%s has %llu of %llu iterations done: nothing to resume", path, (unsigned long long)k,
                 (unsigned long long)total);
    } else if (fread(grid, sizeof(double), cells, f) != cells || fgetc(f) != EOF) {
        snprintf(err, errlen, "%s has the wrong size for grid %ld (expected %zu bytes)", path, opts->grid,
                 (size_t)HEADER_BYTES + cells * sizeof(double));
    } else {
        *done = (long)k;
        result = 1;
    }
out:
    fclose(f);
    return result;
}

static int write_checkpoint(const struct options *opts, const double *grid, long done, char *failed)
{
    unsigned char header[HEADER_BYTES];
    memcpy(header, MAGIC, MAGIC_BYTES); /* with its NUL */
    put_u64(header + 8, VERSION);
    put_u64(header + 16, (uint64_t)opts->grid);
    put_u64(header + 24, (uint64_t)done);
    put_u64(header + 32, (uint64_t)opts->iterations);
    size_t bytes = (size_t)opts->grid * (size_t)opts->grid * sizeof(double);
    return write_atomic(opts->state, "checkpoint", header, sizeof header, grid, bytes, 1, failed);
}

static int write_progress(const struct options *opts, long done, char *failed)
{
    char text[32];
    snprintf(text, sizeof text, "%ld\n", done);
    return write_text(opts->state, "progress", text, 0, failed);
}

static uint64_t fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= 0x100000001b3ULL;
    }
    return hash;
}

/* ---- pacing ---- */

/* Sleep until start + ns on CLOCK_MONOTONIC; a signal (the resize request) interrupts the sleep, not the pace. */
static void pace_until(const struct timespec *start, double ns)
{
    struct timespec until = *start;
    long long add = (long long)ns;
    until.tv_sec += (time_t)(add / 1000000000LL);
    until.tv_nsec += (long)(add % 1000000000LL);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
}

/* ---- the solver ---- */

/* Every rank's row count and first row: the first NX % P ranks get one row more. */
static void decompose(long nx, int size, int rank, int *rows, int *first)
{
    int base = (int)(nx / size), extra = (int)(nx % size);
    *rows = base + (rank < extra ? 1 : 0);
    *first = rank * base + (rank < extra ? rank : extra);
}

/* Counts and displacements (in doubles of the NX-wide interior) for MPI_Gatherv / MPI_Scatterv on rank 0. */
static void block_layout(long nx, int size, int *counts, int *displs)
{
    for (int r = 0; r < size; r++) {
        int rows, first;
        decompose(nx, size, r, &rows, &first);
        counts[r] = rows * (int)nx;
        displs[r] = first * (int)nx;
    }
}

static void fail_and_exit(int rank, const char *message, int code)
{
    if (rank == 0 && message) {
        fprintf(stderr, PROGRAM ": %s\n", message);
        fflush(stderr);
    }
    MPI_Finalize();
    exit(code);
}

/* Rank 0 decides, everyone learns: broadcast rank 0's value. */
static int from_rank0(int value)
{
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return value;
}

int main(int argc, char **argv)
{
    struct options opts;
    char err[TMP_BYTES + 256] = "";
    int parsed = parse_options(argc, argv, &opts, err, sizeof err);
    if (parsed == 0) { /* before MPI_Init: a request arriving while the job starts is kept, not fatal */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_resize_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sigaction(opts.signal, &sa, NULL);
    }

    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parsed != 0) {
        if (rank == 0)
            fprintf(stderr, PROGRAM ": %s\nusage: " PROGRAM " --grid NX --iterations N --state DIR [--pace-ms MS] "
                            "[--serial-fraction S] [--signal NAME]\n", err);
        fail_and_exit(rank, NULL, 2);
    }
    if (size > opts.grid) {
        snprintf(err, sizeof err, "%d ranks for --grid %ld: need at most one rank per row", size, opts.grid);
        fail_and_exit(rank, err, 2);
    }
    const long nx = opts.grid, total = opts.iterations;
    const int width = (int)nx + 2; /* one zero boundary column on each side */
    int rows, first;
    decompose(nx, size, rank, &rows, &first);
    int *counts = NULL, *displs = NULL;
    double *whole = NULL; /* the NX x NX interior, on rank 0 only, at the start and the end */
    if (rank == 0) {
        counts = malloc(sizeof(int) * (size_t)size);
        displs = malloc(sizeof(int) * (size_t)size);
        whole = calloc((size_t)nx * (size_t)nx, sizeof(double));
        if (!counts || !displs || !whole)
            MPI_Abort(MPI_COMM_WORLD, 3);
        block_layout(nx, size, counts, displs);
    }
    /* rows plus one halo row above and below, each row with its two boundary columns */
    double *u = calloc((size_t)(rows + 2) * (size_t)width, sizeof(double));
    double *v = calloc((size_t)(rows + 2) * (size_t)width, sizeof(double));
    double *block = malloc((size_t)rows * (size_t)nx * sizeof(double)); /* my rows, packed, for the collectives */
    if (!u || !v || !block)
        MPI_Abort(MPI_COMM_WORLD, 3);

    /* Rank 0 reads the checkpoint, if any, and proves DIR writable; everyone learns the outcome. */
    long done = 0;
    char failed[TMP_BYTES];
    int restarted = 0, status = 0;
    if (rank == 0) {
        if (mkdir(opts.state, 0777) != 0 && errno != EEXIST) {
            snprintf(err, sizeof err, "cannot create --state directory %s: %s", opts.state, strerror(errno));
            status = 2;
        }
        if (status == 0) {
            int found = read_checkpoint(&opts, whole, &done, err, sizeof err);
            if (found < 0)
                status = 2;
            restarted = found > 0;
        }
        if (status == 0 && write_progress(&opts, done, failed) != 0) {
            snprintf(err, sizeof err, "--state directory %s is not writable: %s: %s", opts.state, failed,
                     strerror(errno));
            status = 2;
        }
    }
    if ((status = from_rank0(status)) != 0)
        fail_and_exit(rank, err, status);
    restarted = from_rank0(restarted);
    done = from_rank0((int)done);
    if (restarted) {
        MPI_Scatterv(whole, counts, displs, MPI_DOUBLE, block, rows * (int)nx, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        for (int j = 0; j < rows; j++)
            memcpy(&u[(size_t)(j + 1) * width + 1], &block[(size_t)j * nx], sizeof(double) * (size_t)nx);
        if (rank == 0) {
            printf("restart %ld ranks %d\n", done, size);
            fflush(stdout);
        }
    }
    /* the hot top edge: rank 0's upper halo, never overwritten (its upper neighbour is MPI_PROC_NULL) */
    if (rank == 0)
        for (int i = 1; i <= nx; i++)
            u[i] = v[i] = 1.0;

    const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    const int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    const long every = total / 100 > 0 ? total / 100 : 1;
    const double pace_ns = opts.pace_ms * 1e6 * (opts.serial_fraction + (1.0 - opts.serial_fraction) / size);
    int progress_warned = 0, checkpoint = 0;
    while (done < total) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        /* halo exchange: my first row goes up, my last row goes down */
        MPI_Sendrecv(&u[(size_t)1 * width], width, MPI_DOUBLE, up, 0, &u[(size_t)(rows + 1) * width], width,
                     MPI_DOUBLE, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[(size_t)rows * width], width, MPI_DOUBLE, down, 1, &u[0], width, MPI_DOUBLE, up, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int j = 1; j <= rows; j++) {
            const double *above = &u[(size_t)(j - 1) * width], *here = &u[(size_t)j * width],
                         *below = &u[(size_t)(j + 1) * width];
            double *next = &v[(size_t)j * width];
            for (int i = 1; i <= nx; i++)
                next[i] = 0.25 * (((above[i] + below[i]) + here[i - 1]) + here[i + 1]);
        }
        double *swap = u;
        u = v;
        v = swap;
        done++;
        if (pace_ns > 0.0)
            pace_until(&start, pace_ns);
        int mine = resize_requested != 0, any = 0;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0 && (done % every == 0 || done == total) && write_progress(&opts, done, failed) != 0 &&
            !progress_warned) {
            fprintf(stderr, PROGRAM ": warning: cannot write %s: %s\n", failed, strerror(errno));
            progress_warned = 1;
        }
        if (any && done < total) {
            checkpoint = 1;
            break;
        }
    }

    /* checkpoint or answer: rank 0 gathers the interior */
    for (int j = 0; j < rows; j++)
        memcpy(&block[(size_t)j * nx], &u[(size_t)(j + 1) * width + 1], sizeof(double) * (size_t)nx);
    MPI_Gatherv(block, rows * (int)nx, MPI_DOUBLE, whole, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        char text[128];
        if (checkpoint) {
            snprintf(text, sizeof text, "checkpoint %ld\n", done);
            if (write_checkpoint(&opts, whole, done, failed) || write_text(opts.state, "status", text, 1, failed) ||
                write_progress(&opts, done, failed)) {
                snprintf(err, sizeof err, "cannot write %s: %s", failed, strerror(errno));
                status = 1;
            } else {
                printf("checkpoint %ld ranks %d\n", done, size);
            }
        } else {
            unsigned long long hash = fnv1a64(whole, (size_t)nx * (size_t)nx * sizeof(double));
            char answer[128];
            snprintf(answer, sizeof answer, "fnv1a64 %016llx\niterations %ld\ngrid %ld\n", hash, total, nx);
            snprintf(text, sizeof text, "done %ld\n", total);
            if (write_text(opts.state, "answer", answer, 1, failed) ||
                write_text(opts.state, "status", text, 1, failed)) {
                snprintf(err, sizeof err, "cannot write %s: %s", failed, strerror(errno));
                status = 1;
            } else {
                printf("answer %016llx ranks %d\n", hash, size);
            }
        }
        fflush(stdout);
    }
    status = from_rank0(status);
    free(u);
    free(v);
    free(block);
    free(whole);
    free(counts);
    free(displs);
    if (status != 0)
        fail_and_exit(rank, err, status);
    MPI_Finalize();
    return 0;
}
