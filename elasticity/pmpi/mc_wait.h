/*
 * mc_wait.h - how a rank waits inside MPI, included by mc_pmpi.c (one preloaded library: two PMPI layers
 * cannot stack).
 *
 * Open MPI 4.1 waits by polling: a rank blocked in MPI_Barrier stays runnable and burns a core, even with
 * mpi_yield_when_idle (sched_yield only helps against tasks of the same cgroup). CPU multiplexing needs the
 * opposite: a waiting rank that gives its core away. With MC_MPI_WAIT=sleep the blocking calls below are
 * issued as their non-blocking forms and completed by polling PMPI_Test for MC_MPI_WAIT_SPIN_US (default 20:
 * short waits keep their latency; so do calls whose waits have been short), then sleeping between polls:
 * through 7/8 of the wait this call took before, then in naps of MC_MPI_WAIT_NAP_US (default 20) growing with
 * the overrun until it completes; a message arriving on one of the rank's TCP connections ends a nap at once
 * (mc_wake.h). Intel MPI calls this I_MPI_WAIT_MODE: the cost is a wake-up's latency per long wait, the gain is
 * a waiting rank's CPU time near zero.
 *
 * MC_MPI_WAIT=poll (the default) leaves every call to the MPI library.
 *
 * The spin is the lever for fine-grained solvers: rhoSimpleFoam reduces thousands of times per iteration, a
 * millisecond or less apart, and every nap there puts a wake-up on the collective's critical path (each rank that
 * forwards data pays it once per hop). A spin about as long as a wake-up costs under load (MC_MPI_WAIT_SPIN_US=1000,
 * `minicluster multiplex --mpi-spin-us 1000`) lets those waits complete without one while longer waits still sleep
 * (docs/multiplexing.md). It is a whole number of microseconds from 0 to 1000000; anything else is said on stderr
 * and the default kept. MC_MPI_WAIT_STATS=1 prints one line per rank at MPI_Finalize: waits, how many napped, the
 * naps, the ones a message ended, the time waiting and asleep.
 */
#ifndef MC_WAIT_H
#define MC_WAIT_H

#include <mpi.h>

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "mc_wake.h"

#define MC_WAIT_DEFAULT_SPIN_US 20
#define MC_WAIT_MAX_SPIN_US 1000000 /* elasticity/pmpi/env.py SPIN_US_MAX */
#define MC_WAIT_DEFAULT_NAP_US 20
#define MC_WAIT_LONG_NAP_NS 1000000ull /* a predicted wait is slept in naps of at most 1 ms */
#define MC_WAIT_SHORT_NS 200000ull  /* waits predicted shorter than this keep polling */
#define MC_WAIT_SLOTS 64               /* one per wrapped call id (MC_NCALLS < 64) */

static struct {
    int sleep;        /* MC_MPI_WAIT=sleep */
    uint64_t spin_ns; /* poll this long before the first nap */
    uint64_t nap_ns;  /* the nap once the predicted end has passed: the most latency a wait adds */
    uint64_t predicted_ns[MC_WAIT_SLOTS];
} mc_wait = {0, MC_WAIT_DEFAULT_SPIN_US * 1000ull, MC_WAIT_DEFAULT_NAP_US * 1000ull, {0}};

/* What the waits did, for MC_MPI_WAIT_STATS=1 (one line per rank on stderr at MPI_Finalize): how many waits
 * completed while polling and how many slept, the naps and the time asleep. */
static struct {
    int report;
    uint64_t waits;     /* waits completed in sleep mode */
    uint64_t napped;    /* of which slept at least once */
    uint64_t naps;      /* naps taken */
    uint64_t woken;     /* naps a message ended (mc_wake.h) */
    uint64_t wait_ns;   /* time inside the waits */
    uint64_t nap_ns;    /* of which asleep (asked for; the kernel may add its latency) */
} mc_wait_stats;

static uint64_t mc_wait_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void mc_wait_setup(void)
{
    const char *s = getenv("MC_MPI_WAIT");
    mc_wait.sleep = s != NULL && strcmp(s, "sleep") == 0;
    if (s != NULL && *s != '\0' && strcmp(s, "sleep") != 0 && strcmp(s, "poll") != 0)
        fprintf(stderr, "mc_pmpi: MC_MPI_WAIT=%s is neither poll nor sleep; polling\n", s);
    if ((s = getenv("MC_MPI_WAIT_SPIN_US")) != NULL && *s != '\0') {
        char *end = NULL;
        unsigned long long spin_us = strtoull(s, &end, 10);
        if (*end != '\0' || *s == '-' || spin_us > MC_WAIT_MAX_SPIN_US)
            fprintf(stderr, "mc_pmpi: MC_MPI_WAIT_SPIN_US=%s is not a whole number from 0 to %d; spinning %d us\n", s,
                    MC_WAIT_MAX_SPIN_US, MC_WAIT_DEFAULT_SPIN_US);
        else
            mc_wait.spin_ns = spin_us * 1000ull;
    }
    if ((s = getenv("MC_MPI_WAIT_NAP_US")) != NULL && *s != '\0') {
        uint64_t nap_us = strtoull(s, NULL, 10);
        mc_wait.nap_ns = (nap_us > 0 ? nap_us : 1) * 1000ull;
    }
    mc_wait_stats.report = (s = getenv("MC_MPI_WAIT_STATS")) != NULL && strcmp(s, "1") == 0;
    mc_wake_setup(mc_wait.sleep);
    if (mc_wait.sleep)
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* naps of tens of us: the default 50 us slack would double them */
}

/* One wait in progress. An iterative solver waits about as long in the same call every iteration, so each
 * call id keeps a prediction: the wait sleeps until 7/8 of it, then in short naps (nap_ns) that grow with the
 * overrun (by 1/8 of it, at most 1 ms), so an unexpectedly long wait costs a few hundred wake-ups, not one per
 * nap_ns. The prediction follows a shorter wait at once and a longer one by 1/16 of the difference, and shrinks
 * by a quarter when the request was already complete at the first look after the long nap (the wait ended
 * earlier, by an unknown amount). Ranks sleeping in one collective lengthen each other's waits; without the
 * shrink they would teach each other to sleep ever longer. */
typedef struct {
    uint64_t start;
    unsigned slot;
    int slept_long;    /* took the nap up to the predicted end, and it ran out (no message woke it) */
    int polls_after;   /* unsuccessful polls since that nap */
    int wakes;         /* naps a readable socket ended (mc_wake.h) */
    int naps;          /* naps taken */
} mc_waiter;

static mc_waiter mc_wait_begin(unsigned slot)
{
    mc_wake_begin();
    mc_waiter w = {mc_wait_clock(), slot % MC_WAIT_SLOTS, 0, 0, 0, 0};
    return w;
}

static void mc_wait_pause(mc_waiter *w)
{
    if (w->slept_long)
        w->polls_after++;
    uint64_t elapsed = mc_wait_clock() - w->start;
    uint64_t predicted = mc_wait.predicted_ns[w->slot];
    if (elapsed < mc_wait.spin_ns || (predicted < MC_WAIT_SHORT_NS && elapsed < 2 * predicted + mc_wait.spin_ns)) {
        /* A short wait, or a call whose waits are short (the busy rank's): a nap would lose the core to whatever
         * else is runnable for a whole time slice, so poll, yielding as Open MPI's mpi_yield_when_idle does. */
        sched_yield();
        return;
    }
    uint64_t target = predicted / 8 * 7;
    uint64_t nap;
    int long_nap = elapsed + mc_wait.nap_ns < target;
    if (long_nap)
        nap = target - elapsed; /* asleep until the predicted end is near (or a message arrives) */
    else
        nap = elapsed > target ? (elapsed - target) / 8 : 0; /* past it: latency within 1/8 of the overrun */
    if (nap < mc_wait.nap_ns)
        nap = mc_wait.nap_ns;
    if (nap > MC_WAIT_LONG_NAP_NS)
        nap = MC_WAIT_LONG_NAP_NS;
    int woken = mc_wake_nap(nap, w->wakes < MC_WAKE_MAX_WAKES);
    w->wakes += woken;
    w->naps++;
    mc_wait_stats.naps++;
    mc_wait_stats.nap_ns += nap;
    mc_wait_stats.woken += (uint64_t)woken;
    if (long_nap && !woken) {
        w->slept_long = 1; /* the whole predicted nap, no message: the wait may have ended during it */
        w->polls_after = 0;
    }
}

static void mc_wait_end(const mc_waiter *w)
{
    uint64_t took = mc_wait_clock() - w->start;
    uint64_t *p = &mc_wait.predicted_ns[w->slot];
    mc_wait_stats.waits++;
    mc_wait_stats.napped += w->naps > 0;
    mc_wait_stats.wait_ns += took;
    if (w->slept_long && w->polls_after == 0)
        *p -= *p / 4; /* done at the first look after the long nap: it ended earlier, by an unknown amount */
    else
        *p = took <= *p ? took : *p + (took - *p) / 16;
}

static int mc_wait_one(unsigned slot, MPI_Request *request, MPI_Status *status)
{
    mc_waiter w = mc_wait_begin(slot);
    for (;;) {
        int done = 0;
        int rc = PMPI_Test(request, &done, status);
        if (rc != MPI_SUCCESS || done) {
            mc_wait_end(&w);
            return rc;
        }
        mc_wait_pause(&w);
    }
}

static int mc_wait_all(unsigned slot, int count, MPI_Request requests[], MPI_Status statuses[])
{
    mc_waiter w = mc_wait_begin(slot);
    for (;;) {
        int done = 0;
        int rc = PMPI_Testall(count, requests, &done, statuses);
        if (rc != MPI_SUCCESS || done) {
            mc_wait_end(&w);
            return rc;
        }
        mc_wait_pause(&w);
    }
}

static int mc_wait_any(unsigned slot, int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    mc_waiter w = mc_wait_begin(slot);
    for (;;) {
        int done = 0;
        int rc = PMPI_Testany(count, requests, index, &done, status);
        if (rc != MPI_SUCCESS || done) {
            mc_wait_end(&w);
            return rc;
        }
        mc_wait_pause(&w);
    }
}

static int mc_wait_some(unsigned slot, int count, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
    mc_waiter w = mc_wait_begin(slot);
    for (;;) {
        int rc = PMPI_Testsome(count, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) { /* some completed, or MPI_UNDEFINED: none active */
            mc_wait_end(&w);
            return rc;
        }
        mc_wait_pause(&w);
    }
}

/* A blocking call issued as its non-blocking form (rc) and completed by sleeping waits. */
static int mc_wait_started(unsigned slot, int rc, MPI_Request *request, MPI_Status *status)
{
    return rc == MPI_SUCCESS ? mc_wait_one(slot, request, status) : rc;
}

/* At MPI_Finalize: the statistics line MC_MPI_WAIT_STATS=1 asks for. */
static void mc_wait_report(void)
{
    if (!mc_wait_stats.report)
        return;
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr,
            "MC_WAIT rank=%d mode=%s waits=%llu napped=%llu naps=%llu woken=%llu wait_us=%llu nap_us=%llu\n", rank,
            mc_wait.sleep ? "sleep" : "poll", (unsigned long long)mc_wait_stats.waits,
            (unsigned long long)mc_wait_stats.napped, (unsigned long long)mc_wait_stats.naps,
            (unsigned long long)mc_wait_stats.woken, (unsigned long long)(mc_wait_stats.wait_ns / 1000),
            (unsigned long long)(mc_wait_stats.nap_ns / 1000));
}

#if MPI_VERSION >= 3
#define MC_WAIT_COLLECTIVES 1
#else
#define MC_WAIT_COLLECTIVES 0
#endif

#endif /* MC_WAIT_H */
