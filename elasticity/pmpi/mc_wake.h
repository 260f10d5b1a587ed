/*
 * mc_wake.h - a sleeping rank wakes when a message reaches it, included by mc_wait.h.
 *
 * A timed nap is a guess: the rank whose message ends the wait sends it at some moment, and the sleeper sees it
 * only when the nap ends. Over TCP (the transport the multiplexing controller chooses, btl tcp,self), every
 * message that can end a wait arrives on one of the rank's connected TCP sockets, so a nap can be a ppoll() on
 * those sockets with the nap as its timeout: the kernel wakes the rank when data arrives, the nap bounds the
 * wait when nothing does (shared memory, self sends). This is the interrupt-driven wait of Intel MPI's
 * I_MPI_WAIT_MODE and MPICH's blocking progress, for Open MPI 4.1, which has none.
 *
 * The sockets are found in /proc/self/fd (connected AF_INET/AF_INET6 stream sockets, not listeners: Open MPI's
 * TCP BTL connects lazily, so the set is rescanned often at first, then every few hundred waits). Sockets other
 * threads own (PMIx, ORTE) are Unix sockets and not watched. A socket that stays readable without the wait
 * completing (data nobody here drains, a hang-up) would turn naps into spins: after MC_WAKE_MAX_WAKES such
 * wake-ups in one wait, the rest of that wait naps on the clock alone.
 *
 * A woken rank must also get a core. MC_MPI_WAIT_SLICE_US=N asks for an N us EEVDF slice for the waiting thread
 * (sched_setattr's sched_runtime, Linux 6.12+; older kernels ignore it): a task with a shorter slice preempts on
 * wake-up. Off by default: on bench_multiplex it changed nothing measurable, and on one shared core it cost the
 * MPI job 10% (docs/multiplexing.md, "How MPI waits decide what can be reclaimed").
 *
 * MC_MPI_WAIT_EVENTS=0 turns the socket wake-ups off (timed naps only).
 */
#ifndef MC_WAKE_H
#define MC_WAKE_H

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MC_WAKE_MAX_FDS 512
#define MC_WAKE_MAX_WAKES 64         /* wake-ups in one wait before its naps fall back to the clock */
#define MC_WAKE_EARLY_SCANS 16       /* connections are still being made: rescan every few waits */
#define MC_WAKE_EARLY_EVERY 4
#define MC_WAKE_STEADY_EVERY 256
#define MC_WAKE_DEFAULT_SLICE_US 0

static struct {
    int enabled;
    int nfds;
    unsigned scans;
    unsigned waits_since_scan;
    struct pollfd fds[MC_WAKE_MAX_FDS];
} mc_wake = {0, 0, 0, 0, {{0, 0, 0}}};

/* sched_setattr's argument (linux/sched/types.h, which clashes with glibc's sched.h), version 1 (48 bytes). */
struct mc_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};

/* A short EEVDF slice for this (the waiting) thread; keeps its nice value, leaves other policies alone. */
static void mc_wake_short_slice(void)
{
    const char *s = getenv("MC_MPI_WAIT_SLICE_US");
    unsigned long long us = s != NULL && *s != '\0' ? strtoull(s, NULL, 10) : MC_WAKE_DEFAULT_SLICE_US;
    if (us == 0 || sched_getscheduler(0) != SCHED_OTHER)
        return;
    struct mc_sched_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.sched_policy = SCHED_OTHER;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    attr.sched_nice = errno == 0 ? nice : 0;
    attr.sched_runtime = us * 1000ull;
    (void)syscall(SYS_sched_setattr, 0, &attr, 0); /* refused or ignored: the default slice stays */
}

static void mc_wake_setup(int sleeping)
{
    const char *s = getenv("MC_MPI_WAIT_EVENTS");
    mc_wake.enabled = sleeping && !(s != NULL && strcmp(s, "0") == 0);
    if (sleeping)
        mc_wake_short_slice();
}

static int mc_wake_peer_socket(int fd)
{
    int value = 0;
    socklen_t len = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 || value != SOCK_STREAM)
        return 0; /* not a socket (ENOTSOCK), or not a stream */
    len = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value)
        return 0; /* a listener: readable only while a connection is pending */
    struct sockaddr_storage addr;
    len = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        return 0;
    return addr.ss_family == AF_INET || addr.ss_family == AF_INET6;
}

static void mc_wake_scan(void)
{
    mc_wake.nfds = 0;
    mc_wake.waits_since_scan = 0;
    mc_wake.scans++;
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL)
        return; /* no /proc: naps on the clock */
    int own = dirfd(dir);
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL && mc_wake.nfds < MC_WAKE_MAX_FDS) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        int fd = atoi(entry->d_name);
        if (fd != own && mc_wake_peer_socket(fd)) {
            mc_wake.fds[mc_wake.nfds].fd = fd;
            mc_wake.fds[mc_wake.nfds].events = POLLIN;
            mc_wake.nfds++;
        }
    }
    closedir(dir);
}

/* At the start of each wait: keep the socket set current. */
static void mc_wake_begin(void)
{
    if (!mc_wake.enabled)
        return;
    unsigned every = mc_wake.scans < MC_WAKE_EARLY_SCANS ? MC_WAKE_EARLY_EVERY : MC_WAKE_STEADY_EVERY;
    if (mc_wake.scans == 0 || ++mc_wake.waits_since_scan >= every)
        mc_wake_scan();
}

/* Sleep up to ns; 1 when a watched socket became readable first, 0 when the time ran out. */
static int mc_wake_nap(uint64_t ns, int watch)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    if (!watch || !mc_wake.enabled || mc_wake.nfds == 0) {
        nanosleep(&ts, NULL);
        return 0;
    }
    int ready = ppoll(mc_wake.fds, (nfds_t)mc_wake.nfds, &ts, NULL);
    if (ready <= 0)
        return 0; /* timeout, or a signal: the caller tests and naps again */
    for (int i = 0; i < mc_wake.nfds;) {
        if (mc_wake.fds[i].revents & (POLLNVAL | POLLHUP | POLLERR))
            mc_wake.fds[i] = mc_wake.fds[--mc_wake.nfds]; /* closed or hung up: the next scan decides */
        else
            i++;
    }
    return 1;
}

#endif /* MC_WAKE_H */
