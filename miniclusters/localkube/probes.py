"""Is each component ready? One small check per component, each answering True/False and never raising.

What is checked is what users need, not only that a port answers: the apiserver's /readyz, the node's Ready
condition, the default ServiceAccount a pod needs to be admitted, and a real DNS answer for the cluster's names.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request

from miniclusters.localkube.layout import Layout


def _get(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (OSError, ValueError):
        return 0, b""


def admin_tls(layout: Layout) -> ssl.SSLContext:
    """TLS as the administrator: the cluster's CA trusted, the admin certificate presented."""
    context = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))
    context.load_cert_chain(str(layout.pki / "admin.crt"), str(layout.pki / "admin.key"))
    return context


def _insecure() -> ssl.SSLContext:
    """The components' own serving certificates are self-signed: only /healthz is read through them."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def etcd(layout: Layout) -> bool:
    status, body = _get(f"{layout.etcd_url}/health")
    return status == 200 and b'"health":"true"' in body


def apiserver(layout: Layout) -> bool:
    status, body = _get(f"{layout.apiserver_url}/readyz", admin_tls(layout))
    return status == 200 and body.strip() == b"ok"


def controller_manager(layout: Layout) -> bool:
    return _get("https://127.0.0.1:10257/healthz", _insecure())[0] == 200


def scheduler(layout: Layout) -> bool:
    return _get("https://127.0.0.1:10259/healthz", _insecure())[0] == 200


def containerd(layout: Layout) -> bool:
    if not layout.containerd_socket.exists():
        return False
    version = subprocess.run(
        ["ctr", "--address", str(layout.containerd_socket), "version"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return version.returncode == 0


def kubelet(layout: Layout) -> bool:
    return _get("http://127.0.0.1:10248/healthz")[0] == 200


def kube_proxy(layout: Layout) -> bool:
    return _get("http://127.0.0.1:10256/healthz")[0] == 200


def api_json(layout: Layout, path: str) -> dict[str, object] | None:  # open: any API server answer
    status, body = _get(f"{layout.apiserver_url}{path}", admin_tls(layout))
    if status != 200:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def node_ready(layout: Layout) -> bool:
    node = api_json(layout, f"/api/v1/nodes/{layout.node_name}")
    status = node.get("status") if node else None
    conditions = status.get("conditions", []) if isinstance(status, dict) else []
    return any(
        isinstance(item, dict) and item.get("type") == "Ready" and item.get("status") == "True" for item in conditions
    )


def default_service_account(layout: Layout) -> bool:
    """Pods in `default` are refused until the service-account controller made its ServiceAccount."""
    return api_json(layout, "/api/v1/namespaces/default/serviceaccounts/default") is not None


def dns(layout: Layout) -> bool:
    """CoreDNS answers the `kubernetes` Service's name with its ClusterIP."""
    import dns.exception
    import dns.resolver

    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [str(layout.dns_address)]
    resolver.lifetime = 2.0
    try:
        answer = resolver.resolve(f"kubernetes.default.svc.{layout.cluster_domain}", "A")
    except (dns.exception.DNSException, OSError):
        return False
    return str(layout.kubernetes_service_ip) in {record.to_text() for record in answer}
