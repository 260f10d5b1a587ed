"""The parsed options of the job commands, by dest (options.parse's answer): one typed shape for all of them.

A value option is the text given, a repeatable one (`multi`) every text in order, a flag True, a count how many
times it was given. Imported only for type checking: `typing` costs `flux run` start-up.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class OptionValues(TypedDict, total=False):
    """Every dest the job commands declare (submit/run/batch/alloc, job, jobs, cancel, queue); unsupported
    options are refused by the parser and never appear."""

    all: bool
    all_users: bool
    bcc: str
    cc: str
    cluster: str
    cores_per_task: str
    count: str
    cwd: str
    dry_run: bool
    env: list[str]
    env_remove: list[str]
    error: str
    exclusive: bool
    filter: str
    flags: list[str]
    follow: bool
    force: bool
    format: str
    gpus_per_task: str
    job_name: str
    json: bool
    label: bool
    label_io: bool
    message: str
    no_header: bool
    nodes: str
    ntasks: str
    output: str
    progress: bool
    queue: str
    quiet: bool
    requeue: bool
    setattr: list[str]
    setopt: list[str]
    signal: str
    tasks_per_node: str
    time_limit: str
    timeout: str
    to: str
    urgency: str
    user: str
    v: bool
    verbose: int
    """-v given n times (`flux jobs -v` is a flag: True counts as 1)."""
    wait: bool
    watch: bool
    wrap: bool


IntOption = Literal["count", "nodes", "tasks_per_node", "ntasks", "cores_per_task", "gpus_per_task", "urgency"]
"""The options read as integers (options.as_int)."""
