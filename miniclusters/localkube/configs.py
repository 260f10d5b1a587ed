"""The cluster's configuration files, rendered as text from the layout: pure, so tests read them without a cluster.

Settings this machine needs (docs/kubernetes.md says why): the kubelet runs on cgroup v1 (`failCgroupV1: false`)
with the `cgroupfs` driver, as containerd's runc does; it tolerates a full disk and swap (a shared CI machine); the
pods' network is one bridge with host-local addresses (Debian's CNI plugins); names resolve through CoreDNS
running beside the control plane on the bridge's address.
"""

from __future__ import annotations

import json

import tomli_w
import yaml

from miniclusters.localkube.layout import Layout

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
"""The sandbox image containerd starts first in every pod; built here (images/pause), never pulled."""


def kubeconfig(layout: Layout, user: str, server: str | None = None) -> str:
    """A kubeconfig for `user` authenticating with pki/USER.crt (the admin's is the one `up` prints)."""
    pki = layout.pki
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "miniclusters",
                "cluster": {
                    "server": server or layout.apiserver_url,
                    "certificate-authority": str(pki / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki / f"{user}.crt"),
                    "client-key": str(pki / f"{user}.key"),
                },
            }
        ],
        "contexts": [{"name": "miniclusters", "context": {"cluster": "miniclusters", "user": user}}],
        "current-context": "miniclusters",
    }
    return yaml.safe_dump(document, sort_keys=False)


def kubelet_config(layout: Layout) -> str:
    pki = layout.pki
    document = {  # a KubeletConfiguration, as the kubelet documents it: written here, dumped as is
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # this machine's cgroups are v1 (separate cpu, cpuacct, cpuset mounts)
        "cgroupDriver": "cgroupfs",  # no systemd runs here; containerd's runc uses cgroupfs too
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet.key"),
        "clusterDomain": layout.cluster_domain,
        "clusterDNS": [str(layout.dns_address)],
        "resolvConf": "/etc/resolv.conf",
        "failSwapOn": False,
        "podCIDR": str(layout.pod_network),
        "maxPods": 110,
        "serializeImagePulls": False,
        # A shared CI machine's disk may be fuller than the defaults allow; no eviction for disk here.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "protectKernelDefaults": False,
        "makeIPTablesUtilChains": True,
        "registerNode": True,
        "staticPodPath": str(layout.config / "manifests"),
        "syncFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "fileCheckFrequency": "5s",
        "shutdownGracePeriod": "0s",
        "localStorageCapacityIsolation": True,
        "featureGates": {},
    }
    return yaml.safe_dump(document, sort_keys=False)


def containerd_config(layout: Layout) -> str:
    """containerd 1.6's config (version 2): the CRI plugin with runc on cgroupfs, our CNI, our sandbox image."""
    document = {
        "version": 2,
        "root": str(layout.containerd_root),
        "state": str(layout.containerd_state),
        "grpc": {"address": str(layout.containerd_socket)},
        "plugins": {
            "io.containerd.grpc.v1.cri": {
                "sandbox_image": PAUSE_IMAGE,
                "enable_unprivileged_ports": False,
                # no CAP_SYS_RESOURCE here: an OOM score below containerd's own (the sandbox's -998) is refused
                # by the kernel, so runc's init died ("can't get final child's PID from pipe")
                "restrict_oom_score_adj": True,
                "containerd": {
                    "snapshotter": "overlayfs",
                    "default_runtime_name": "runc",
                    "runtimes": {
                        "runc": {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {"SystemdCgroup": False},
                        }
                    },
                },
                "cni": {"bin_dir": "/usr/lib/cni", "conf_dir": str(layout.cni_config)},
                "registry": {"config_path": ""},
            }
        },
    }
    return tomli_w.dumps(document)


def cni_conflist(layout: Layout) -> str:
    """One bridge, host-local addresses from the node's pod CIDR, NAT to the outside. No portmap plugin: its
    CNI-HOSTPORT-* chains would be shared with podman's networks, and nothing of ours uses a hostPort."""
    document = {
        "cniVersion": "0.4.0",
        "name": "miniclusters",
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(layout.pod_network), "gateway": str(layout.gateway)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.state / "cni-ipam"),
                },
            },
        ],
    }
    return json.dumps(document, indent=2)


def corefile(layout: Layout) -> str:
    """CoreDNS: the cluster's names from the API (headless Services give one name per pod), the rest forwarded."""
    reverse = "in-addr.arpa ip6.arpa"
    return (
        f"{layout.cluster_domain}:53 {reverse} {{\n"
        f"    bind {layout.dns_address}\n"
        "    errors\n"
        f"    kubernetes {layout.cluster_domain} {reverse} {{\n"
        f"        kubeconfig {layout.component_kubeconfig('coredns')} miniclusters\n"
        "        pods insecure\n"
        "        fallthrough in-addr.arpa ip6.arpa\n"
        "        ttl 5\n"
        "    }\n"
        "    cache 5\n"
        "}\n"
        ".:53 {\n"
        f"    bind {layout.dns_address}\n"
        "    errors\n"
        "    forward . /etc/resolv.conf\n"
        "    cache 30\n"
        "}\n"
    )


def kube_proxy_config(layout: Layout) -> str:
    document = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(layout.component_kubeconfig("kube-proxy"))},
        "clusterCIDR": str(layout.pod_network),
        "hostnameOverride": layout.node_name,
        "conntrack": {"maxPerCore": 0},  # leave the kernel's conntrack table as it is (no sysctl writes)
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
    }
    return yaml.safe_dump(document, sort_keys=False)


def scheduler_config(layout: Layout) -> str:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(layout.component_kubeconfig("kube-scheduler"))},
        "leaderElection": {"leaderElect": False},
    }
    return yaml.safe_dump(document, sort_keys=False)
