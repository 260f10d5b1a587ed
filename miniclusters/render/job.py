"""The Indexed Job: one pod per broker, hostnames `<name>-<i>` under the headless Service."""

from __future__ import annotations

from typing import Any, cast

import miniclusters.kube_shapes as k8s
from miniclusters.api.hosts import registry_for
from miniclusters.api.spec import Container, ContainerVolume, MiniCluster, ResourceRequirements
from miniclusters.render.entrypoint import render_sidecar_command
from miniclusters.render.layout import (
    BROKER_INSTALL_DIR,
    BROKER_TOML,
    BURST_SPEC,
    CONFIG_DIR,
    CURVE_DIR,
    ENTRYPOINT,
    INDEX_LABEL,
    RUN_DIR,
    SCRIPTS_DIR,
    VOLUME_ARCHIVE,
    VOLUME_BROKER,
    VOLUME_CONFIG,
    VOLUME_CURVE,
    VOLUME_FLUX_VIEW,
    VOLUME_RUN,
    VOLUME_SCRIPTS,
    common_labels,
    config_map_name,
    curve_secret_name,
    selector_labels,
)
from miniclusters.render.options import RenderOptions
from miniclusters.render.placement import guaranteed_init_resources, task_group_rules
from miniclusters.render.shared_cores import shared_cores_environment

CPU_RESIZE_POLICY: list[k8s.ResizePolicy] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]


def _resources(resources: ResourceRequirements) -> k8s.ResourceRequirements:
    """Requests and limits exactly as given: we never add a CPU limit (CFS throttling hurts MPI)."""
    out: k8s.ResourceRequirements = {}
    if resources.requests:
        out["requests"] = {k: str(v) for k, v in resources.requests.items()}
    if resources.limits:
        out["limits"] = {k: str(v) for k, v in resources.limits.items()}
    if resources.claims:
        out["claims"] = resources.claims
    return out


def _security_context(context: dict[str, Any]) -> dict[str, Any]:  # open: a corev1.SecurityContext, passed through
    """Pass a corev1.SecurityContext through, translating the operator's older `addCapabilities`."""
    out = {k: v for k, v in context.items() if k != "addCapabilities"}
    if context.get("addCapabilities"):
        capabilities = dict(out.get("capabilities", {}))
        capabilities["add"] = [*capabilities.get("add", []), *context["addCapabilities"]]
        out["capabilities"] = capabilities
    return out


def _pull_policy(container: Container) -> str:
    if container.image_pull_policy:
        return container.image_pull_policy
    return "Always" if container.pull_always else "IfNotPresent"


def _env(container: Container, extra: dict[str, str]) -> list[k8s.EnvVar]:
    env: list[k8s.EnvVar] = [{"name": k, "value": v} for k, v in extra.items()]
    env += [{"name": k, "value": v} for k, v in container.environment.items()]
    env += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": s.name, "key": s.key}}} for k, s in container.secrets.items()
    ]
    return env


def _volume_source(volume: ContainerVolume) -> k8s.PodVolume:
    if volume.secret_name:
        return {"secret": {"secretName": volume.secret_name}}
    if volume.config_map_name:
        source: k8s.ConfigMapVolumeSource = {"name": volume.config_map_name}
        if volume.items:
            source["items"] = [{"key": k, "path": p} for k, p in volume.items.items()]
        return {"configMap": source}
    if volume.claim_name:
        return {"persistentVolumeClaim": {"claimName": volume.claim_name, "readOnly": volume.read_only}}
    if volume.host_path:
        return {"hostPath": {"path": volume.host_path}}
    if volume.csi_driver:
        csi: k8s.CSIVolumeSource = {"driver": volume.csi_driver, "readOnly": volume.read_only}
        if volume.csi_driver_attributes:
            csi["volumeAttributes"] = volume.csi_driver_attributes
        return {"csi": csi}
    empty: k8s.EmptyDirVolumeSource = {}
    if volume.empty_dir_medium:
        empty["medium"] = volume.empty_dir_medium
    if volume.empty_dir_size_limit:
        empty["sizeLimit"] = volume.empty_dir_size_limit
    return {"emptyDir": empty}


def _user_volumes(mc: MiniCluster) -> list[k8s.PodVolume]:
    seen: dict[str, k8s.PodVolume] = {}
    for container in [*mc.spec.containers, *mc.spec.services]:
        for name, volume in container.volumes.items():
            seen.setdefault(name, {"name": name, **_volume_source(volume)})
    return list(seen.values())


def _user_mounts(container: Container) -> list[k8s.VolumeMount]:
    mounts = []
    for name, volume in container.volumes.items():
        if not volume.path:
            continue
        mount: k8s.VolumeMount = {"name": name, "mountPath": volume.path}
        if volume.read_only:
            mount["readOnly"] = True
        mounts.append(mount)
    return mounts


def _lifecycle(container: Container) -> k8s.Lifecycle:
    lifecycle: k8s.Lifecycle = {}
    if container.life_cycle.post_start_exec:
        lifecycle["postStart"] = {"exec": {"command": ["/bin/sh", "-c", container.life_cycle.post_start_exec]}}
    if container.life_cycle.pre_stop_exec:
        lifecycle["preStop"] = {"exec": {"command": ["/bin/sh", "-c", container.life_cycle.pre_stop_exec]}}
    return lifecycle


def _base_container(container: Container, name: str) -> k8s.PodContainer:
    out: k8s.PodContainer = {"name": name, "image": container.image, "imagePullPolicy": _pull_policy(container)}
    if container.working_dir:
        out["workingDir"] = container.working_dir
    if container.ports:
        out["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in container.ports]
    resources = _resources(container.resources)
    if resources:
        out["resources"] = resources
    lifecycle = _lifecycle(container)
    if lifecycle:
        out["lifecycle"] = lifecycle
    if container.security_context:
        out["securityContext"] = _security_context(container.security_context)
    return out


RESTFUL_SECRET_KEYS = ("FLUX_USER", "FLUX_TOKEN", "FLUX_SECRET_KEY")


def _restful_env(mc: MiniCluster) -> list[k8s.EnvVar]:
    """The REST server's credentials come from the user's Secret, never from the spec itself."""
    restful = mc.spec.restful
    if not (restful.enabled and restful.secret_name):
        return []
    return [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": restful.secret_name, "key": key, "optional": True}}}
        for key in RESTFUL_SECRET_KEYS
    ]


def _broker_env(mc: MiniCluster, namespace: str) -> dict[str, str]:
    spec = mc.spec
    env = {
        "MINICLUSTER_NAME": mc.name,
        "MINICLUSTER_NAMESPACE": namespace,
        "MINICLUSTER_SIZE": str(spec.size),
        "MINICLUSTER_MAX_SIZE": str(registry_for(mc).pods),
        "MINICLUSTER_FLAVOUR": spec.flux.flavour,
    }
    if spec.placement.cpus != "exclusive":  # the node's cores are shared with other pods
        env |= shared_cores_environment(spec.flux.flavour, spec.containers[spec.flux_runner_index].environment)
    return env


def _broker_mounts(mc: MiniCluster) -> list[k8s.VolumeMount]:
    mounts: list[k8s.VolumeMount] = [
        {"name": VOLUME_CONFIG, "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": VOLUME_SCRIPTS, "mountPath": SCRIPTS_DIR, "readOnly": True},
        {"name": VOLUME_CURVE, "mountPath": CURVE_DIR, "readOnly": True},
        {"name": VOLUME_RUN, "mountPath": RUN_DIR},
    ]
    if mc.spec.flux.flavour == "builtin":
        mounts.append({"name": VOLUME_BROKER, "mountPath": BROKER_INSTALL_DIR, "readOnly": True})
    elif not mc.spec.flux.container.disable:
        mounts.append({"name": VOLUME_FLUX_VIEW, "mountPath": mc.spec.flux.container.mount_path})
    archive = mc.spec.archive
    if archive.claim_name:
        # The archive's directory on a claim that outlives this MiniCluster: the next one restores from it.
        mounts.append({"name": VOLUME_ARCHIVE, "mountPath": archive.path.rsplit("/", 1)[0]})
    return mounts


def build_containers(mc: MiniCluster, namespace: str) -> list[k8s.PodContainer]:
    spec = mc.spec
    runner_index = spec.flux_runner_index
    containers = []
    for index, container in enumerate(spec.containers):
        out = _base_container(container, container.name or mc.name)
        mounts = _user_mounts(container)
        if index == runner_index:
            out["command"] = ["/bin/bash", f"{SCRIPTS_DIR}/{ENTRYPOINT}"]
            out["env"] = _env(container, _broker_env(mc, namespace)) + _restful_env(mc)
            out["resizePolicy"] = CPU_RESIZE_POLICY
            # A broker that refuses to start (broker/refused.py) says why in its log's last lines: the kubelet
            # keeps them as the termination message, which `minicluster up` shows instead of waiting.
            out["terminationMessagePolicy"] = "FallbackToLogsOnError"
            if spec.restful.enabled:
                out.setdefault("ports", []).append({"name": "restful", "containerPort": spec.restful.port})
            mounts = _broker_mounts(mc) + mounts
            if spec.interactive:
                out["stdin"] = True
                out["tty"] = True
        else:
            command = render_sidecar_command(container, is_service=False)
            if command:
                out["command"] = command
            env = _env(container, {})
            if env:
                out["env"] = env
        if mounts:
            out["volumeMounts"] = mounts
        containers.append(out)
    for service in spec.services:
        out = _base_container(service, service.name)
        command = render_sidecar_command(service, is_service=True)
        if command:
            out["command"] = command
        env = _env(service, {})
        if env:
            out["env"] = env
        mounts = _user_mounts(service)
        if mounts:
            out["volumeMounts"] = mounts
        containers.append(out)
    return containers


def bundle_extras(mc: MiniCluster) -> list[str]:
    """install.sh's option for the broker bundle's extras (numpy, matplotlib, the Kubernetes client), which only
    some pods use: a campaign's lead (it prepares cases and draws its timeline), a lead running the burst
    service (the kubernetes plugin) and, in the lead's pod alone, a REST server (the /cluster page's figures).
    The others get the core alone, a third of the size to copy."""
    if mc.spec.campaign is not None or mc.spec.flux.bursting.plugins:
        return ["--with-extras"]
    return ["--with-extras-on-lead"] if mc.spec.restful.enabled else []


def build_init_containers(mc: MiniCluster, options: RenderOptions) -> list[k8s.PodContainer]:
    """What brings the broker into an application image that does not contain it."""
    spec = mc.spec
    exclusive = spec.placement.cpus == "exclusive"
    if spec.flux.flavour == "builtin":
        installer: k8s.PodContainer = {
            "name": "miniclusters-broker",
            "image": options.broker_image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/opt/miniclusters/install.sh", BROKER_INSTALL_DIR, *bundle_extras(mc)],
            "volumeMounts": [{"name": VOLUME_BROKER, "mountPath": BROKER_INSTALL_DIR}],
        }
        if exclusive:
            installer["resources"] = guaranteed_init_resources()
        return [installer]
    view = spec.flux.container
    if view.disable:
        return []
    init: k8s.PodContainer = {
        "name": view.name,
        "image": view.image,
        "imagePullPolicy": "Always" if view.pull_always else "IfNotPresent",
        # The flux-view images carry the Flux install under /opt/view and /opt/software.
        "command": [
            "/bin/sh",
            "-c",
            f"mkdir -p {view.mount_path} && cp -a /opt/view {view.mount_path}/view "
            f"&& cp -a /opt/software {view.mount_path}/software",
        ],
        "volumeMounts": [{"name": VOLUME_FLUX_VIEW, "mountPath": view.mount_path}],
    }
    if view.working_dir:
        init["workingDir"] = view.working_dir
    resources = guaranteed_init_resources(view.resources) if exclusive else _resources(view.resources)
    if resources:
        init["resources"] = resources
    if view.security_context:
        init["securityContext"] = view.security_context
    return [init]


def build_volumes(mc: MiniCluster) -> list[k8s.PodVolume]:
    scripts: list[k8s.KeyToPath] = [{"key": ENTRYPOINT, "path": ENTRYPOINT, "mode": 0o755}]
    if mc.spec.flux.bursting.plugins:
        scripts.append({"key": BURST_SPEC, "path": BURST_SPEC})
    volumes: list[k8s.PodVolume] = [
        {
            "name": VOLUME_CONFIG,
            "configMap": {"name": config_map_name(mc), "items": [{"key": BROKER_TOML, "path": BROKER_TOML}]},
        },
        {
            "name": VOLUME_SCRIPTS,
            "configMap": {"name": config_map_name(mc), "items": scripts},
        },
        {"name": VOLUME_CURVE, "secret": {"secretName": curve_secret_name(mc), "defaultMode": 0o400}},
        {"name": VOLUME_RUN, "emptyDir": {}},
    ]
    if mc.spec.flux.flavour == "builtin":
        volumes.append({"name": VOLUME_BROKER, "emptyDir": {}})
    elif not mc.spec.flux.container.disable:
        volumes.append({"name": VOLUME_FLUX_VIEW, "emptyDir": {}})
    if mc.spec.archive.claim_name:
        volumes.append({"name": VOLUME_ARCHIVE, "persistentVolumeClaim": {"claimName": mc.spec.archive.claim_name}})
    return volumes + _user_volumes(mc)


def build_affinity(mc: MiniCluster) -> k8s.Affinity:
    rules = task_group_rules(mc)
    affinity: k8s.Affinity = rules["affinity"].copy() if "affinity" in rules else {}
    if not affinity and not mc.spec.network.disable_affinity:
        affinity["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": selector_labels(mc)},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    if mc.spec.pod.node_affinity:
        expressions: list[k8s.NodeSelectorRequirement] = [
            {"key": key, "operator": "In", "values": values} for key, values in mc.spec.pod.node_affinity.items()
        ]
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    return affinity


def _image_pull_secrets(mc: MiniCluster) -> list[k8s.LocalObjectReference]:
    names = [c.image_pull_secret for c in [*mc.spec.containers, *mc.spec.services] if c.image_pull_secret]
    if mc.spec.flux.flavour == "flux" and mc.spec.flux.container.image_pull_secret:
        names.append(mc.spec.flux.container.image_pull_secret)
    return [{"name": n} for n in dict.fromkeys(names)]


def build_pod_spec(mc: MiniCluster, namespace: str, options: RenderOptions) -> k8s.PodSpec:
    pod = mc.spec.pod
    spec: k8s.PodSpec = {
        "subdomain": mc.headless_name,
        "restartPolicy": pod.restart_policy or "OnFailure",
        "initContainers": build_init_containers(mc, options),
        "containers": build_containers(mc, namespace),
        "volumes": build_volumes(mc),
    }
    affinity = build_affinity(mc)
    if affinity:
        spec["affinity"] = affinity
    spread = task_group_rules(mc).get("topologySpreadConstraints")
    if spread:
        spec["topologySpreadConstraints"] = spread
    optional: k8s.PodSpec = {
        "serviceAccountName": pod.service_account_name,
        "runtimeClassName": pod.runtime_class_name,
        "schedulerName": pod.scheduler_name,
        "nodeSelector": pod.node_selector,
        "dnsPolicy": pod.dns_policy,
        "securityContext": pod.security_context,
        "imagePullSecrets": _image_pull_secrets(mc),
        "resourceClaims": mc.spec.resource_claims,
        "overhead": {k: str(v) for k, v in pod.resources.items()},
        "tolerations": [
            cast(k8s.Toleration, t.model_dump(by_alias=True, exclude_defaults=True)) for t in pod.tolerations
        ],
    }
    spec.update(cast(k8s.PodSpec, {k: v for k, v in optional.items() if v}))
    flags: k8s.PodSpec = {
        "automountServiceAccountToken": pod.automount_service_account_token,
        "hostIPC": pod.host_ipc,
        "hostPID": pod.host_pid,
        "shareProcessNamespace": mc.spec.share_process_namespace,
    }
    spec.update(cast(k8s.PodSpec, {k: True for k, v in flags.items() if v}))
    if not spec["initContainers"]:
        del spec["initContainers"]
    return spec


def build_job(mc: MiniCluster, options: RenderOptions | None = None) -> k8s.Job:
    """The Indexed Job: completions = parallelism = size; the Job succeeds when index 0 (the lead) does."""
    options = options or RenderOptions()
    namespace = options.namespace or mc.namespace
    spec = mc.spec
    pod_labels = {**spec.pod.labels, **common_labels(mc)}
    template_meta: k8s.ObjectMeta = {"labels": pod_labels}
    if spec.pod.annotations:
        template_meta["annotations"] = dict(spec.pod.annotations)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": mc.name,
            "namespace": namespace,
            "labels": {**spec.job_labels, **common_labels(mc)},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.size,
            "parallelism": spec.size,
            "backoffLimit": spec.backoff_limit,
            "activeDeadlineSeconds": spec.deadline_seconds,
            # Followers must not keep the Job alive once the lead has finished (an operator complaint).
            "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
            "template": {"metadata": template_meta, "spec": build_pod_spec(mc, namespace, options)},
        },
    }


def lead_selector(mc: MiniCluster) -> dict[str, str]:
    return {**selector_labels(mc), INDEX_LABEL: "0"}
