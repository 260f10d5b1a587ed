"""The `flux` flavour's note for jobs a restarted lead cannot take back.

When the lead's flux-broker dies uncleanly and the pod restarts it, flux-core restores its queue from the
checkpointed KVS and asks job-exec to reattach each job that was running. After an unclean shutdown the job's
guest namespace was never grafted, so job-exec fails it with "failed to create guest ns: No such file or
directory", which says nothing about why. The lead pod therefore adds a flux-modprobe rc1 task (rank 0, after
job-manager, before job-exec) that makes the same check job-exec will make (is `job.<id>.guest` a grafted
directory?) and, for each running job that cannot be reattached, raises the first fatal exception itself with
a note that says what happened. flux-core then reports that note everywhere (`flux jobs`, `flux job attach`,
the eventlog, our REST API), and job-exec never sees the job; a job that can be reattached is left alone.

The task is plain flux-core Python, written into the pod by the entrypoint: flux-core pods need not have this
package installed. Any failure in it is logged and ignored, so it can never stop a broker from starting.
"""

from __future__ import annotations

TASK_FILE = "miniclusters-lead-restart.py"
NOTE = (
    "the lead broker (rank 0) restarted while this job was running: flux-core cannot reattach a running job "
    "after an unclean lead shutdown, so the job was ended"
)
EXCEPTION_TYPE = "exec"  # what flux-core's own reattach failure is raised as

RC1_TASK = f'''\
"""miniclusters: jobs a restarted lead cannot reattach get a clear exception before job-exec fails them."""

import sys

from flux.job import JobID
from flux.modprobe import task

RUN = 16  # FLUX_JOB_STATE_RUN
NOTE = {NOTE!r}


def reattachable(handle, jobid):
    """job-exec's own test: a running job's guest namespace survives only as a directory grafted at shutdown."""
    key = JobID(jobid).kvs + ".guest"
    try:
        answer = handle.rpc("kvs.lookup", {{"key": key, "namespace": "primary", "flags": 16}}).get()  # TREEOBJ
    except OSError:
        return False
    return (answer.get("val") or {{}}).get("type") == "dirref"


@task("miniclusters-lead-restart", ranks="0", needs=["job-manager"], after=["job-manager"], before=["job-exec"])
def lead_restart_note(context):
    try:
        handle = context.handle
        jobs = handle.rpc("job-manager.list", {{"max_entries": 0}}).get()["jobs"]
        for job in jobs:
            if job["state"] == RUN and not reattachable(handle, job["id"]):
                payload = {{"id": job["id"], "severity": 0, "type": {EXCEPTION_TYPE!r}, "note": NOTE}}
                handle.rpc("job-manager.raise", payload).get()
                print(f"miniclusters: {{JobID(job['id']).f58}}: {{NOTE}}", file=sys.stderr)
    except Exception as exc:  # never stop the broker from starting
        print(f"miniclusters: lead-restart note not raised: {{exc}}", file=sys.stderr)
'''
