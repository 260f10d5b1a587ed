"""What a MiniCluster's Job says, and how to change its size: Kubernetes knowledge shared by the CLI's backend and
the operator (one place, so the two never disagree about when a Job is done or how to scale it).
"""

from __future__ import annotations

from miniclusters.kube_shapes import Job, JobScalePatch, ObjectMeta

MAX_SIZE_ENV = "MINICLUSTER_MAX_SIZE"
"""The pod template's variable holding the number of hosts registered at creation (render/job.py sets it)."""


def job_outcome(job: Job | None) -> tuple[bool, bool | None]:
    """(finished, succeeded) from the Job's Complete / Failed conditions."""
    for condition in (job or {}).get("status", {}).get("conditions", []) or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return True, True
        if condition.get("type") == "Failed":
            return True, False
    return False, None


def summary_state(job: Job | None, ready: int, size: int) -> str:
    finished, succeeded = job_outcome(job)
    if finished:
        return "Completed" if succeeded else "Failed"
    if job is None:
        return "Pending"
    return "Ready" if ready >= size else "Starting"


def scale_patch(job: Job, size: int) -> JobScalePatch | None:
    """The next merge patch towards `size`, guarded by resourceVersion; None when the Job is there already.

    Completions may change only together with parallelism, keeping them equal (elastic Indexed Jobs); a Job
    whose parallelism was changed alone is first brought back to parallelism == completions.
    """
    spec = job.get("spec", {})
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    version: ObjectMeta = {"resourceVersion": job["metadata"]["resourceVersion"]}
    if completions == parallelism == size:
        return None
    if completions != parallelism:
        return {"metadata": version, "spec": {"parallelism": completions}}
    return {"metadata": version, "spec": {"parallelism": size, "completions": size}}


def registered_hosts(job: Job | None) -> int | None:
    """How many hosts the Job's pods were created with (its immutable pod template), None when unknown.

    This is the ceiling of scaling: the broker config the pods run with lists exactly these hosts.
    """
    template = ((job or {}).get("spec") or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        for variable in container.get("env") or []:
            value = str(variable.get("value", ""))
            if variable.get("name") == MAX_SIZE_ENV and value.isdigit():
                return int(value)
    return None
