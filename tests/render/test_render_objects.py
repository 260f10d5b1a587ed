"""Rendered objects: the Indexed Job, headless Service, broker ConfigMap and curve Secret."""

from __future__ import annotations

import base64
import copy
import tomllib
from pathlib import Path

import hostlist
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from broker.curve_cert import generate_certificate, parse_zcert, render_zcert
from miniclusters.api import SpecError, load_minicluster, load_minicluster_file
from miniclusters.api.spec import Flavour
from miniclusters.cli import main
from miniclusters.kube_shapes import KubeObject, PodContainer
from miniclusters.render import RenderOptions, render_minicluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def _by_kind(objects: list[KubeObject]) -> dict[str, KubeObject]:
    return {o["kind"]: o for o in objects}


def _runner(job: KubeObject) -> PodContainer:
    return job["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("flavour", ["builtin", "flux"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_object_passes_the_kubernetes_schema(path: Path, flavour: Flavour) -> None:
    mc = load_minicluster_file(path)
    objects = render_minicluster(mc, RenderOptions(flavour=flavour))
    services = ["Service", "Service"] if mc.spec.restful.enabled else ["Service"]
    assert [o["kind"] for o in objects] == ["Secret", "ConfigMap", *services, "Job"]
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_cli_render_of_all_examples_is_an_applyable_stream() -> None:
    result = CliRunner().invoke(main, ["render", *map(str, EXAMPLES), "--flavour", "flux"])
    assert result.exit_code == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    expected = sum(5 if load_minicluster_file(p).spec.restful.enabled else 4 for p in EXAMPLES)
    assert len(documents) == expected
    for obj in documents:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_indexed_job_shape(minimal_spec: dict) -> None:
    minimal_spec["spec"].update({"size": 3, "maxSize": 6, "backoffLimit": 4, "deadlineSeconds": 600})
    minimal_spec["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m", "memory": "1Gi"}}
    job = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Job"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 3
    assert spec["backoffLimit"] == 4 and spec["activeDeadlineSeconds"] == 600
    assert spec["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == "demo"  # hostnames demo-<i>.demo.hpc.svc.cluster.local
    assert job["metadata"]["name"] == "demo" and job["metadata"]["namespace"] == "hpc"
    assert pod["restartPolicy"] == "OnFailure"
    container = _runner(job)
    assert container["resizePolicy"] == [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    assert container["resources"] == {"requests": {"cpu": "1500m", "memory": "1Gi"}}  # no limits added
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert container["command"] == ["/bin/bash", "/etc/miniclusters/entrypoint.sh"]


def test_user_limits_are_kept_and_affinity_can_be_disabled(minimal_spec: dict) -> None:
    minimal_spec["spec"]["network"] = {"disableAffinity": True}
    minimal_spec["spec"]["pod"] = {"restartPolicy": "Never", "nodeAffinity": {"pool": ["hpc"]}}
    minimal_spec["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 2}, "requests": {"cpu": 1}}
    job = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Job"]
    pod = job["spec"]["template"]["spec"]
    assert "podAntiAffinity" not in pod["affinity"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["hpc"]}]}]
    assert pod["restartPolicy"] == "Never"
    assert _runner(job)["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}


def test_headless_service(minimal_spec: dict) -> None:
    minimal_spec["spec"]["network"] = {"headlessName": "brokers"}
    objects = _by_kind(render_minicluster(load_minicluster(minimal_spec)))
    service = objects["Service"]
    assert service["metadata"]["name"] == "brokers"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    pod_labels = objects["Job"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert objects["Job"]["spec"]["template"]["spec"]["subdomain"] == "brokers"


def test_minimal_service_selects_only_the_lead(minimal_spec: dict) -> None:
    minimal_spec["spec"]["flux"] = {"minimalService": True}
    service = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Service"]
    assert service["spec"]["selector"]["batch.kubernetes.io/job-completion-index"] == "0"


def test_broker_toml_is_flux_bootstrap_format(minimal_spec: dict) -> None:
    minimal_spec["spec"].update({"size": 2, "maxSize": 5})
    minimal_spec["spec"]["flux"] = {"scheduler": {"queuePolicy": "easy"}}
    config_map = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["ConfigMap"]
    config = tomllib.loads(config_map["data"]["broker.toml"])
    bootstrap = config["bootstrap"]
    assert bootstrap["default_port"] == 8050
    assert bootstrap["default_bind"] == "tcp://eth0:%p"
    assert bootstrap["default_connect"] == "tcp://%h.demo.hpc.svc.cluster.local:%p"
    assert bootstrap["curve_cert"] == "/etc/flux/curve/curve.cert"
    hosts = hostlist.expand_hostlist(bootstrap["hosts"][0]["host"])
    assert hosts == [f"demo-{i}" for i in range(5)]  # 0..maxSize-1, not just size
    assert config["sched-fluxion-qmanager"]["queue-policy"] == "easy"


@pytest.mark.parametrize("flavour", ["builtin", "flux"])
def test_broker_toml_states_the_topology_for_both_flavours(minimal_spec: dict, flavour: str) -> None:
    """Unstated, flux-core with [bootstrap] builds a flat tree ("custom") and the built-in broker kary:32: the
    rendered config says kary:32 (or spec.flux.topology) so both flavours build the same tree."""
    minimal_spec["spec"]["flux"] = {"flavour": flavour}
    objects = _by_kind(render_minicluster(load_minicluster(minimal_spec)))
    config = tomllib.loads(objects["ConfigMap"]["data"]["broker.toml"])
    assert config["tbon"] == {"topo": "kary:32"}
    assert config["kvs"] == {"checkpoint-period": "1s"}  # flux-core's queue survives a crashed lead
    minimal_spec["spec"]["flux"]["topology"] = "kary:2"
    objects = _by_kind(render_minicluster(load_minicluster(minimal_spec)))
    assert tomllib.loads(objects["ConfigMap"]["data"]["broker.toml"])["tbon"] == {"topo": "kary:2"}
    assert "tbon.topo" not in objects["ConfigMap"]["data"]["entrypoint.sh"]  # one place says it: the config


def test_user_broker_config_is_used_verbatim(minimal_spec: dict) -> None:
    custom = '[bootstrap]\nhosts = [{ host = "other-[0-1]" }]\n'
    minimal_spec["spec"]["flux"] = {"brokerConfig": custom}
    config_map = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["ConfigMap"]
    assert config_map["data"]["broker.toml"] == custom


def test_secret_holds_a_working_curve_keypair(minimal_spec: dict) -> None:
    import zmq

    secret = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Secret"]
    cert = parse_zcert(base64.b64decode(secret["data"]["curve.cert"]).decode())
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    server, client = context.socket(zmq.REP), context.socket(zmq.REQ)
    try:
        server.curve_server = True
        server.curve_secretkey = cert.secret_bytes
        port = server.bind_to_random_port("tcp://127.0.0.1")
        client.curve_serverkey = cert.public_bytes
        client.curve_publickey = cert.public_bytes
        client.curve_secretkey = cert.secret_bytes
        client.connect(f"tcp://127.0.0.1:{port}")
        client.send(b"ping")
        assert server.poll(5000), "CURVE handshake with the rendered certificate did not complete"
        assert server.recv() == b"ping"
    finally:
        server.close(linger=0)
        client.close(linger=0)


def test_given_curve_cert_is_used(minimal_spec: dict) -> None:
    cert = generate_certificate("given")
    minimal_spec["spec"]["flux"] = {"curveCert": render_zcert(cert)}
    secret = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Secret"]
    assert parse_zcert(base64.b64decode(secret["data"]["curve.cert"]).decode()).public_key == cert.public_key


def test_builtin_flavour_brings_the_broker_by_init_container(minimal_spec: dict) -> None:
    options = RenderOptions(registry="registry.example/hpc", tag="9.9")
    pod = _by_kind(render_minicluster(load_minicluster(minimal_spec), options))["Job"]["spec"]["template"]["spec"]
    init = pod["initContainers"][0]
    assert init["image"] == "registry.example/hpc/miniclusters-broker:9.9"
    runner = pod["containers"][0]
    mounts = {m["mountPath"] for m in runner["volumeMounts"]}
    assert {"/mnt/miniclusters", "/etc/flux/config", "/etc/flux/curve", "/etc/miniclusters"} <= mounts


def test_flux_flavour_uses_the_flux_view(minimal_spec: dict) -> None:
    minimal_spec["spec"]["flux"] = {"flavour": "flux", "container": {"image": "view:1", "mountPath": "/opt/fv"}}
    objects = _by_kind(render_minicluster(load_minicluster(minimal_spec)))
    pod = objects["Job"]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["image"] == "view:1"
    assert pod["initContainers"][0]["name"] == "flux-view"
    assert "/opt/fv" in {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    script = objects["ConfigMap"]["data"]["entrypoint.sh"]
    assert 'export MINICLUSTER_FLUX_VIEW="${MINICLUSTER_FLUX_VIEW:-/opt/fv/view}"' in script
    assert 'export PATH="${MINICLUSTER_FLUX_VIEW}/bin:$PATH"' in script
    assert "flux R encode --hosts='demo-[0-1]' --local" in script


def test_flux_flavour_pods_make_open_mpi_yield_unless_the_spec_says(minimal_spec: dict) -> None:
    """flux-core's shell leaves Open MPI busy-polling, which livelocks ranks on pods sharing a node's cores; the
    runner's environment (so `kubectl exec`'d `flux submit` too) carries the yield, a spec's own value kept."""

    def runner_env(flavour: str, environment: dict[str, str]) -> dict[str, str]:
        spec = copy.deepcopy(minimal_spec)
        spec["spec"]["flux"] = {"flavour": flavour}
        spec["spec"]["containers"][0]["environment"] = environment
        job = _by_kind(render_minicluster(load_minicluster(spec)))["Job"]
        return {e["name"]: e.get("value", "") for e in _runner(job)["env"]}

    assert runner_env("flux", {})["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert runner_env("flux", {"OMPI_MCA_mpi_yield_when_idle": "0"})["OMPI_MCA_mpi_yield_when_idle"] == "0"
    assert "OMPI_MCA_mpi_yield_when_idle" not in runner_env("builtin", {})  # its broker decides per job


def test_flux_view_can_be_disabled(minimal_spec: dict) -> None:
    minimal_spec["spec"]["flux"] = {"flavour": "flux", "container": {"disable": True}}
    pod = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Job"]["spec"]["template"]["spec"]
    assert "initContainers" not in pod


def test_pod_passthrough_and_user_volumes(minimal_spec: dict) -> None:
    spec = minimal_spec["spec"]
    spec["pod"] = {
        "serviceAccountName": "runner",
        "nodeSelector": {"pool": "hpc"},
        "tolerations": [{"key": "hpc", "operator": "Exists", "effect": "NoSchedule"}],
        "annotations": {"team": "cfd"},
        "labels": {"campaign": "naca"},
        "securityContext": {"fsGroup": 1000},
    }
    spec["containers"][0]["volumes"] = {
        "data": {"path": "/data", "claimName": "pvc-data", "readOnly": True},
        "scratch": {"path": "/scratch", "emptyDir": True, "emptyDirSizeLimit": "1Gi"},
    }
    spec["containers"][0]["secrets"] = {"TOKEN": {"name": "api", "key": "token"}}
    spec["containers"][0]["securityContext"] = {"addCapabilities": ["SYS_NICE"]}
    job = _by_kind(render_minicluster(load_minicluster(minimal_spec)))["Job"]
    kubernetes_validate.validate(job, "1.33", strict=True)
    template = job["spec"]["template"]
    pod = template["spec"]
    assert pod["serviceAccountName"] == "runner" and pod["nodeSelector"] == {"pool": "hpc"}
    assert pod["securityContext"] == {"fsGroup": 1000}
    assert template["metadata"]["annotations"] == {"team": "cfd"}
    assert template["metadata"]["labels"]["campaign"] == "naca"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "pvc-data"
    assert volumes["scratch"]["emptyDir"] == {"sizeLimit": "1Gi"}
    runner = _runner(job)
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in runner["volumeMounts"]
    assert {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}} in runner["env"]
    assert runner["securityContext"] == {"capabilities": {"add": ["SYS_NICE"]}}


def test_restful_api_is_started_by_the_lead_and_exposed(minimal_spec: dict) -> None:
    minimal_spec["spec"]["restful"] = {"enabled": True, "port": 5000, "mode": "multi-user", "secretName": "creds"}
    objects = render_minicluster(load_minicluster(minimal_spec))
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    restful = services["demo-restful"]["spec"]
    assert restful["ports"][0]["port"] == 5000
    assert restful["selector"]["batch.kubernetes.io/job-completion-index"] == "0"  # the lead only
    job = _by_kind(objects)["Job"]
    runner = _runner(job)
    env = {e["name"]: e for e in runner["env"]}
    assert env["FLUX_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "creds", "key": "FLUX_TOKEN", "optional": True}
    script = _by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]
    assert "-Srestful.port=5000" in script and "export FLUX_SERVER_MODE=multi-user" in script


def test_restful_is_off_by_default(minimal_spec: dict) -> None:
    objects = render_minicluster(load_minicluster(minimal_spec))
    assert [o["kind"] for o in objects].count("Service") == 1
    assert "restful" not in _by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]


def test_archive_claim_is_mounted_at_the_archive_directory_in_the_broker_container(minimal_spec: dict) -> None:
    minimal_spec["spec"]["archive"] = {"path": "/archive/queue.tar.gz", "claimName": "queue-archive"}
    objects = render_minicluster(load_minicluster(minimal_spec), RenderOptions())
    job = _by_kind(objects)["Job"]
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    pod = job["spec"]["template"]["spec"]
    assert {"name": "mc-archive", "persistentVolumeClaim": {"claimName": "queue-archive"}} in pod["volumes"]
    assert {"name": "mc-archive", "mountPath": "/archive"} in _runner(job)["volumeMounts"]
    minimal_spec["spec"]["archive"] = {"path": "queue.tar.gz", "claimName": "Bad_Name"}
    with pytest.raises(SpecError) as problems:
        load_minicluster(minimal_spec)
    text = str(problems.value)
    assert "spec.archive.path: 'queue.tar.gz' must be an absolute path" in text
    assert "spec.archive.claimName" in text
