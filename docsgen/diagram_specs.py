"""What the diagrams say: a MiniCluster (examples/hello.yaml, 4 pods) and the objects it makes on each backend, and
the code's layers. Names are the ones the code gives (miniclusters/render/layout.py, the backends' plan modules);
edit here when they change, and the site's pictures follow at the next build."""

from __future__ import annotations

from docsgen.diagrams import Arrow, Box, Diagram

NAME = "hello"


def _local_pod(index: int, lead: bool) -> Box:
    role = "lead broker, rank 0\n(+ REST server)" if lead else f"follower broker,\nrank {index}"
    return Box(
        f"pod {NAME}-{index}",
        "a process group, supervised\n(restarted as the Job would)",
        rows=[
            [Box(f"network namespace mc-{NAME}-{index}", "veth into the bridge;\n/etc/hosts names every pod")],
            [Box(f"hostname {NAME}-{index}", "its own UTS namespace")],
            [Box(f"cgroup miniclusters/{NAME}/{index}", "CPU weight from the pod's request")],
            [Box("rendered entrypoint", role, style="lead" if lead else "part", key=f"local-{index}")],
        ],
        style="pod",
        key=f"local-pod-{index}",
    )


def local() -> Diagram:
    pods = [_local_pod(0, True), _local_pod(1, False), Box(f"pods {NAME}-2, {NAME}-3", "the same", style="faint")]
    machine = Box(
        "this machine, as root: minicluster up examples/hello.yaml",
        "the local backend (without root: plain processes\non 127.213.x addresses, nice levels)",
        rows=[
            [
                Box(
                    "state directory",
                    f"~/.local/state/miniclusters/{NAME}: the record,\nrendered config, certificate, entrypoint, R",
                    style="object",
                ),
                Box("bridge mcbr<slot>", "one per cluster: the pods' network", style="object"),
                Box(f"cgroup miniclusters/{NAME}", "the cluster's CPU cgroups", style="object"),
            ],
            pods,
        ],
        style="machine",
        wide_rows=(1,),
    )
    arrows = (Arrow("local-1", "local-0", "ZeroMQ, CURVE"),)
    return Diagram("minicluster-local", "A MiniCluster on the local backend", machine, arrows)


def _podman_pod(index: int, lead: bool) -> Box:
    role = "lead broker, rank 0 (+ REST)" if lead else f"follower broker, rank {index}"
    return Box(
        f"pod {NAME}-{index}",
        "podman kube play of index " + str(index),
        rows=[
            [
                Box(
                    "broker volume (read-only)",
                    "the broker bundle, copied once per\nbroker image (the flux flavour: its\nview's init container)",
                )
            ],
            [
                Box(
                    "application container",
                    "the spec's image runs the\nrendered entrypoint:\n" + role,
                    style="lead" if lead else "part",
                    key=f"podman-{index}",
                )
            ],
            [Box("pod-private volume mc-run", "the ConfigMap and Secret: host\ndirectories, bind-mounted read-only")],
        ],
        style="pod",
        key=f"podman-pod-{index}",
    )


def podman() -> Diagram:
    pods = [_podman_pod(0, True), _podman_pod(1, False), Box(f"pods {NAME}-2, {NAME}-3", "the same", style="faint")]
    machine = Box(
        "this machine: minicluster up examples/hello.yaml --backend podman",
        "what minicluster render emits, played as real OCI pods from our images",
        rows=[
            [
                Box(
                    "rendered objects",
                    "Secret, ConfigMap, headless Service,\nIndexed Job (never templated twice)",
                    style="object",
                ),
                Box(
                    f"network minicluster-{NAME}",
                    "a fixed address per pod; /etc/hosts\nnames the Service's DNS names",
                    style="object",
                ),
                Box("state directory", "the backend's record of the cluster", style="object"),
            ],
            pods,
        ],
        style="machine",
        wide_rows=(1,),
    )
    arrows = (Arrow("podman-1", "podman-0", "ZeroMQ, CURVE"),)
    return Diagram("minicluster-podman", "A MiniCluster with podman", machine, arrows)


def _kube_pod(index: int, lead: bool) -> Box:
    role = "lead broker, rank 0 (+ REST)" if lead else f"follower broker, rank {index}"
    return Box(
        f"pod {NAME}-{index}-…",
        f"hostname {NAME}-{index}, subdomain {NAME}",
        rows=[
            [Box("init container", "copies the broker (builtin)\nor the flux view (flux)")],
            [
                Box(
                    "application container",
                    "rendered entrypoint:\n" + role,
                    style="lead" if lead else "part",
                    key=f"kube-{index}",
                )
            ],
        ],
        style="pod",
        key=f"kube-pod-{index}",
    )


def kubernetes() -> Diagram:
    pods = [_kube_pod(0, True), _kube_pod(1, False), Box(f"pods {NAME}-2, {NAME}-3", "the same", style="faint")]
    namespace = Box(
        "namespace hpc",
        "",
        rows=[
            [
                Box(
                    f"MiniCluster {NAME}",
                    "miniclusters.dev/v1alpha1: owns\nthe rest (down deletes them all)",
                    style="control",
                    key="mc",
                ),
                Box(f"ConfigMap {NAME}-flux-config", "broker TOML, entrypoint, R", style="object"),
                Box(f"Secret {NAME}-curve-cert", "the CURVE certificate", style="object"),
            ],
            [
                Box(
                    f"Indexed Job {NAME}",
                    "completions = size, parallelism = size;\npod template with the init container",
                    style="object",
                    key="job",
                ),
                Box(f"headless Service {NAME}", "DNS names hello-i.hello.hpc.svc", style="object"),
            ],
            pods,
        ],
        style="cluster",
        wide_rows=(2,),
    )
    operator = Box(
        "namespace miniclusters-system",
        "",
        rows=[
            [
                Box(
                    "operator Deployment",
                    "reconciles MiniCluster objects: observe -> plan -> act",
                    style="control",
                    key="operator",
                )
            ]
        ],
        style="cluster",
    )
    cluster = Box(
        "a Kubernetes cluster: minicluster up examples/hello.yaml --backend kubernetes --namespace hpc",
        "client-side up applies the MiniCluster and the rest itself; with the operator, the MiniCluster alone",
        rows=[[operator], [namespace]],
        style="machine",
    )
    arrows = (
        Arrow("operator", "mc", "watches, then applies the rest"),
        Arrow("job", "kube-pod-0", "one pod per index"),
        Arrow("kube-1", "kube-0", "ZeroMQ, CURVE"),
    )
    return Diagram("minicluster-kubernetes", "A MiniCluster on Kubernetes", cluster, arrows)


def layers() -> Diagram:
    def layer(title: str, detail: str, key: str, style: str = "part") -> Box:
        return Box(title, detail, style=style, key=key)

    root = Box(
        "our packages, bottom up: each may import those below it as the contracts allow",
        "",
        rows=[
            [layer("docsgen", "the site's generated pages and diagrams", "docsgen", "faint")],
            [
                layer(
                    "miniclusters",
                    "cli | testing > multiplex > autoscaling >\noperator > backends > render > api",
                    "mc",
                    "pod",
                ),
                layer("bursting", "the burst service, its policy, plugins", "bursting", "pod"),
            ],
            [
                layer(
                    "broker",
                    "the built-in broker: its parts, jobs, the job\nmanager, REST, the flux command",
                    "broker",
                    "lead",
                )
            ],
            [layer("elasticity", "control > policy > model; sim, profiling, pmpi", "elasticity", "object")],
            [layer("common", "atomic writes, idsets, tee, clocks: imports none of ours", "common", "machine")],
        ],
        style="machine",
    )
    return Diagram("layers", "The layers", root)  # stacked bottom up: no arrows needed


def all_diagrams() -> list[Diagram]:
    return [local(), podman(), kubernetes(), layers()]
