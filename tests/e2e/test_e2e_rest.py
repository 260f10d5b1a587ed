"""The REST API on the real cluster, as a user reaches it: `minicluster up examples/restful.yaml` with credentials
from a Secret (`spec.restful.secretName`), the port-forward `up` prints, and the public flux-restful-client from
PyPI submitting a job across both pods and reading its output; a request without credentials is refused."""

from __future__ import annotations

import re
import secrets
import shlex
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from miniclusters.localkube.layout import Layout
from miniclusters.testing.kube_e2e import ROOT, cli, kubectl, objects_of, wait_until

FLUX_VIEW = "ghcr.io/miniclusters/miniclusters-flux-view:0.1.0"


def _spec(tmp_path: Path, name: str, secret: str, flavour: str) -> Path:
    spec = yaml.safe_load((ROOT / "examples" / "restful.yaml").read_text())
    spec["metadata"]["name"] = name
    spec["spec"]["restful"]["secretName"] = secret
    if flavour == "flux":  # our flux-core 0.88 view (make images): the lead pod serves the API beside flux-broker
        spec["spec"]["flux"] = {"flavour": "flux", "container": {"image": FLUX_VIEW}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@contextmanager
def _forwarded(kubeconfig: Path, printed: str) -> Iterator[str]:
    """The port-forward `up` printed, run with a free local port (`:PORT`): the local URL while it runs."""
    words = shlex.split(printed)
    assert words[0] == "kubectl" and words[-1].isdigit(), printed
    command = [str(Layout().binary("kubectl")), "--kubeconfig", str(kubeconfig), *words[1:-1], f":{words[-1]}"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as forward:
        try:
            assert forward.stdout is not None
            first = forward.stdout.readline()  # "Forwarding from 127.0.0.1:NNNNN -> 5000"
            local = re.search(r"127\.0\.0\.1:(\d+)", first)
            assert local, first + (forward.stdout.read() if forward.poll() is not None else "")
            yield f"http://127.0.0.1:{local.group(1)}"
        finally:
            forward.terminate()


def _public_client(url: str, user: str, token: str, key: str, script: str) -> subprocess.CompletedProcess[str]:
    """The upstream flux-restful-client in a child process, so that a hang is a timeout, not a stuck test."""
    program = textwrap.dedent(
        f"""
        import json, time
        from flux_restful_client.main.client import FluxRestfulClient
        cli = FluxRestfulClient(host={url!r}, user={user!r}, token={token!r}, secret_key={key!r}, attempts=0)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", program + textwrap.dedent(script)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("flavour", ["builtin", "flux"])
def test_the_public_client_runs_a_job_on_both_pods_through_the_printed_port_forward(
    kubeconfig: Path, e2e_namespace: str, tmp_path: Path, flavour: str
) -> None:
    name = f"rest-{flavour[:4]}-{uuid.uuid4().hex[:4]}"
    user, token, key = "admin", secrets.token_hex(12), secrets.token_hex(32)
    secret = f"{name}-creds"
    made = kubectl(
        kubeconfig, "-n", e2e_namespace, "create", "secret", "generic", secret, f"--from-literal=FLUX_USER={user}",
        f"--from-literal=FLUX_TOKEN={token}", f"--from-literal=FLUX_SECRET_KEY={key}",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    up = cli("up", str(_spec(tmp_path, name, secret, flavour)), "--backend", "kubernetes", "--namespace", e2e_namespace)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        printed = re.search(r"\((kubectl -n \S+ port-forward svc/\S+ \d+)\)", up.stdout)
        assert printed and f"-n {e2e_namespace} port-forward svc/{name}-restful 5000" in printed.group(1), up.stdout
        with _forwarded(kubeconfig, printed.group(1)) as url:
            refused = httpx.get(f"{url}/v1/jobs", timeout=30)
            assert refused.status_code == 401, refused.text  # the API is not open to whoever reaches the Service
            script = """
                job = cli.submit("hostname", num_nodes=2, num_tasks=2)
                for _ in range(600):
                    info = cli.jobs(job["id"])
                    if info["state"] == "INACTIVE":
                        break
                    time.sleep(0.1)
                print(json.dumps({"info": info, "output": cli.output(job["id"])}))
            """
            ran = _public_client(url, user, token, key, script)
        assert ran.returncode == 0, ran.stderr[-3000:]
        answer = yaml.safe_load(ran.stdout.strip().splitlines()[-1])
        assert answer["info"]["state"] == "INACTIVE" and answer["info"]["nnodes"] == 2, answer
        assert sorted(answer["output"]["Output"]) == [f"{name}-0\n", f"{name}-1\n"], answer
    finally:
        down = cli("down", name, "--backend", "kubernetes", "--namespace", e2e_namespace)
        kubectl(kubeconfig, "-n", e2e_namespace, "delete", "secret", secret)
    assert down.returncode == 0, down.stderr
    wait_until("no object of the cluster left", lambda: not objects_of(kubeconfig, e2e_namespace, name))
