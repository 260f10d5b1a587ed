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
    RUN_DIR,
    SCRIPTS_DIR,
)

# Directories come from the environment (defaults: the pod layout), so the local backend can run the very
# same script for several "pods" on one filesystem.
CONFIG = "${MINICLUSTER_CONFIG_DIR}"
RUN = "${MINICLUSTER_RUN_DIR}"
BROKER = "${MINICLUSTER_BROKER_DIR}"
DIRECTORY_DEFAULTS = (
    f'export MINICLUSTER_CONFIG_DIR="${{MINICLUSTER_CONFIG_DIR:-{CONFIG_DIR}}}"',
    f'export MINICLUSTER_RUN_DIR="${{MINICLUSTER_RUN_DIR:-{RUN_DIR}}}"',
    f'export MINICLUSTER_BROKER_DIR="${{MINICLUSTER_BROKER_DIR:-{BROKER_INSTALL_DIR}}}"',
)


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
    if spec.flux.topology:
        options.append(f"-Stbon.topo={spec.flux.topology}")
    if spec.logging.zeromq:
        options.append("-Stbon.zmqdebug=1")
    return options


def submit_words(mc: MiniCluster) -> list[str]:
    """`flux submit` (or the user's replacement) with the node/task shape the operator uses."""
    spec = mc.spec
    words = shlex.split(spec.flux.submit_command) if spec.flux.submit_command else ["flux", "submit"]
    if spec.tasks >= spec.size:
        words += ["-N", str(spec.size), "-n", str(spec.tasks)]
    else:
        words += ["-n", str(spec.tasks)]
    words += shlex.split(spec.flux.option_flags)
    profiling = spec.profiling
    if profiling.enabled:
        words += ["-o", f"pmpi={profiling.iterations}" if profiling.iterations else "pmpi"]
        if profiling.directory:
            words += ["-o", f"pmpi-dir={profiling.directory}"]
        if profiling.boundary:
            words += ["-o", f"pmpi-boundary={profiling.boundary}"]
    return words


def _flavour_setup(mc: MiniCluster) -> list[str]:
    if mc.spec.flux.flavour == "builtin":
        return [f'export PATH="{BROKER}/bin:$PATH"']
    container = mc.spec.flux.container
    view = f"{container.mount_path}/view"
    lines = [
        f'export PATH="{view}/bin:$PATH"',
        f'export LD_LIBRARY_PATH="{view}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"',
    ]
    if container.python_path:
        lines.append(f"export PYTHONPATH={shlex.quote(container.python_path)}")
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(mc.spec.flux.environment.items())]
    # Flux needs R: every host of the instance with this pod's cores, as the operator generates it.
    lines.append(f'flux R encode --hosts={shlex.quote(registry_for(mc).pod_hostlist())} --local > "{RUN}/R"')
    return lines


def _burst_service(mc: MiniCluster) -> list[str]:
    """spec.flux.bursting.clusters: the lead pod runs the burst service beside its broker (bursting/service.py).
    The local backend runs it beside the lead on the machine instead (its pods carry MINICLUSTERS_LOCAL_POD)."""
    clusters = mc.spec.flux.bursting.clusters
    if not clusters or mc.spec.flux.flavour != "builtin":
        return []
    words = [
        f"--cluster {shlex.quote(mc.name)}",
        f'--uri "local://{RUN}/rundir/local"',
        f'--state "{RUN}/state/bursts.json"',
        f"--spec {SCRIPTS_DIR}/{BURST_SPEC}",
        f"--certificate {CURVE_DIR}/{CURVE_FILE}",
        f"--plugins {shlex.quote(','.join(c.name for c in clusters))}",
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


def _lead_command(mc: MiniCluster, runner: Container, start: str) -> list[str]:
    spec = mc.spec
    prefix = f"{runner.commands.prefix} " if runner.commands.prefix else ""
    submit = prefix + shlex.join(submit_words(mc))
    if spec.interactive or (not runner.command and not runner.commands.script):
        return [f"{start} sleep infinity", "rc=$?"]
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
    if spec.restful.enabled:
        lead_options.append(f"-Srestful.port={spec.restful.port}")
    if spec.archive.path:
        archive = shlex.quote(spec.archive.path)
        lead_options.append(f"-Scontent.dump={spec.archive.path}")
        restore = f'$( [ -e {archive} ] && echo ",-Scontent.restore={spec.archive.path}" )'
    else:
        restore = ""
    start_lead = f'{timed}{prefix}flux start{wrap} -o "{",".join(lead_options)}{restore}"'
    restful_wrapper: list[str] = []
    if spec.restful.enabled and spec.flux.flavour == "flux":
        # Real flux-core does not start our REST server: the lead's initial program runs it (inside the
        # instance, so FLUX_URI is set), then becomes the original initial program.
        wrapper = f"{RUN}/with-restful.sh"
        body = (
            "#!/bin/bash\n"
            f'"${{MINICLUSTER_PYTHON:-python3}}" -m broker.rest.server --flavour flux --port {spec.restful.port} &\n'
            'exec "$@"\n'
        )
        restful_wrapper = [*_heredoc(wrapper, body), f'chmod +x "{wrapper}"']
        start_lead = f'{start_lead} bash "{wrapper}"'
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
    lines += restful_wrapper
    lines += _burst_service(mc)
    # Not indented: a heredoc terminator must start its line.
    lines += _lead_command(mc, runner, start_lead)
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
    return "\n".join(lines)


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
