"""The pod entrypoint: one script for every pod, lead or follower decided by the Job completion index.

It mirrors the Flux Operator's start-up (init/pre/brokerPre/workerPre/post commands; interactive, launcher,
batch and command modes) with the same `flux start` spellings, so both flavours run it unchanged.
"""

from __future__ import annotations

import shlex

from miniclusters.api.hosts import registry_for
from miniclusters.api.spec import Container, MiniCluster
from miniclusters.render.layout import (
    BROKER_INSTALL_DIR,
    BURST_SPEC,
    CONFIG_DIR,
    CURVE_DIR,
    CURVE_FILE,
    LOCAL_SOCKETS,
    R_FILE,
    RUN_DIR,
    SCRIPTS_DIR,
)
from miniclusters.render.lead_restart import RC1_TASK, TASK_FILE

# Directories come from the environment (defaults: the pod layout), so the local backend can run the very
# same script for several "pods" on one filesystem.
CONFIG = "${MINICLUSTER_CONFIG_DIR}"
RUN = "${MINICLUSTER_RUN_DIR}"
BROKER = "${MINICLUSTER_BROKER_DIR}"
VIEW = "${MINICLUSTER_FLUX_VIEW}"
DIRECTORY_DEFAULTS = (
    f'export MINICLUSTER_CONFIG_DIR="${{MINICLUSTER_CONFIG_DIR:-{CONFIG_DIR}}}"',
    f'export MINICLUSTER_RUN_DIR="${{MINICLUSTER_RUN_DIR:-{RUN_DIR}}}"',
    f'export MINICLUSTER_BROKER_DIR="${{MINICLUSTER_BROKER_DIR:-{BROKER_INSTALL_DIR}}}"',
    # The broker config's [resource] path: one file for the whole instance.
    f'export MINICLUSTER_R_FILE="${{MINICLUSTER_R_FILE:-{R_FILE}}}"',
)

# A lead with no command (interactive, elastic) runs no initial program at all (broker.rc2_none): the instance
# stays up until `flux shutdown`, and then exits 0. An idle program (`sleep infinity`) would be hung up by the
# shutdown and flux-core reports an aborted initial program as a failure (129, or 1 if it exits 0), which fails
# the lead pod and, with restartPolicy OnFailure, restarts it.
NO_INITIAL_PROGRAM = "-Sbroker.rc2_none=1"


def broker_options(mc: MiniCluster) -> list[str]:
    """`flux start -o` broker options derived from the spec."""
    spec = mc.spec
    # statedir sits on the pod's run volume (an emptyDir), which outlives container restarts: the lead's
    # job journal is there, so a restarted lead broker finds every accepted job again.
    options = [f"--config-path={CONFIG}", f"-Srundir={RUN}/rundir", f"-Sstatedir={RUN}/state"]
    options.append(f"-Slog-stderr-level={7 if spec.logging.debug else spec.flux.log_level}")
    options.append(f"-Stbon.connect_timeout={spec.flux.connect_timeout}")
    # Online once minSize (else size) brokers joined: hosts up to maxSize are registered but may never start.
    options.append(f"-Sbroker.quorum={spec.quorum}")
    if spec.flux.topology and spec.flux.broker_config:
        # A rendered config states [tbon] topo itself; a hand-written one may not.
        options.append(f"-Stbon.topo={spec.flux.topology}")
    if spec.logging.zeromq:
        options.append("-Stbon.zmqdebug=1")
    if spec.placement.cpus == "exclusive" and spec.flux.flavour == "builtin":
        # the pod owns its cores: each rank gets one of them (flux-core: -o cpu-affinity=per-task, see submit_words)
        options.append(f"-S{EXCLUSIVE_AFFINITY}")
    slots = multiplexing_slots(mc)
    if slots:
        # A multiplexed pod is given little CPU on purpose; the broker's default heartbeat.timeout (30 s of
        # silence, a closed connection at once) rides out the scheduling delays that brings.
        options.append(f"-Sresource.cores=0-{slots - 1}")
    return options


EXCLUSIVE_AFFINITY = "job-exec.cpu-affinity=per-task"


def multiplexing_slots(mc: MiniCluster) -> int:
    """Task slots each built-in broker advertises when multiplexing (0: its real cores).

    Several simulations share the pods, each needing its ranks' slots on every pod at once, so each broker
    offers room for `max` simulations' ranks: the CPU they really get is then decided by the pod's request
    and the per-job weights, not by exclusive cores. Real flux-core reads its resources from R instead.
    """
    spec = mc.spec
    mux = spec.multiplexing
    if spec.campaign is not None and spec.flux.flavour == "builtin":
        # every member of an ensemble runs at once in its sub-instance, on the ensemble's nodes
        campaign = spec.campaign
        return max(-(-len(e.values) * campaign.ranks // e.nodes) for e in campaign.ensembles)
    if not mux.enabled or spec.flux.flavour != "builtin":
        return 0
    ranks = mux.ranks or spec.tasks
    return -(-ranks // spec.size) * mux.max


def submit_words(mc: MiniCluster) -> list[str]:
    """`flux submit` (or the user's replacement) with the node/task shape the operator uses."""
    spec = mc.spec
    words = shlex.split(spec.flux.submit_command) if spec.flux.submit_command else ["flux", "submit"]
    if spec.tasks >= spec.size:
        words += ["-N", str(spec.size), "-n", str(spec.tasks)]
    else:
        words += ["-n", str(spec.tasks)]
    words += shlex.split(spec.flux.option_flags)
    if (
        spec.placement.cpus == "exclusive"
        and spec.flux.flavour == "flux"
        and "cpu-affinity" not in spec.flux.option_flags
    ):
        words += ["-o", "cpu-affinity=per-task"]  # the built-in broker has it as its default (broker_options)
    profiling = spec.profiling
    if profiling.enabled and spec.flux.flavour == "flux":
        words += _pmpi_environment_flags(mc)
    elif profiling.enabled:
        words += ["-o", f"pmpi={profiling.iterations}" if profiling.iterations else "pmpi"]
        if profiling.directory:
            words += ["-o", f"pmpi-dir={profiling.directory}"]
        if profiling.boundary:
            words += ["-o", f"pmpi-boundary={profiling.boundary}"]
    return words


# flux-core's job shell has no `pmpi` option (ours is a built-in job-exec feature): on the flux flavour the profiler
# is preloaded through the job's environment instead, LD_PRELOAD in the jobspec, which reaches every task and
# nothing else (flux-core starts MPI ranks itself, no mpirun). `flux submit --env` expands $NAME from the
# submitting environment, where the lead's entrypoint has put the library it built.
PMPI_LIBRARY = "MC_PMPI_LIBRARY"
FLUX_PMPI_DIRECTORY = "$PWD/pmpi"


def pmpi_directory(mc: MiniCluster) -> str:
    """Where the flux flavour's traces go: pmpi.<FLUX_JOB_ID>.<rank>.bin files, one directory for every job."""
    return mc.spec.profiling.directory or FLUX_PMPI_DIRECTORY


def _pmpi_environment_flags(mc: MiniCluster) -> list[str]:
    profiling = mc.spec.profiling
    flags = [f"--env=LD_PRELOAD=${PMPI_LIBRARY}", f"--env=MC_PMPI_DIR={pmpi_directory(mc)}"]
    if profiling.iterations:
        flags.append(f"--env=MC_PMPI_ITERATIONS={profiling.iterations}")
    if profiling.boundary:
        flags.append(f"--env=MC_PMPI_BOUNDARY={profiling.boundary}")
    return flags


def _pmpi_setup(mc: MiniCluster) -> list[str]:
    """The lead builds (or finds cached) the profiler for the application's MPI and makes the trace directory."""
    if not (mc.spec.profiling.enabled and mc.spec.flux.flavour == "flux"):
        return []
    directory = pmpi_directory(mc).replace("$PWD", "${PWD}")
    return [
        f'  export {PMPI_LIBRARY}="$("${{MINICLUSTER_PYTHON:-python3}}" -m elasticity.pmpi.build)" '
        '|| log "PMPI profiler not built (needs mpicc): the job runs unprofiled"',
        f'  mkdir -p "{directory}"',
    ]


def _flavour_setup(mc: MiniCluster) -> list[str]:
    if mc.spec.flux.flavour == "builtin":
        return [f'export PATH="{BROKER}/bin:$PATH"']
    container = mc.spec.flux.container
    # The flux view's mount (the local backend points it at an installed flux-core prefix).
    lines = [
        f'export MINICLUSTER_FLUX_VIEW="${{MINICLUSTER_FLUX_VIEW:-{container.mount_path}/view}}"',
        f'export PATH="{VIEW}/bin:$PATH"',
        f'export LD_LIBRARY_PATH="{VIEW}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"',
    ]
    # flux-core's compiled-in paths point into /opt/software, as the Flux Operator's view images' do: in a
    # container (not a local pod), link each tree the init container copied to MOUNT/software there, unless the
    # application image has it already (the view image itself does).
    software = shlex.quote(f"{container.mount_path}/software")
    lines += [
        f'if [ -d {software} ] && [ -z "${{MINICLUSTERS_LOCAL_POD:-}}" ]; then',
        f'  mkdir -p /opt/software && for d in {software}/*; do [ -e "/opt/software/${{d##*/}}" ] '
        '|| ln -s "$d" /opt/software/; done',
        "fi",
    ]
    if container.python_path:
        lines.append(f"export PYTHONPATH={shlex.quote(container.python_path)}")
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(mc.spec.flux.environment.items())]
    # Flux needs R: the pods and the bursted clusters' hosts with this pod's cores, as the operator generates it
    # (bursts our burst service adds later bring their own). Written
    # aside and renamed, so a broker reading the file never sees it half written (pods may share it locally).
    hosts = shlex.quote(registry_for(mc).resource_hostlist())
    lines.append(
        f'flux R encode --hosts={hosts} --local > "$MINICLUSTER_R_FILE.$index" '
        '&& mv -f "$MINICLUSTER_R_FILE.$index" "$MINICLUSTER_R_FILE"'
    )
    return lines


def _lead_restart_note(mc: MiniCluster) -> list[str]:
    """flux flavour: the rc1 task that gives jobs a restarted lead cannot reattach a clear note (lead_restart.py).
    Not indented: a heredoc terminator must start its line."""
    if mc.spec.flux.flavour != "flux":
        return []
    directory = f"{RUN}/modprobe"
    return [
        f'mkdir -p "{directory}/rc1.d"',
        *_heredoc(f"{directory}/rc1.d/{TASK_FILE}", RC1_TASK),
        f'export FLUX_MODPROBE_PATH_APPEND="{directory}${{FLUX_MODPROBE_PATH_APPEND:+:$FLUX_MODPROBE_PATH_APPEND}}"',
    ]


def _burst_service(mc: MiniCluster) -> list[str]:
    """spec.flux.bursting.plugins: the lead pod runs the burst service beside its broker (bursting/service.py).
    The local backend runs it beside the lead on the machine instead (its pods carry MINICLUSTERS_LOCAL_POD)."""
    plugins = mc.spec.flux.bursting.plugins
    if not plugins or mc.spec.flux.flavour != "builtin":
        return []
    words = [
        f"--cluster {shlex.quote(mc.name)}",
        f'--uri "local://{RUN}/rundir/local"',
        f'--state "{RUN}/state/bursts.json"',
        f"--spec {SCRIPTS_DIR}/{BURST_SPEC}",
        f"--certificate {CURVE_DIR}/{CURVE_FILE}",
        f"--plugins {shlex.quote(','.join(p.name for p in plugins))}",
    ]
    python = f'"${{MINICLUSTER_PYTHON:-{BROKER}/bin/python3}}"'
    return [
        '  if [ -z "${MINICLUSTERS_LOCAL_POD:-}" ]; then',
        f'    {python} -m bursting.service {" ".join(words)} > "{RUN}/burst.log" 2>&1 &',
        "  fi",
    ]


def _heredoc(path: str, body: str) -> list[str]:
    marker = "MINICLUSTERS_EOF"
    while marker in body:
        marker += "_"
    return [f"cat > \"{path}\" <<'{marker}'", body.rstrip("\n"), marker]


def idles(mc: MiniCluster, runner: Container) -> bool:
    """The lead has nothing to run: it serves submissions until shut down."""
    return mc.spec.interactive or (not runner.command and not runner.commands.script)


def _lead_command(mc: MiniCluster, runner: Container, start: str) -> list[str]:
    spec = mc.spec
    prefix = f"{runner.commands.prefix} " if runner.commands.prefix else ""
    submit = prefix + shlex.join(submit_words(mc))
    if idles(mc, runner):
        return [start, "rc=$?"]
    if runner.launcher:
        return [f"{start} {runner.command}", "rc=$?"]
    if runner.commands.script:
        script = f"{RUN}/script.sh"
        lines = _heredoc(script, runner.commands.script)
        return [*lines, f'chmod +x "{script}"', f'{start} {submit} --watch "{script}"', "rc=$?"]
    if runner.batch:
        script = f"{RUN}/batch.sh"
        lines = _heredoc(script, "#!/bin/bash\n" + runner.command)
        lines.append(f'chmod +x "{script}"')
        if runner.batch_raw:
            return [*lines, f'{start} "{script}"', "rc=$?"]
        batch = f'{prefix}flux batch -N {spec.size} "{script}"'
        return [*lines, f"{start} bash -c 'flux job attach $({batch})'", "rc=$?"]
    return [f"{start} {submit} --watch {runner.command}", "rc=$?"]


def _restful_beside_flux_core(port: int) -> list[str]:
    """flux-core does not start our REST server: the lead pod runs it beside the broker, once the broker's local
    socket exists (`local-0` under flux-core 0.88, `local` under other layouts), until the broker exits."""
    sockets = " ".join(f'"{RUN}/rundir/{name}"' for name in LOCAL_SOCKETS)
    # the user database in the statedir, as the built-in lead keeps it (-Sstatedir/restful), where
    # `python3 -m broker.rest.users_admin` in the pod finds it
    server = (
        f'"${{MINICLUSTER_PYTHON:-python3}}" -m broker.rest.server --flavour flux --port {port} '
        f'--state-dir "{RUN}/state/restful"'
    )
    return [
        "  restful() {",
        "    for _ in $(seq 600); do",
        f"      for s in {sockets}; do",
        f'        [ -S "$s" ] && FLUX_URI="local://$s" exec {server}',
        "      done",
        "      sleep 0.1",
        "    done",
        f'    log "REST API not started: no broker socket in {RUN}/rundir after 60s"',
        "  }",
        "  restful &",
        "  restful_pid=$!",
    ]


def render_entrypoint(mc: MiniCluster) -> str:
    """The bash script the broker container runs (as `bash entrypoint.sh`)."""
    spec = mc.spec
    runner = spec.containers[spec.flux_runner_index]
    commands = runner.commands
    prefix = f"{commands.prefix} " if commands.prefix else ""
    timed = "time " if spec.logging.timed else ""
    wrap = f" --wrap={shlex.quote(spec.flux.wrap)}" if spec.flux.wrap else ""
    options = broker_options(mc)
    lead_options = list(options)
    if idles(mc, runner):
        lead_options.append(NO_INITIAL_PROGRAM)
    if spec.restful.enabled and spec.flux.flavour == "builtin":
        lead_options.append(f"-Srestful.port={spec.restful.port}")
    if spec.archive.path:
        # The Flux Operator's spellings: real Flux dumps/restores its content store there; the builtin broker
        # restores the queue archive `minicluster save` wrote (broker/jobs/archive.py), checked against this
        # cluster's name, and waits or rejects restored jobs that cannot fit (spec.archive.unfit).
        archive = shlex.quote(spec.archive.path)
        lead_options.append(f"-Scontent.dump={spec.archive.path}")
        if spec.flux.flavour == "builtin":
            lead_options += [
                f"-Sjob-manager.restore-unfit={spec.archive.unfit}",
                f"-Sjob-manager.restore-cluster={mc.name}",
            ]
        restore = f'$( [ -e {archive} ] && echo ",-Scontent.restore={spec.archive.path}" )'
    else:
        restore = ""
    start_lead = f'{timed}{prefix}flux start{wrap} -o "{",".join(lead_options)}{restore}"'
    restful_server: list[str] = []
    restful_stop: list[str] = []
    if spec.restful.enabled and spec.flux.flavour == "flux":
        restful_server = _restful_beside_flux_core(spec.restful.port)
        restful_stop = ['  kill "$restful_pid" 2>/dev/null']
    start_follower = f'{timed}{prefix}flux start{wrap} -o "{",".join(options)}"'

    lines = [
        "#!/bin/bash",
        f"# Entrypoint for MiniCluster {mc.name} (flavour {spec.flux.flavour}), rendered by miniclusters.",
        "set -o pipefail",
    ]
    if spec.logging.strict:
        lines.append("set -eu")
    if spec.logging.debug:
        lines.append("set -x")
    lines += [
        'index="${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is not set: this script runs in an Indexed Job pod}"',
        f'log() {{ {":" if spec.logging.quiet else "echo"} "[{mc.name}-$index] $*" >&2; }}',
        *DIRECTORY_DEFAULTS,
        f'mkdir -p "{RUN}/rundir" "{RUN}/state"',
    ]
    if spec.restful.enabled:
        lines += [
            f"export FLUX_SERVER_MODE={spec.restful.mode}",
            f"export FLUX_REQUIRE_AUTH={'true' if spec.restful.require_auth else 'false'}",
        ]
    if commands.init:
        lines.append(commands.init)
    lines += _flavour_setup(mc)
    if commands.broker_pre or commands.worker_pre:
        lines += [
            'if [ "$index" = 0 ]; then',
            f"  {commands.broker_pre or ':'}",
            "else",
            f"  {commands.worker_pre or ':'}",
            "fi",
        ]
    if commands.pre:
        lines.append(commands.pre)
    if runner.working_dir:
        lines.append(f"cd {shlex.quote(runner.working_dir)}")
    # A burst (spec.flux.bursting.leadBroker) has no lead of its own: every pod follows the lead elsewhere.
    lines.append("if false; then" if spec.flux.bursting.lead_broker else 'if [ "$index" = 0 ]; then')
    lines.append(f'  log "lead broker starting ({spec.size} of {spec.effective_max_size} pods)"')
    lines += restful_server
    lines += _lead_restart_note(mc)
    lines += _pmpi_setup(mc)
    lines += _burst_service(mc)
    # Not indented: a heredoc terminator must start its line.
    lines += _lead_command(mc, runner, start_lead)
    lines += restful_stop
    lines.append("else")
    lines.append('  log "follower broker starting"')
    lines += [f"  {start_follower}", "  rc=$?"]
    if spec.flux.complete_workers:
        lines.append('  [ "$rc" = 0 ] || log "follower exited with $rc; completing anyway (completeWorkers)"')
        lines.append("  rc=0")
    lines.append("fi")
    if commands.post:
        lines.append(commands.post)
    lines += ['log "exiting with $rc"', 'exit "$rc"', ""]
    return "\n".join(_broker_in_background(lines))


STOP_ON_TERM = [
    "# PID 1 here: the kubelet's (or podman's) SIGTERM reaches only this shell, which ignores it unless trapped, and",
    "# bash runs a trap only once a foreground command ends: so the broker runs in the background and the trap",
    "# passes SIGTERM on to every process of the pod's group (once), instead of waiting out the grace period.",
    'stop_pod() { if [ -z "${stopping:-}" ]; then stopping=1; log "SIGTERM: stopping"; kill -TERM 0 2>/dev/null; fi; }',
    "trap stop_pod TERM",
    'wait_broker() { local pid=$! code=0; while :; do code=0; wait "$pid" || code=$?; '
    'kill -0 "$pid" 2>/dev/null || return "$code"; done; }',
]


def _broker_in_background(lines: list[str]) -> list[str]:
    """Each broker command (the line before an `rc=$?`) in a background group the shell waits for."""
    out: list[str] = []
    for line in lines:
        if line.strip() == "rc=$?" and out:
            indent = line[: len(line) - len(line.lstrip())]
            command = out.pop()
            out += [f"{indent}{{", command, f"{indent}}} &", f"{indent}rc=0; wait_broker || rc=$?"]
        else:
            out.append(line)
    at = next(i for i, line in enumerate(out) if line.startswith("index="))
    return out[:at] + STOP_ON_TERM + out[at:]


def render_sidecar_command(container: Container, is_service: bool) -> list[str]:
    """The command of a container that does not run the broker (the operator's start.sh wrapper)."""
    steps = [
        s
        for s in (
            container.commands.init,
            container.commands.service_pre if is_service else "",
            container.commands.pre,
            container.command,
        )
        if s
    ]
    if not steps:
        return []
    if container.no_wrap_entrypoint:
        return ["/bin/bash", "-c", container.command] if container.command else []
    return ["/bin/bash", "-c", "\n".join(steps)]
