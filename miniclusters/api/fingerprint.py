"""A short digest of a part of a spec: a record of progress made for another spec is not resumed from."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel


def fingerprint(spec: BaseModel) -> str:
    text = json.dumps(spec.model_dump(mode="json", by_alias=True), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
