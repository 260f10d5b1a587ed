/*
 * delayline.c - a constant network delay for a pod, where the kernel has no netem qdisc.
 *
 * usage: mc-delayline QUEUE DELAY_US
 *
 * Run inside the pod's network namespace (`ip netns exec NS mc-delayline 0 500`), next to the rule
 *   iptables -t mangle -A POSTROUTING -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass
 * Every packet leaving eth0 is handed to this process, held for DELAY_US microseconds and accepted. The delay is
 * the same for every packet, so a FIFO of (packet id, deadline) keeps the deadlines in order and packets leave in
 * the order they came, as through netem without jitter. Only metadata is copied to user space (the packet stays
 * in the kernel), so the cost per packet is one netlink message each way.
 *
 * Fail-open: when the queue is full the kernel lets packets through undelayed instead of dropping them, and the
 * iptables rule's --queue-bypass does the same when this process is gone. Emulation may degrade; traffic is never
 * lost because of it.
 *
 * Prints "ready" on stdout once bound to the queue; exits 0 on SIGTERM/SIGINT after releasing every held packet.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h> /* NF_ACCEPT */

#define RING 65536u       /* packets held at once at most; the kernel queue is capped below it */
#define QUEUE_MAXLEN 16384u

struct held {
    uint32_t id;
    int64_t due_ns;
};

static struct held ring[RING];
static unsigned head, tail; /* ring[head..tail) are held, oldest first */
static int64_t delay_ns;
static volatile sig_atomic_t stopping;
static unsigned long long delayed, released_early;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void release(struct nfq_q_handle *qh, uint32_t id)
{
    if (nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL) < 0)
        perror("mc-delayline: verdict");
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data)
{
    (void)msg;
    (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (ph == NULL)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (tail - head >= RING) { /* cannot hold more: let it through now rather than lose it */
        release(qh, id);
        released_early++;
        return 0;
    }
    ring[tail % RING] = (struct held){id, now_ns() + delay_ns};
    tail++;
    delayed++;
    return 0;
}

static void release_due(struct nfq_q_handle *qh, int64_t now)
{
    while (head != tail && ring[head % RING].due_ns <= now) {
        release(qh, ring[head % RING].id);
        head++;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mc-delayline QUEUE DELAY_US\n");
        return 2;
    }
    char *end = NULL;
    long queue = strtol(argv[1], &end, 10);
    if (*end != '\0' || queue < 0 || queue > 65535) {
        fprintf(stderr, "mc-delayline: QUEUE %s: expected 0..65535\n", argv[1]);
        return 2;
    }
    double delay_us = strtod(argv[2], &end);
    if (*end != '\0' || delay_us <= 0 || delay_us > 10e6) {
        fprintf(stderr, "mc-delayline: DELAY_US %s: expected a delay in (0, 10000000] microseconds\n", argv[2]);
        return 2;
    }
    delay_ns = (int64_t)(delay_us * 1000.0);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake at the deadline, not up to 50 us after it */
    /* A delay line that waits behind busy MPI ranks for a CPU adds their time slice to every packet: run it
     * real-time when allowed (root), at the lowest priority, which still preempts every ordinary process. */
    struct sched_param rt = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &rt) != 0)
        fprintf(stderr, "mc-delayline: not real-time (%s); delays may stretch under CPU load\n", strerror(errno));

    struct nfq_handle *h = nfq_open();
    if (h == NULL) {
        perror("mc-delayline: nfq_open");
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t)queue, &on_packet, NULL);
    if (qh == NULL) {
        fprintf(stderr, "mc-delayline: cannot bind queue %ld (%s; is another process bound to it?)\n", queue,
                strerror(errno));
        nfq_close(h);
        return 1;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
        perror("mc-delayline: nfq_set_mode");
        return 1;
    }
    nfq_set_queue_maxlen(qh, QUEUE_MAXLEN);
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN) < 0)
        fprintf(stderr, "mc-delayline: no fail-open on this kernel; a full queue drops packets\n");
    int fd = nfq_fd(h);
    /* Room for bursts: the kernel drops queue messages it cannot deliver to a full socket. */
    nfnl_rcvbufsiz(nfq_nfnlh(h), 8u << 20);

    printf("ready\n");
    fflush(stdout);

    char buf[4096] __attribute__((aligned));
    while (!stopping) {
        int64_t now = now_ns();
        release_due(qh, now);
        struct timespec wait = {1, 0};
        if (head != tail) {
            int64_t left = ring[head % RING].due_ns - now;
            wait.tv_sec = left / 1000000000;
            wait.tv_nsec = left % 1000000000;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = ppoll(&pfd, 1, &wait, NULL);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            perror("mc-delayline: ppoll");
            break;
        }
        if (ready == 0)
            continue;
        for (;;) { /* drain every message waiting, without blocking */
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n < 0) {
                if (errno == ENOBUFS) { /* the kernel dropped messages: those packets went out (fail-open) */
                    released_early++;
                    continue;
                }
                break;
            }
            nfq_handle_packet(h, buf, (int)n);
        }
    }
    while (head != tail) { /* never strand a packet in the queue */
        release(qh, ring[head % RING].id);
        head++;
    }
    fprintf(stderr, "mc-delayline: %llu packets delayed, %llu let through undelayed\n", delayed, released_early);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
