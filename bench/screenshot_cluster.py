"""A screenshot of the web interface's /cluster page during a multiplexing run, for the docs (docs/cluster.png).

Starts a local MiniCluster from a spec (default examples/multiplex.yaml) with the lead's REST server (and so the
pages) on, runs `minicluster multiplex` on it (which mirrors its event log to the lead's
`<REST state dir>/controllers/multiplex.jsonl`, where /cluster looks), waits until the controller has profiled,
resized and packed a second simulation (or --wait seconds), signs in with headless Chromium and saves the page.

Run (as root, from the repository root):
    .venv/bin/python bench/screenshot_cluster.py docs/cluster.png [--spec examples/multiplex.yaml] [--wait 240]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from broker.rest.web.testing import browser_missing, chromium
from elasticity.control.events import read_events
from miniclusters.backends.local.state import StateStore

MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))
ROOT = Path(__file__).resolve().parents[1]


def say(message: str) -> None:
    print(message, flush=True)


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MINICLUSTER, *args], capture_output=True, text=True, timeout=timeout, env=env)


def with_rest(spec_file: Path, directory: Path, name: str | None) -> tuple[Path, str]:
    """The spec with the REST server on (the pages come with it); (its path, the cluster's name)."""
    data: dict[str, Any] = yaml.safe_load(spec_file.read_text())
    data["spec"].setdefault("restful", {})["enabled"] = True
    if name:
        data["metadata"]["name"] = name
    path = directory / spec_file.name
    path.write_text(yaml.safe_dump(data))
    return path, str(data["metadata"]["name"])


def packed(log: Path) -> bool:
    """The controller has profiled a simulation, resized the pods and runs two simulations."""
    if not log.is_file():
        return False
    events = list(read_events(log))
    kinds = [e.get("event") or e.get("kind") for e in events]
    running = {e.get("sim") for e in events if (e.get("event") or e.get("kind")) == "running"}
    return "profiled" in kinds and "resize" in kinds and len(running) >= 2


def screenshot(url: str, user: str, password: str, out: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.wait import WebDriverWait

    with tempfile.TemporaryDirectory(prefix="mc-chromium-") as profile:
        driver = chromium(width=1280, height=1000, profile_dir=Path(profile))
        try:
            wait = WebDriverWait(driver, 60)
            driver.get(f"{url}/login?next=/cluster")
            if driver.find_elements(By.ID, "username"):
                driver.find_element(By.ID, "username").send_keys(user)
                driver.find_element(By.ID, "password").send_keys(password, Keys.ENTER)
            wait.until(ec.presence_of_element_located((By.ID, "cluster-body")))
            wait.until(lambda d: d.execute_script("return [...document.images].every(i => i.complete)"))
            height = int(driver.execute_script("return document.documentElement.scrollHeight"))
            driver.set_window_size(1280, min(max(height + 40, 1000), 6000))
            time.sleep(0.5)
            out.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(out))
        finally:
            driver.quit()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="where to save the PNG")
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "multiplex.yaml")
    parser.add_argument("--wait", type=float, default=300.0, help="longest wait for the controller to pack (s)")
    parser.add_argument("--name", default="webshot", help="the cluster's name (default webshot: not the example's)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    args = parser.parse_args()
    missing = browser_missing()
    if missing:
        print(f"screenshot_cluster: {missing}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="mc-screenshot-"))
    spec, name = with_rest(args.spec, work, args.name)
    user, password = "admin", secrets.token_hex(16)
    env = dict(os.environ, FLUX_USER=user, FLUX_TOKEN=password, FLUX_SECRET_KEY=secrets.token_hex(32))
    say(f"starting {name} from {args.spec} (REST server on)")
    up = cli("up", str(spec), "--detach", env=env)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    controller: subprocess.Popen[bytes] | None = None
    try:
        status = json.loads(cli("status", name, "-o", "json").stdout)
        url = status["rest_url"]
        log = StateStore().lead_rest_state_dir(name) / "controllers" / "multiplex.jsonl"
        log.unlink(missing_ok=True)
        say(f"pages at {url}; multiplexing (the lead's copy of its event log: {log})")
        controller = subprocess.Popen(
            [MINICLUSTER, "multiplex", name, "--timeline", str(work / "multiplex.png")],
            stdout=open(work / "multiplex.log", "wb"),  # noqa: SIM115 - the child's output for as long as it runs
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + args.wait
        while not packed(log) and time.monotonic() < deadline and controller.poll() is None:
            time.sleep(2)
        time.sleep(5)  # a few more samples of CPU in use, and the second simulation's first iterations
        say("packed: taking the screenshot" if packed(log) else "not packed in time: taking the screenshot anyway")
        screenshot(url, user, password, args.output)
        say(f"wrote {args.output}")
    finally:
        if controller is not None and controller.poll() is None:
            os.killpg(controller.pid, signal.SIGINT)  # the controller cancels its simulations on ^C
            controller.wait(timeout=60)
        if not args.keep:
            cli("down", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
