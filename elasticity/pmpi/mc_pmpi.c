/*
 * mc_pmpi.c - PMPI interposition library for miniclusters duty-cycle profiling.
 *
 * Loaded with LD_PRELOAD, it wraps the blocking MPI calls in which a rank waits
 * for its peers and records (call, t_enter, t_exit) from CLOCK_MONOTONIC into an
 * in-memory chunk list.  At MPI_Finalize (or on SIGTERM/SIGINT, MPI_Abort or
 * exit without finalize) it writes one binary file per rank:
 *
 *   <MC_PMPI_DIR or cwd>/pmpi.<jobid>.<rank>.bin
 *
 * jobid = MC_PMPI_JOBID, else FLUX_JOB_ID, else "p<pid of rank 0>".
 * MC_PMPI_MAX_EVENTS caps the number of buffered events (default 8M = 128 MiB).
 * MC_PMPI_ITERATIONS=K writes the trace as soon as K boundary calls (MC_PMPI_BOUNDARY,
 * default MPI_Barrier) have returned and stops recording: a controller can profile the first
 * K iterations of a long job without waiting for its end.
 *
 * File layout (native little-endian), parsed by elasticity/profiling/trace.py:
 *   struct mc_header (216 bytes), n_calls names of MC_NAME_BYTES each, then
 *   n_events records { u64 t_enter_ns; u64 (duration_ns << 8 | call_id) }.
 *
 * MC_PMPI_TRACE=0 records nothing (the library is then preloaded for its wait mode only), and
 * MC_MPI_WAIT=sleep makes ranks waiting in the wrapped calls sleep instead of polling (mc_wait.h).
 *
 * The writer uses only async-signal-safe calls (open, write, rename, close),
 * so the same code serves the signal handler and the normal exit path.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_wait.h"

#if MPI_VERSION >= 3
#define MC_CONST const
#else
#define MC_CONST
#endif

#define MC_MAGIC "MCPMPITR"
#define MC_VERSION 1u
#define MC_NAME_BYTES 24
#define MC_FIRST_CHUNK 4096u
#define MC_MAX_CHUNK (1u << 20)
#define MC_DEFAULT_MAX_EVENTS (8ull << 20)

/* Header flags: why and how the file was written. */
#define MC_FLAG_FINALIZED 0x01u
#define MC_FLAG_SIGNAL 0x02u
#define MC_FLAG_ATEXIT 0x04u
#define MC_FLAG_ABORT 0x08u
#define MC_FLAG_TRUNCATED 0x10u
#define MC_FLAG_INFLIGHT 0x20u
#define MC_FLAG_THREAD_MULTIPLE 0x40u
#define MC_FLAG_ITERATIONS 0x80u

/* X-macro: call id = position in this list; the names go into the file. */
#define MC_CALLS(X)                                                            \
    X(BARRIER, "MPI_Barrier")                                                  \
    X(ALLREDUCE, "MPI_Allreduce")                                              \
    X(ALLTOALL, "MPI_Alltoall")                                                \
    X(SENDRECV, "MPI_Sendrecv")                                                \
    X(WAIT, "MPI_Wait")                                                        \
    X(WAITALL, "MPI_Waitall")                                                  \
    X(BCAST, "MPI_Bcast")                                                      \
    X(REDUCE, "MPI_Reduce")                                                    \
    X(ALLGATHER, "MPI_Allgather")                                              \
    X(GATHER, "MPI_Gather")                                                    \
    X(SCATTER, "MPI_Scatter")                                                  \
    X(RECV, "MPI_Recv")                                                        \
    X(SEND, "MPI_Send")                                                        \
    X(WAITANY, "MPI_Waitany")                                                  \
    X(ALLTOALLV, "MPI_Alltoallv")                                              \
    X(ALLGATHERV, "MPI_Allgatherv")                                            \
    X(GATHERV, "MPI_Gatherv")                                                  \
    X(SCATTERV, "MPI_Scatterv")                                                \
    X(SSEND, "MPI_Ssend")                                                      \
    X(BSEND, "MPI_Bsend")                                                      \
    X(PROBE, "MPI_Probe")                                                      \
    X(WAITSOME, "MPI_Waitsome")

#define MC_ENUM(id, name) MC_##id,
enum mc_call { MC_CALLS(MC_ENUM) MC_NCALLS };
#define MC_NAME(id, name) name,
static const char *const mc_call_names[MC_NCALLS] = {MC_CALLS(MC_NAME)};

typedef struct {
    uint64_t t_enter;  /* ns, CLOCK_MONOTONIC */
    uint64_t dur_call; /* (t_exit - t_enter) << 8 | call id */
} mc_event;

typedef struct mc_chunk {
    struct mc_chunk *next;
    size_t cap;
    size_t n;
    mc_event ev[];
} mc_chunk;

struct mc_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint32_t record_bytes;
    uint32_t n_calls;
    int32_t rank;
    int32_t size;
    int32_t pid;
    uint32_t flags;
    int32_t signal;
    uint32_t clock_id;
    uint64_t t_init_start;
    uint64_t t_init_end;
    uint64_t t_finalize;
    uint64_t n_events;
    uint64_t n_dropped;
    char hostname[64];
    char jobid[64];
};
_Static_assert(sizeof(struct mc_header) == 216, "header layout");
_Static_assert(offsetof(struct mc_header, t_init_start) == 48, "header layout");
_Static_assert(sizeof(mc_event) == 16, "record layout");
_Static_assert(MC_NCALLS < 256, "call id must fit in 8 bits");

static struct {
    volatile int active;
    int thread_multiple;
    int rank;
    int size;
    uint64_t t_init_start;
    uint64_t t_init_end;
    uint64_t n_events;
    uint64_t n_dropped;
    uint64_t max_events;
    uint64_t stop_after;     /* MC_PMPI_ITERATIONS, 0 = record until the end */
    uint64_t boundary_count; /* boundary calls seen */
    uint32_t boundary_id;
    mc_chunk *head;
    mc_chunk *tail;
    volatile uint64_t inflight_enter;
    volatile uint32_t inflight_call;
    int written;
    pthread_mutex_t lock;
    struct sigaction old_term;
    struct sigaction old_int;
    char hostname[64];
    char jobid[64];
    char path[4096];
    char tmp_path[4112];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Per-thread nesting depth: a wrapped call made from inside another is not
 * recorded twice (some MPI implementations call MPI_* internally). */
static __thread int mc_depth __attribute__((tls_model("initial-exec")));

static inline uint64_t mc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static mc_chunk *mc_new_chunk(size_t cap)
{
    mc_chunk *c = malloc(sizeof(mc_chunk) + cap * sizeof(mc_event));
    if (c == NULL)
        return NULL;
    c->next = NULL;
    c->cap = cap;
    c->n = 0;
    return c;
}

/* Chunks double in size up to MC_MAX_CHUNK: no copying, O(log n) mallocs. */
static mc_chunk *mc_grow(void)
{
    size_t cap = g.tail->cap * 2;
    if (cap > MC_MAX_CHUNK)
        cap = MC_MAX_CHUNK;
    mc_chunk *c = mc_new_chunk(cap);
    if (c == NULL)
        return NULL;
    __atomic_store_n(&g.tail->next, c, __ATOMIC_RELEASE);
    g.tail = c;
    return c;
}

static void mc_append(uint32_t id, uint64_t t0, uint64_t t1)
{
    if (g.thread_multiple)
        pthread_mutex_lock(&g.lock);
    mc_chunk *c = g.tail;
    if (c != NULL && g.n_events < g.max_events) {
        if (__builtin_expect(c->n == c->cap, 0))
            c = mc_grow();
        if (c != NULL) {
            c->ev[c->n].t_enter = t0;
            c->ev[c->n].dur_call = ((t1 - t0) << 8) | id;
            __atomic_store_n(&c->n, c->n + 1, __ATOMIC_RELEASE);
            g.n_events++;
        } else {
            g.n_dropped++;
        }
    } else {
        g.n_dropped++;
    }
    if (g.thread_multiple)
        pthread_mutex_unlock(&g.lock);
}

static inline int mc_begin(uint32_t id, uint64_t *t0)
{
    if (!g.active || mc_depth)
        return 0;
    mc_depth++;
    *t0 = mc_now();
    g.inflight_call = id;
    g.inflight_enter = *t0;
    return 1;
}

static void mc_write_now(uint32_t flags);

static inline void mc_end(uint32_t id, uint64_t t0)
{
    uint64_t t1 = mc_now();
    g.inflight_enter = 0;
    mc_depth--;
    mc_append(id, t0, t1);
    if (__builtin_expect(g.stop_after != 0, 0) && id == g.boundary_id) {
        if (__atomic_add_fetch(&g.boundary_count, 1, __ATOMIC_RELAXED) == g.stop_after)
            mc_write_now(MC_FLAG_ITERATIONS);
    }
}

#define MC_ENTER(id)                                                           \
    uint64_t mc_t0 = 0;                                                        \
    int mc_rec = mc_begin(MC_##id, &mc_t0)
#define MC_LEAVE(id)                                                           \
    do {                                                                       \
        if (mc_rec)                                                            \
            mc_end(MC_##id, mc_t0);                                            \
    } while (0)

/* ---- writer (async-signal-safe) ---------------------------------------- */

static int mc_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t k = write(fd, p, len);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Writes the trace once; later calls (e.g. atexit after a signal) do nothing. */
static void mc_write(uint32_t flags, int signo)
{
    if (__atomic_exchange_n(&g.written, 1, __ATOMIC_ACQ_REL))
        return;
    uint64_t t_end = mc_now();
    g.active = 0;

    mc_event extra;
    int have_extra = 0;
    uint64_t open_enter = g.inflight_enter;
    if (open_enter != 0 && !(flags & MC_FLAG_FINALIZED)) {
        /* Killed inside an MPI call: close that call at the time of writing. */
        extra.t_enter = open_enter;
        extra.dur_call = ((t_end - open_enter) << 8) | (g.inflight_call & 0xffu);
        have_extra = 1;
        flags |= MC_FLAG_INFLIGHT;
    }
    if (g.n_dropped)
        flags |= MC_FLAG_TRUNCATED;
    if (g.thread_multiple)
        flags |= MC_FLAG_THREAD_MULTIPLE;

    uint64_t n = 0;
    for (mc_chunk *c = g.head; c != NULL; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
        n += __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);

    struct mc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MC_MAGIC, 8);
    h.version = MC_VERSION;
    h.header_bytes = (uint32_t)(sizeof h + MC_NCALLS * MC_NAME_BYTES);
    h.record_bytes = (uint32_t)sizeof(mc_event);
    h.n_calls = MC_NCALLS;
    h.rank = g.rank;
    h.size = g.size;
    h.pid = (int32_t)getpid();
    h.flags = flags;
    h.signal = signo;
    h.clock_id = (uint32_t)CLOCK_MONOTONIC;
    h.t_init_start = g.t_init_start;
    h.t_init_end = g.t_init_end;
    h.t_finalize = t_end;
    h.n_events = n + (uint64_t)have_extra;
    h.n_dropped = g.n_dropped;
    memcpy(h.hostname, g.hostname, sizeof h.hostname);
    memcpy(h.jobid, g.jobid, sizeof h.jobid);

    char names[MC_NCALLS * MC_NAME_BYTES];
    memset(names, 0, sizeof names);
    for (int i = 0; i < MC_NCALLS; i++) {
        size_t len = strlen(mc_call_names[i]);
        memcpy(names + i * MC_NAME_BYTES, mc_call_names[i],
               len < MC_NAME_BYTES - 1 ? len : MC_NAME_BYTES - 1);
    }

    int fd = open(g.tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int bad = mc_write_all(fd, &h, sizeof h) || mc_write_all(fd, names, sizeof names);
    uint64_t left = n;
    for (mc_chunk *c = g.head; c != NULL && !bad && left > 0; c = c->next) {
        size_t k = c->n < left ? c->n : (size_t)left;
        bad = mc_write_all(fd, c->ev, k * sizeof(mc_event));
        left -= k;
    }
    if (!bad && have_extra)
        bad = mc_write_all(fd, &extra, sizeof extra);
    if (close(fd) != 0)
        bad = 1;
    if (!bad)
        rename(g.tmp_path, g.path);
    else
        unlink(g.tmp_path);
}

/* Write from normal context with SIGTERM/SIGINT held back, so a signal cannot cut the write. */
static void mc_write_now(uint32_t flags)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    mc_write(flags, 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void mc_signal_handler(int signo)
{
    int saved = errno;
    mc_write(MC_FLAG_SIGNAL, signo);
    sigaction(signo, signo == SIGTERM ? &g.old_term : &g.old_int, NULL);
    errno = saved;
    raise(signo);
}

static void mc_atexit(void)
{
    if (g.head != NULL)
        mc_write(MC_FLAG_ATEXIT, 0);
}

/* ---- set-up --------------------------------------------------------------- */

static void mc_sanitize(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] != '\0' && i + 1 < cap; i++) {
        char ch = src[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
        dst[i] = ok ? ch : '_';
    }
    dst[i] = '\0';
}

static void mc_install_handler(int signo, struct sigaction *old)
{
    struct sigaction cur;
    if (sigaction(signo, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN)
        return; /* an ignored signal must stay ignored */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = mc_signal_handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaction(signo, &sa, old);
}

static void mc_setup(uint64_t t_start, int provided)
{
    const char *s;
    g.t_init_start = t_start;
    mc_wait_setup();
    if ((s = getenv("MC_PMPI_TRACE")) != NULL && strcmp(s, "0") == 0)
        return; /* preloaded for its wait mode only: record nothing, write no trace */
    g.thread_multiple = provided == MPI_THREAD_MULTIPLE;
    PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g.size);

    g.max_events = MC_DEFAULT_MAX_EVENTS;
    if ((s = getenv("MC_PMPI_MAX_EVENTS")) != NULL && *s != '\0')
        g.max_events = strtoull(s, NULL, 10);

    if ((s = getenv("MC_PMPI_ITERATIONS")) != NULL && *s != '\0')
        g.stop_after = strtoull(s, NULL, 10);
    const char *boundary = getenv("MC_PMPI_BOUNDARY");
    if (boundary == NULL || *boundary == '\0')
        boundary = "MPI_Barrier";
    g.boundary_id = MC_NCALLS; /* matches nothing unless the name is known */
    for (uint32_t i = 0; i < MC_NCALLS; i++)
        if (strcmp(boundary, mc_call_names[i]) == 0)
            g.boundary_id = i;
    if (g.stop_after != 0 && g.boundary_id == MC_NCALLS)
        fprintf(stderr, "mc_pmpi: MC_PMPI_BOUNDARY=%s is not an intercepted call; tracing to the end\n", boundary);

    if (gethostname(g.hostname, sizeof g.hostname - 1) != 0)
        strcpy(g.hostname, "unknown");

    /* Every rank must agree on the id, so the pid fallback comes from rank 0. */
    int root_pid = (int)getpid();
    PMPI_Bcast(&root_pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if ((s = getenv("MC_PMPI_JOBID")) != NULL && *s != '\0')
        mc_sanitize(g.jobid, sizeof g.jobid, s);
    else if ((s = getenv("FLUX_JOB_ID")) != NULL && *s != '\0')
        mc_sanitize(g.jobid, sizeof g.jobid, s);
    else
        snprintf(g.jobid, sizeof g.jobid, "p%d", root_pid);

    char cwd[2048];
    const char *dir = getenv("MC_PMPI_DIR");
    if (dir == NULL || *dir == '\0')
        dir = getcwd(cwd, sizeof cwd) != NULL ? cwd : ".";
    snprintf(g.path, sizeof g.path, "%s/pmpi.%s.%d.bin", dir, g.jobid, g.rank);
    snprintf(g.tmp_path, sizeof g.tmp_path, "%s.tmp%d", g.path, (int)getpid());

    g.head = g.tail = mc_new_chunk(MC_FIRST_CHUNK);
    if (g.head == NULL) {
        fprintf(stderr, "mc_pmpi: rank %d: cannot allocate the event buffer; not profiling\n", g.rank);
        return;
    }
    atexit(mc_atexit);
    mc_install_handler(SIGTERM, &g.old_term);
    mc_install_handler(SIGINT, &g.old_int);
    g.t_init_end = mc_now();
    g.active = 1;
}

/* ---- lifecycle -------------------------------------------------------------- */

int MPI_Init(int *argc, char ***argv)
{
    uint64_t t = mc_now();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        mc_setup(t, MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    uint64_t t = mc_now();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        mc_setup(t, *provided);
    return rc;
}

int MPI_Finalize(void)
{
    mc_wait_report();
    if (g.head != NULL)
        mc_write_now(MC_FLAG_FINALIZED);
    return PMPI_Finalize();
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    if (g.head != NULL)
        mc_write(MC_FLAG_ABORT, 0);
    return PMPI_Abort(comm, errorcode);
}

/* ---- wrapped calls ------------------------------------------------------------ */

int MPI_Barrier(MPI_Comm comm)
{
    MC_ENTER(BARRIER);
    MPI_Request req;
    int rc = mc_wait.sleep && MC_WAIT_COLLECTIVES
                 ? mc_wait_started(MC_BARRIER, PMPI_Ibarrier(comm, &req), &req, MPI_STATUS_IGNORE)
                 : PMPI_Barrier(comm);
    MC_LEAVE(BARRIER);
    return rc;
}

int MPI_Allreduce(MC_CONST void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    MC_ENTER(ALLREDUCE);
    MPI_Request req;
    int rc = mc_wait.sleep && MC_WAIT_COLLECTIVES
                 ? mc_wait_started(MC_ALLREDUCE, PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, &req), &req,
                                   MPI_STATUS_IGNORE)
                 : PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    MC_LEAVE(ALLREDUCE);
    return rc;
}

int MPI_Alltoall(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    MC_ENTER(ALLTOALL);
    MPI_Request req;
    int rc = mc_wait.sleep && MC_WAIT_COLLECTIVES
                 ? mc_wait_started(MC_ALLTOALL, PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                                  &req),
                                   &req, MPI_STATUS_IGNORE)
                 : PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    MC_LEAVE(ALLTOALL);
    return rc;
}

int MPI_Alltoallv(MC_CONST void *sendbuf, MC_CONST int sendcounts[], MC_CONST int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, MC_CONST int recvcounts[], MC_CONST int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    MC_ENTER(ALLTOALLV);
    int rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                            recvtype, comm);
    MC_LEAVE(ALLTOALLV);
    return rc;
}

int MPI_Sendrecv(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
    MC_ENTER(SENDRECV);
    int rc;
    if (mc_wait.sleep) {
        MPI_Request reqs[2];
        MPI_Status statuses[2];
        rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &reqs[0]);
        if (rc == MPI_SUCCESS)
            rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &reqs[1]);
        if (rc == MPI_SUCCESS)
            rc = mc_wait_all(MC_SENDRECV, 2, reqs, statuses);
        if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE)
            *status = statuses[0];
    } else {
        rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                           recvtag, comm, status);
    }
    MC_LEAVE(SENDRECV);
    return rc;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    MC_ENTER(WAIT);
    int rc = mc_wait.sleep ? mc_wait_one(MC_WAIT, request, status) : PMPI_Wait(request, status);
    MC_LEAVE(WAIT);
    return rc;
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses)
{
    MC_ENTER(WAITALL);
    int rc = mc_wait.sleep ? mc_wait_all(MC_WAITALL, count, array_of_requests, array_of_statuses)
                            : PMPI_Waitall(count, array_of_requests, array_of_statuses);
    MC_LEAVE(WAITALL);
    return rc;
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    MC_ENTER(WAITANY);
    int rc = mc_wait.sleep ? mc_wait_any(MC_WAITANY, count, array_of_requests, index, status)
                            : PMPI_Waitany(count, array_of_requests, index, status);
    MC_LEAVE(WAITANY);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[])
{
    MC_ENTER(WAITSOME);
    int rc = mc_wait.sleep
                 ? mc_wait_some(MC_WAITSOME, incount, array_of_requests, outcount, array_of_indices, array_of_statuses)
                 : PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    MC_LEAVE(WAITSOME);
    return rc;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    MC_ENTER(BCAST);
    MPI_Request req;
    int rc = mc_wait.sleep && MC_WAIT_COLLECTIVES
                 ? mc_wait_started(MC_BCAST, PMPI_Ibcast(buffer, count, datatype, root, comm, &req), &req, MPI_STATUS_IGNORE)
                 : PMPI_Bcast(buffer, count, datatype, root, comm);
    MC_LEAVE(BCAST);
    return rc;
}

int MPI_Reduce(MC_CONST void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm)
{
    MC_ENTER(REDUCE);
    MPI_Request req;
    int rc = mc_wait.sleep && MC_WAIT_COLLECTIVES
                 ? mc_wait_started(MC_REDUCE, PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, &req), &req,
                                   MPI_STATUS_IGNORE)
                 : PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    MC_LEAVE(REDUCE);
    return rc;
}

int MPI_Allgather(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    MC_ENTER(ALLGATHER);
    MPI_Request req;
    int rc = mc_wait.sleep && MC_WAIT_COLLECTIVES
                 ? mc_wait_started(MC_ALLGATHER, PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                                   comm, &req),
                                   &req, MPI_STATUS_IGNORE)
                 : PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    MC_LEAVE(ALLGATHER);
    return rc;
}

int MPI_Allgatherv(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   MC_CONST int recvcounts[], MC_CONST int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    MC_ENTER(ALLGATHERV);
    int rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    MC_LEAVE(ALLGATHERV);
    return rc;
}

int MPI_Gather(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    MC_ENTER(GATHER);
    int rc = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    MC_LEAVE(GATHER);
    return rc;
}

int MPI_Gatherv(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                MC_CONST int recvcounts[], MC_CONST int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm)
{
    MC_ENTER(GATHERV);
    int rc = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    MC_LEAVE(GATHERV);
    return rc;
}

int MPI_Scatter(MC_CONST void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    MC_ENTER(SCATTER);
    int rc = PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    MC_LEAVE(SCATTER);
    return rc;
}

int MPI_Scatterv(MC_CONST void *sendbuf, MC_CONST int sendcounts[], MC_CONST int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm)
{
    MC_ENTER(SCATTERV);
    int rc = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    MC_LEAVE(SCATTERV);
    return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MC_ENTER(RECV);
    MPI_Request req;
    int rc = mc_wait.sleep ? mc_wait_started(MC_RECV, PMPI_Irecv(buf, count, datatype, source, tag, comm, &req), &req, status)
                            : PMPI_Recv(buf, count, datatype, source, tag, comm, status);
    MC_LEAVE(RECV);
    return rc;
}

int MPI_Send(MC_CONST void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    MC_ENTER(SEND);
    MPI_Request req;
    int rc = mc_wait.sleep
                 ? mc_wait_started(MC_SEND, PMPI_Isend(buf, count, datatype, dest, tag, comm, &req), &req, MPI_STATUS_IGNORE)
                 : PMPI_Send(buf, count, datatype, dest, tag, comm);
    MC_LEAVE(SEND);
    return rc;
}

int MPI_Ssend(MC_CONST void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    MC_ENTER(SSEND);
    MPI_Request req;
    int rc = mc_wait.sleep
                 ? mc_wait_started(MC_SSEND, PMPI_Issend(buf, count, datatype, dest, tag, comm, &req), &req, MPI_STATUS_IGNORE)
                 : PMPI_Ssend(buf, count, datatype, dest, tag, comm);
    MC_LEAVE(SSEND);
    return rc;
}

int MPI_Bsend(MC_CONST void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    MC_ENTER(BSEND);
    int rc = PMPI_Bsend(buf, count, datatype, dest, tag, comm);
    MC_LEAVE(BSEND);
    return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MC_ENTER(PROBE);
    int rc;
    if (mc_wait.sleep) {
        mc_waiter w = mc_wait_begin(MC_PROBE);
        int found = 0;
        while ((rc = PMPI_Iprobe(source, tag, comm, &found, status)) == MPI_SUCCESS && !found)
            mc_wait_pause(&w);
        mc_wait_end(&w);
    } else {
        rc = PMPI_Probe(source, tag, comm, status);
    }
    MC_LEAVE(PROBE);
    return rc;
}
