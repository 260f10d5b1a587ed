"""Kubernetes name and label syntax (apimachinery validation), as plain predicates."""

from __future__ import annotations

import re

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_VAR_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
MPI_CALL = re.compile(r"^MPI_[A-Z][a-z_]+$")
"""An MPI call's name, as PMPI boundaries are given (MPI_Allreduce)."""
NOT_BLANK = re.compile(r"[^\t\n\v\f\r ]")
"""A character that is not ASCII white space. Written for Python's `re` and RE2 alike, as every pattern here: the
CRD's CEL rules (crd_rules.py) use these patterns, so `matches()` on the API server and `fullmatch` here agree
(`str.strip()` would also strip Unicode spaces, which RE2's classes do not know)."""


def is_blank(text: str) -> bool:
    """Empty or only ASCII white space: what the CRD's rules call blank too."""
    return NOT_BLANK.search(text) is None


NOT_A_LABEL = "is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)"


def dns1123_label_error(value: str) -> str | None:
    """Why `value` is not a DNS-1123 label (RFC 1123, <= 63 characters), or None."""
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return f"{value!r} is {len(value)} characters; a DNS-1123 label has at most 63"
    if not DNS1123_LABEL.fullmatch(value):
        return f"{value!r} {NOT_A_LABEL}"
    return None


def label_key_error(key: str) -> str | None:
    """Why `key` is not a valid label/annotation key (`[prefix/]name`), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return f"key {key!r}: prefix must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not QUALIFIED_NAME.fullmatch(name):
        return f"key {key!r}: name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_value_error(value: str) -> str | None:
    if len(value) > 63 or not LABEL_VALUE.fullmatch(value):
        return f"value {value!r} must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None
