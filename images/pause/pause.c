/* The pod sandbox's first process: it holds the pod's namespaces open and reaps orphans, nothing else.
 * Kubernetes' own "pause" does the same; this one is ours, built here (no registry serves images to this
 * machine). It exits 0 on SIGINT or SIGTERM, which is how containerd stops a sandbox. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) {
  (void)signo;
  _exit(0);
}

static void reap(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (miniclusters) 3.10");
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "pause: warning: not pid 1\n");
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = stop;
  if (sigaction(SIGINT, &action, NULL) < 0 || sigaction(SIGTERM, &action, NULL) < 0) return 1;
  action.sa_handler = reap;
  action.sa_flags = SA_NOCLDSTOP;
  if (sigaction(SIGCHLD, &action, NULL) < 0) return 2;
  for (;;) pause();
}
