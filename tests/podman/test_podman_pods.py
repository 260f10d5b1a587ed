"""The podman backend's pure part: rendered objects -> the pods `podman kube play` runs (no podman needed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.podman.core import PodmanContext
from miniclusters.backends.podman.observe import (
    ContainerState,
    InspectedContainer,
    PodmanPod,
    millicores_to_shares,
    phase_of,
    read_cpu_shares,
    shares_to_millicores,
)
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.podman.pods import (
    Rendered,
    host_aliases,
    orphan_volumes,
    owned_volumes,
    play_documents,
    pod_address,
    pod_for_index,
    registered_hosts,
)
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.backends.reporting import Polling
from miniclusters.kube_shapes import ConfigMap, PodContainer
from miniclusters.render import render_minicluster, render_objects
from miniclusters.render.layout import INDEX_LABEL


def _rendered(size: int = 2, max_size: int = 4) -> Rendered:
    mc = load_minicluster(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": "pm"},
            "spec": {
                "size": size,
                "maxSize": max_size,
                "containers": [{"image": "app:1", "command": "hostname", "resources": {"requests": {"cpu": "500m"}}}],
            },
        }
    )
    return Rendered.from_rendered(render_objects(mc))


def _env(container: PodContainer) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def test_each_index_is_the_job_template_with_hostname_index_and_labels() -> None:
    rendered = _rendered()
    pod = pod_for_index(rendered, 1, "10.89.3.0/24", 4)
    spec = pod["spec"]
    assert pod["metadata"]["name"] == "pm-1" and spec["hostname"] == "pm-1"
    assert pod["metadata"]["labels"][INDEX_LABEL] == "1"
    assert _env(spec["containers"][0])["JOB_COMPLETION_INDEX"] == "1"
    assert _env(spec["initContainers"][0])["JOB_COMPLETION_INDEX"] == "1"  # install.sh --with-extras-on-lead reads it
    assert "subdomain" not in spec and "affinity" not in spec
    assert all("resizePolicy" not in c for c in spec["containers"])
    template = rendered.job["spec"]["template"]["spec"]
    assert spec["containers"][0]["command"] == template["containers"][0]["command"]
    assert spec["initContainers"][0]["image"] == template["initContainers"][0]["image"]
    assert [m["mountPath"] for m in spec["containers"][0]["volumeMounts"]] == [
        m["mountPath"] for m in template["containers"][0]["volumeMounts"]
    ]
    assert "JOB_COMPLETION_INDEX" not in _env(template["containers"][0])  # the template is not changed


def test_flux_flavour_pods_make_open_mpi_yield_unless_the_spec_says() -> None:
    def runner_env(flavour: str, environment: dict[str, str]) -> dict[str, str]:
        mc = load_minicluster(
            {
                "apiVersion": "miniclusters.dev/v1alpha1",
                "kind": "MiniCluster",
                "metadata": {"name": "py"},
                "spec": {"flux": {"flavour": flavour}, "containers": [{"image": "a", "environment": environment}]},
            }
        )
        pod = pod_for_index(Rendered.from_rendered(render_objects(mc)), 0, "10.89.3.0/24", 1)
        return _env(pod["spec"]["containers"][0])

    assert runner_env("flux", {})["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert runner_env("flux", {"OMPI_MCA_mpi_yield_when_idle": "0"})["OMPI_MCA_mpi_yield_when_idle"] == "0"
    assert "OMPI_MCA_mpi_yield_when_idle" not in runner_env("builtin", {})  # its broker decides per job


def test_every_registered_host_is_named_at_its_fixed_address() -> None:
    rendered = _rendered(size=2, max_size=4)
    aliases = host_aliases(rendered, "10.89.3.0/24", registered_hosts(rendered))
    assert [a["ip"] for a in aliases] == ["10.89.3.2", "10.89.3.3", "10.89.3.4", "10.89.3.5"]
    assert aliases[3]["hostnames"] == ["pm-3", "pm-3.pm", "pm-3.pm.default.svc.cluster.local"]
    toml = rendered.config_map["data"]["broker.toml"]
    assert 'default_connect = "tcp://%h.pm.default.svc.cluster.local:%p"' in toml  # the name the alias answers


def test_pod_address_refuses_a_subnet_too_small() -> None:
    assert pod_address("10.89.0.0/29", 3) == "10.89.0.5"
    with pytest.raises(ValueError, match="no address for pod index 5"):
        pod_address("10.89.0.0/29", 5)


def test_volumes_are_private_to_the_pod_and_mounts_follow() -> None:
    rendered = _rendered()
    spec = pod_for_index(rendered, 0, "10.89.3.0/24", 4)["spec"]
    names = {v["name"] for v in spec["volumes"]}
    assert {"pm-0-mc-run", "pm-0-mc-broker"} <= names and "mc-run" not in names
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert {m["name"] for m in container["volumeMounts"]} <= names
    claims = [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert claims == ["pm-0-pm-curve-cert"]
    configs = {v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v}
    assert configs == {"pm-0-pm-flux-config"}
    documents = play_documents(rendered, 0, "10.89.3.0/24", 4)
    assert [d["kind"] for d in documents] == ["ConfigMap", "Pod"]
    assert documents[0]["metadata"]["name"] == "pm-0-pm-flux-config"
    assert cast(ConfigMap, documents[0])["data"] == rendered.config_map["data"]
    assert set(owned_volumes(rendered, 0)) == {
        "pm-0-mc-run",
        "pm-0-mc-broker",
        "pm-0-pm-curve-cert",
        "pm-0-pm-flux-config",
    }


def test_rendered_needs_every_object() -> None:
    objects = render_objects(
        load_minicluster({"metadata": {"name": "x"}, "spec": {"containers": [{"image": "a"}]}})
    ).in_apply_order()
    with pytest.raises(ValueError, match="Job"):
        Rendered.from_objects([o for o in objects if o["kind"] != "Job"])


def test_cpu_shares_follow_the_kubelet_mapping() -> None:
    assert millicores_to_shares(500) == 512 and millicores_to_shares(1000) == 1024 and millicores_to_shares(0) == 2
    assert shares_to_millicores(512) == 500 and shares_to_millicores(256) == 250 and shares_to_millicores(2) == 0


def test_cpu_shares_are_read_from_the_cgroup(tmp_path: Path) -> None:
    (tmp_path / "cpu" / "libpod_parent" / "c1").mkdir(parents=True)
    (tmp_path / "cpu" / "libpod_parent" / "c1" / "cpu.shares").write_text("256\n")
    assert read_cpu_shares("/libpod_parent/c1", tmp_path) == 256
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cpu.weight").write_text("100\n")
    assert read_cpu_shares("/v2", tmp_path) == 2 + 99 * 262142 // 9999
    assert read_cpu_shares("/missing", tmp_path) is None


@pytest.mark.parametrize(
    ("state", "phase", "code"),
    [
        ({"Status": "running"}, "Running", None),
        ({"Status": "exited", "ExitCode": 0}, "Succeeded", 0),
        ({"Status": "exited", "ExitCode": 3}, "Failed", 3),
        ({"Status": "created"}, "Pending", None),
    ],
)
def test_container_states_become_pod_phases(state: ContainerState, phase: str, code: int | None) -> None:
    assert phase_of(PodmanPod(0, "pm-0", "Running", {"State": state}))[:2] == (phase, code)


def test_a_failed_container_podman_will_restart_is_not_a_failed_pod() -> None:
    container: InspectedContainer = {
        "State": {"Status": "exited", "ExitCode": 137},
        "HostConfig": {"RestartPolicy": {"Name": "on-failure"}},
    }
    assert phase_of(PodmanPod(1, "pm-1", "Running", container)) == ("Running", None, "CrashLoopBackOff")
    container["HostConfig"] = {"RestartPolicy": {"Name": ""}}
    assert phase_of(PodmanPod(0, "pm-0", "Running", container)) == ("Failed", 137, "Error")


def test_a_pod_without_its_container_is_initialising() -> None:
    assert phase_of(PodmanPod(0, "pm-0", "Running", None)) == ("Pending", None, "PodInitializing")


def test_the_flux_flavour_defaults_to_our_view_image_on_podman() -> None:
    """The default view (the Flux Operator's image) cannot be pulled here: the podman backend plays ours."""
    from miniclusters.api.spec import DEFAULT_FLUX_VIEW_IMAGE
    from miniclusters.backends.podman.core import with_view_image

    def spec(flux: dict[str, Any]) -> Any:
        return load_minicluster({"metadata": {"name": "v"}, "spec": {"flux": flux, "containers": [{"image": "a"}]}})

    default = with_view_image(spec({"flavour": "flux"}), "reg.example", "9.9")
    assert default.spec.flux.container.image == "reg.example/miniclusters-flux-view:9.9"
    chosen = with_view_image(spec({"flavour": "flux", "container": {"image": "mine:1"}}), "reg.example", "9.9")
    assert chosen.spec.flux.container.image == "mine:1"
    builtin = with_view_image(spec({}), "reg.example", "9.9")
    assert builtin.spec.flux.container.image == DEFAULT_FLUX_VIEW_IMAGE


def test_the_flux_flavour_links_the_copied_software_where_flux_core_looks() -> None:
    """flux-core's paths point into /opt/software: in a container the entrypoint links the view's copy there."""
    mc = load_minicluster(
        {"metadata": {"name": "v"}, "spec": {"flux": {"flavour": "flux"}, "containers": [{"image": "a"}]}}
    )
    script = next(o for o in render_minicluster(mc) if o["kind"] == "ConfigMap")["data"]["entrypoint.sh"]
    assert (
        'for d in /mnt/flux/software/*; do [ -e "/opt/software/${d##*/}" ] || ln -s "$d" /opt/software/; done' in script
    )
    assert 'if [ -d /mnt/flux/software ] && [ -z "${MINICLUSTERS_LOCAL_POD:-}" ]; then' in script


def test_a_lost_record_s_volumes_are_found_by_name_and_no_other_cluster_s() -> None:
    volumes = ["hello-0-mc-run", "hello-3-hello-flux-config", "hello-1-0-mc-run", "hello-x-y", "hellos-0-a", "other"]
    assert orphan_volumes("hello", volumes, ["hello", "hello-1"]) == ["hello-0-mc-run", "hello-3-hello-flux-config"]
    # without hello-1 known, its volumes look like hello's pod 1's: podman refuses those still in use
    assert "hello-1-0-mc-run" in orphan_volumes("hello", volumes, [])


class _FlakyPodman:
    """podman whose `pod rm` fails the first `failures` times the way a busy cgroup makes it fail."""

    STDERR = (
        "Error: 2 errors occurred:\n"
        "\t* removing container abc from pod pm-0: unlinkat /sys/fs/cgroup/cpu/libpod/x: resource busy\n"
        "\t* removing pod pm-0 cgroup: device or resource busy\n"
    )

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], doing: str, **_kwargs: Any) -> Any:
        import subprocess

        from miniclusters.backends.podman.engine import PodmanError

        self.calls.append(list(argv))
        if argv[:2] == ["pod", "rm"] and self.failures > 0:
            self.failures -= 1
            raise PodmanError(doing, argv, 125, self.STDERR)
        return subprocess.CompletedProcess(argv, 0, "", "")


def _player(podman: Any, sleep: Callable[[float], None]) -> PodPlayer:
    """The part that removes pods, over a scripted podman (it reads nothing from the state directory)."""
    ctx = PodmanContext(podman, PodmanStore(), "default", Polling(time.monotonic, sleep, 1.0))
    return PodPlayer(ctx)


def test_a_pod_removal_that_fails_while_cgroups_are_busy_is_tried_again() -> None:
    from miniclusters.backends.podman.play import POD_RM_ATTEMPTS

    flaky = _FlakyPodman(failures=POD_RM_ATTEMPTS - 1)
    naps: list[float] = []
    player = _player(flaky, naps.append)
    player.remove_pods(_rendered(), [0, 1])
    removals = [call for call in flaky.calls if call[:2] == ["pod", "rm"]]
    assert len(removals) == POD_RM_ATTEMPTS and len(naps) == POD_RM_ATTEMPTS - 1


def test_a_pod_removal_that_keeps_failing_names_every_error() -> None:
    from miniclusters.backends.podman.engine import PodmanError
    from miniclusters.backends.podman.play import POD_RM_ATTEMPTS

    flaky = _FlakyPodman(failures=POD_RM_ATTEMPTS)
    player = _player(flaky, lambda _s: None)
    with pytest.raises(PodmanError) as raised:
        player.remove_pods(_rendered(), [0])
    message = str(raised.value)
    assert "2 errors occurred:" in message
    assert "removing container abc from pod pm-0" in message and "removing pod pm-0 cgroup" in message


class _ListingPodman(_FlakyPodman):
    """podman that knows some pods: `pod ps` lists them, `pod kill` fails on any other (as podman 4.3 does)."""

    def __init__(self, present: list[str]) -> None:
        super().__init__(failures=0)
        self.present = present

    def run(self, argv: list[str], doing: str, **kwargs: Any) -> Any:
        import subprocess

        if argv[:2] == ["pod", "ps"]:
            self.calls.append(list(argv))
            listed = "".join(f"{name} id-{name}\n" for name in self.present)  # --format "{{.Name}} {{.ID}}"
            return subprocess.CompletedProcess(argv, 0, listed, "")
        if argv[:2] == ["pod", "kill"] and set(argv[2:]) - set(self.present):
            self.calls.append(list(argv))
            return subprocess.CompletedProcess(argv, 125, "", "Error: no pod with name or ID found: no such pod")
        return super().run(argv, doing, **kwargs)


def test_pods_are_killed_before_removal_without_waiting_out_a_grace_each() -> None:
    """A removal stops one container at a time and waits out each one's grace (the entrypoint's bash ignores
    SIGTERM): the pods that exist are killed first, in one call naming only them, then removed."""
    listing = _ListingPodman(present=["pm-0", "pm-2", "other-0"])
    player = _player(listing, lambda _s: None)
    player.remove_pods(_rendered(), [0, 1, 2])
    verbs = [call[:2] for call in listing.calls]
    kills = [call for call in listing.calls if call[:2] == ["pod", "kill"]]
    assert kills == [["pod", "kill", "pm-0", "pm-2"]]
    assert verbs.index(["pod", "kill"]) < verbs.index(["pod", "rm"])
    removal = next(call for call in listing.calls if call[:2] == ["pod", "rm"])
    assert removal[-3:] == ["pm-0", "pm-1", "pm-2"] and "--ignore" in removal
