"""What the REST server process loads at start (issue 27's memory target): checked functionally, in a fresh
interpreter that goes through the server's own start-up path and builds the app, as `flux restful serve` does."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from broker.rest import server
server.decline_unused_imports()
from broker.rest.app import create_app
from broker.rest.jobs import BrokerJobService
from broker.rest.settings import RestSettings
from broker.rest.tokens import decode_access_token, issue_access_token
from pathlib import Path
settings = RestSettings(state_dir=Path(sys.argv[1]), token_signing_key="k" * 40)
(Path(sys.argv[1]) / "local-0").touch()  # a socket path (ZeroMQ connects lazily)
create_app(settings, BrokerJobService(f"local://{sys.argv[1]}/local-0"))
claims = decode_access_token(issue_access_token("ada", "k" * 40, 5), "k" * 40)
print(json.dumps({"claims": claims.subject, "loaded": sorted({m.split(".")[0] for m in sys.modules}),
                  "pydantic_v1": "pydantic.v1" in sys.modules}))
"""


def test_the_rest_server_starts_without_plotting_or_unused_crypto(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["claims"] == "ada"  # HS256 tokens still issue and verify without `cryptography`
    loaded = set(report["loaded"])
    assert not loaded & {"matplotlib", "numpy", "PIL", "cryptography", "kubernetes", "pandas"}, loaded
    assert "jinja2" not in loaded  # the pages' templates load at the first page shown, not at start
    assert not report["pydantic_v1"]  # FastAPI's check for pydantic v1 models loads it (1.4 MB) only to say no
