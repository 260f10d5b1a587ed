"""flux-core's submit flags (libjob/job.h), by value and by the names `flux submit --flags` takes.

Kept free of imports: the lean `flux submit` path reads it at start-up.
"""

DEBUG = 2
WAITABLE = 4  # the job's end is kept for `flux job wait` until one waiter takes it
NOVALIDATE = 8
BY_NAME = {"debug": DEBUG, "waitable": WAITABLE, "novalidate": NOVALIDATE}
KNOWN = DEBUG | WAITABLE | NOVALIDATE

JOBID_ANY = 0xFFFFFFFFFFFFFFFF  # FLUX_JOBID_ANY: `job-manager.wait` for whichever waitable job ends first
