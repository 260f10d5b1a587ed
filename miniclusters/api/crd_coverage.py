"""Which checks of rules.py, run_rules.py and burst_rules.py the CRD carries (crd_rules.py), and why not the rest.

One entry per `Problem(...)` a rule function yields, in source order: tests/api/test_crd_coverage.py counts them, so
a new check is classified when it is written. A check is in the CRD when the API server can refuse what it
refuses at the same field path; CEL's fieldPath is static, so a check whose path names a list index or a map key
found in the data cannot be (the server's message would point at the list or map instead). The test runs a case
for every entry: the CRD refuses the `IN_CRD` ones exactly as `validate` does, and accepts the others.
"""

from __future__ import annotations

from typing import Final

IN_CRD: Final = "in the CRD"
SERVER: Final = "the API server's own rule"
"""The server itself refuses it, whatever the CRD says."""

_MAP_KEY = "its field path names a map key; a CEL rule's fieldPath cannot name a key found in the data"
_INDEX = "its field path names the list item it found by comparing items; a CEL rule's fieldPath cannot name it"
_RUNS_FLUX = (
    "it applies to the container that runs Flux, which depends on the number of containers; a rule on the list "
    "cannot name the item's path"
)
_INSTALLED = "it depends on the burst plugins installed where the spec is validated"
_WORKDIR = (
    "it normalises the path (posixpath.normpath) before comparing it with the machine's system trees; CEL has no "
    "path library"
)

CHECKS: dict[str, tuple[tuple[str, str], ...]] = {
    "_names": (
        ("metadata.name", IN_CRD),
        ("hostnames", "the last hostname is the host registry's: the pods' up to maxSize, or a custom hostlist's"),
        ("metadata.namespace", SERVER),
        ("headlessName", IN_CRD),
    ),
    "_sizes": (("minSize>maxSize", IN_CRD), ("minSize>size", IN_CRD), ("maxSize<size", IN_CRD), ("autoscale", IN_CRD)),
    "_containers": (("runFlux", IN_CRD), ("duplicate name", _INDEX)),
    "_container": (
        ("service name", IN_CRD),
        ("container name", _RUNS_FLUX),
        ("name label", IN_CRD),
        ("reserved name", IN_CRD),
        ("launcher and batch", IN_CRD),
        ("blank command", IN_CRD),
        ("script and command", _RUNS_FLUX),
        ("service commands", IN_CRD),
        ("environment name", _MAP_KEY),
    ),
    "_container_volumes": (
        ("volume name label", _MAP_KEY),
        ("reserved volume name", _MAP_KEY),
        ("claimName path", IN_CRD),
        ("hostPath path", IN_CRD),
        ("volume path", IN_CRD),
        ("emptyDirSizeLimit", IN_CRD),
    ),
    "_resources": (("request above limit", _MAP_KEY),),
    "_volumes_agree": (("same volume", _INDEX),),
    "_flux": (
        ("connectTimeout", IN_CRD),
        ("topology", IN_CRD),
        ("curveCert", "it parses a ZeroMQ certificate (zcert sections, Z85 keys)"),
        ("brokerConfig", "it parses TOML"),
        ("queuePolicy", IN_CRD),
    ),
    "_labels": (("label", _MAP_KEY), ("annotation", _MAP_KEY), ("toleration value", IN_CRD)),
    "_restful": (("secretName", IN_CRD), ("port", IN_CRD)),
    "_profiling": (("boundary", IN_CRD), ("directory", IN_CRD)),
    "_multiplexing": (
        ("command", IN_CRD),
        ("boundary", IN_CRD),
        ("workdir", _WORKDIR),
        ("total", IN_CRD),
        ("profileTogether", IN_CRD),
        ("not interactive", IN_CRD),
    ),
    "_multiplexing_ranks": (("ranks", IN_CRD),),
    "_campaign": (
        ("ensemble name label", IN_CRD),
        ("ensemble base", IN_CRD),
        ("ensemble unique", _INDEX),
        ("nodes>maxSize", "its field path names the ensemble's index, found against spec.maxSize"),
        ("nodes>ranks", "its field path names the ensemble's index, found against spec.campaign.ranks"),
        ("values repeat", "a pairwise check of up to 1,000 values in up to 100 ensembles is over the CEL cost budget"),
        ("value range", "its field path names the value's index in the list"),
    ),
    "_campaign_settings": (
        ("weights count", IN_CRD),
        ("weights concentric", IN_CRD),
        ("weights positive", IN_CRD),
        ("workdir", _WORKDIR),
        ("multiplexing command", IN_CRD),
        ("containers command", IN_CRD),
    ),
    "_malleable": (
        ("runtime range", IN_CRD),
        ("median runtime", IN_CRD),
        ("workdir", _WORKDIR),
        ("alone", IN_CRD),
        ("containers command", IN_CRD),
    ),
    "_placement": (
        ("policy with scaling", IN_CRD),
        ("policy with multiplexing", IN_CRD),
        ("groups with policy", IN_CRD),
        ("groups above size", IN_CRD),
        ("exclusive with multiplexing", IN_CRD),
    ),
    "_granularity": (("tasks below size", IN_CRD),),
    "_exclusive_resources": (
        ("memory request", "its field path names the container's index, for every container and service"),
        ("limit equal request", _MAP_KEY),
        ("cpu request", "its field path names the container's index, for every container and service"),
        ("whole cores", "its field path names the container's index, for every container and service"),
    ),
    "_archive": (
        ("absolute", IN_CRD),
        ("comma", IN_CRD),
        ("claimName path", IN_CRD),
        ("directory", IN_CRD),
        ("claimName label", IN_CRD),
    ),
    "bursting_problems": (("hostlist and clusters", IN_CRD), ("plugins without pods", IN_CRD)),
    "_clusters": (
        ("name label", IN_CRD),
        ("hostname length", "the hosts' length depends on the entry's size, spec.size when 0, outside the item"),
        ("hosts taken", _INDEX),
    ),
    "_legacy_plugin_name": (("plugin as cluster", _INSTALLED),),
    "_plugins": (("flavour", IN_CRD), ("installed", _INSTALLED)),
}
"""rule function → (check, IN_CRD | SERVER | why not) per Problem it yields, in source order."""


def check_ids(kind: str | None = None) -> list[str]:
    """`function:check` of every check, or of those classified `kind` (IN_CRD, SERVER, or None for all)."""
    return [f"{function}:{name}" for function, checks in CHECKS.items() for name, where in checks
            if kind is None or where == kind]  # fmt: skip


def classification(check_id: str) -> str:
    """IN_CRD, SERVER or why not, of one `function:check`."""
    function, _, name = check_id.partition(":")
    return dict(CHECKS[function])[name]
