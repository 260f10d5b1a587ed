"""The rules of rules.py that the API server itself can enforce, as CEL (`x-kubernetes-validations`) on the CRD's
schema nodes: a MiniCluster that breaks one is refused at `kubectl apply`, at the same field path and in the same
words as `minicluster validate`, instead of being stored and then marked InvalidSpec by the operator.
crd_coverage.py says, for every check of rules.py, whether it is here and, if not, why it cannot be.

Written for the real server's limits (v1.37.2):
- messages use the strings library's `format` (a messageExpression concatenating `string(int)` is priced over
  the budget); fieldPath is static (no list index, no map key chosen by the data);
- each rule's estimated cost grows with the longest string and list it reads, so every string a rule matches
  and every list it walks has a maxLength/maxItems (limits.py: the natural limit of what it holds);
- regular expressions are names.py's own patterns, written for Python's `re` and RE2 alike.

The API server applies the schema's defaults first, so scalar fields with a default always have a value; lists,
maps and objects without one may be absent (`has()`). tests/api/test_crd_rules.py holds each rule equal to its
Python twin; tests/kubernetes runs the same cases on the real server and the fake (cel-python, kube_cel.py).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from miniclusters.api.campaign import CAMPAIGN_BASE
from miniclusters.api.names import DNS1123_LABEL, MPI_CALL, NOT_A_LABEL, NOT_BLANK
from miniclusters.api.rules import BUILTIN_QUEUE_POLICIES, RESERVED_CONTAINER_NAMES, TOPOLOGY

EFFECTIVE_MAX = "(self.maxSize == 0 ? self.size : self.maxSize)"
"""spec.effective_max_size in CEL: maxSize 0 means "equal to size", as in the Flux Operator."""
SPACE = r"[\t\n\v\f\r ]*"
DURATION = rf"^(?i:{SPACE}(inf|infinity){SPACE})$|^{SPACE}[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?{SPACE}(ms|s|m|h|d)?{SPACE}$"
"""broker/fsd.py's parse_fsd as one RE2 pattern: `inf`/`infinity` in any case, or a number and a unit."""
RANKS = "(self.multiplexing.ranks != 0 ? self.multiplexing.ranks : self.tasks)"


def literal(text: str) -> str:
    """A CEL string literal holding `text` exactly (a regular expression keeps its backslashes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _words(text: str, *args: str) -> str:
    """A messageExpression: `text` with its %s/%d filled from the CEL expressions `args`."""
    return f"{literal(text)}.format([{', '.join(args)}])" if args else literal(text)


class ValidationRule(TypedDict):
    """One `x-kubernetes-validations` entry."""

    rule: str
    messageExpression: str
    reason: str
    fieldPath: NotRequired[str]


def _rule(rule: str, field_path: str, message: str, *args: str) -> ValidationRule:
    out: ValidationRule = {"rule": rule, "messageExpression": _words(message, *args), "reason": "FieldValueInvalid"}
    if field_path:
        out["fieldPath"] = field_path
    return out


def _label(field: str) -> ValidationRule:
    """`field` empty or a DNS-1123 label (its length is the schema's maxLength)."""
    value = f"self.{field}"
    return _rule(f"{value} == '' || {value}.matches({literal(DNS1123_LABEL.pattern)})", f".{field}",
                 f"'%s' {NOT_A_LABEL}", value)  # fmt: skip


def _absolute(field: str) -> ValidationRule:
    value = f"self.{field}"
    return _rule(f"{value} == '' || {value}.startsWith('/')", f".{field}", "'%s' must be an absolute path", value)


def _mpi_call(field: str) -> ValidationRule:
    value = f"self.{field}"
    return _rule(f"{value} == '' || {value}.matches({literal(MPI_CALL.pattern)})", f".{field}",
                 "'%s' is not an MPI call name (e.g. MPI_Allreduce)", value)  # fmt: skip


def _blank(value: str) -> str:
    return f"!{value}.matches({literal(NOT_BLANK.pattern)})"


MUX = "has(self.multiplexing) && self.multiplexing.enabled"
PLACED = "has(self.placement) && self.placement.policy != 'none'"

SPEC = [
    # rules._sizes, in its order: minSize against maxSize first, then against size
    _rule(f"self.minSize == 0 || self.minSize <= {EFFECTIVE_MAX}", ".minSize",
          "minSize (%d) must not exceed maxSize (%d)", "self.minSize", EFFECTIVE_MAX),
    _rule(f"self.minSize == 0 || self.minSize > {EFFECTIVE_MAX} || self.minSize <= self.size", ".minSize",
          "minSize (%d) must not exceed size (%d)", "self.minSize", "self.size"),
    _rule("self.maxSize == 0 || self.maxSize >= self.size", ".maxSize",
          "maxSize (%d) must not be smaller than size (%d)", "self.maxSize", "self.size"),
    _rule(f"!has(self.autoscale) || !self.autoscale.enabled || {EFFECTIVE_MAX} > "
          "(self.minSize > 1 ? self.minSize : 1)", ".autoscale.enabled",
          "nothing to scale: maxSize (%d) must exceed max(1, minSize) to autoscale", EFFECTIVE_MAX),
    # rules._containers
    _rule("size(self.containers) <= 1 || size(self.containers.filter(c, c.runFlux)) == 1", ".containers",
          "exactly one container must set runFlux: true when there are several (%d do)",
          "size(self.containers.filter(c, c.runFlux))"),
    # run_rules._multiplexing: counts against max, the command, brokers that stay up
    _rule("!has(self.multiplexing) || self.multiplexing.total == 0 || self.multiplexing.total >= self.multiplexing.max",
          ".multiplexing.total", "%d is below max (%d); use 0 for 'as many as max'",
          "self.multiplexing.total", "self.multiplexing.max"),
    _rule("!has(self.multiplexing) || self.multiplexing.profileTogether <= self.multiplexing.max",
          ".multiplexing.profileTogether", "%d is above max (%d)",
          "self.multiplexing.profileTogether", "self.multiplexing.max"),
    _rule(f"!({MUX}) || has(self.campaign) || !({_blank('self.multiplexing.command')})", ".multiplexing.command",
          "required when multiplexing is enabled (the simulation to run)"),
    _rule(f"!({MUX}) || self.interactive || !self.containers.exists(c, c.command != '')", ".multiplexing.enabled",
          "the brokers must stay up for the controller's jobs: set interactive: true or leave the command empty"),
    # run_rules._multiplexing_ranks
    _rule("!has(self.multiplexing) || has(self.campaign) || "
          f"!(self.multiplexing.enabled || self.multiplexing.ranks != 0) || {RANKS} >= self.size",
          ".multiplexing.ranks",
          "%d rank(s) per simulation cannot span the %d pods (flux submit -N %d -n %d); set ranks (or spec.tasks) "
          "to at least size", RANKS, "self.size", "self.size", RANKS),
    # run_rules._campaign_settings: a campaign runs its own members
    _rule(f"!has(self.campaign) || !has(self.multiplexing) || {_blank('self.multiplexing.command')}",
          ".multiplexing.command", "a campaign runs its own members; leave the command empty"),
    _rule("!has(self.campaign) || !self.containers.exists(c, c.command != '')", ".containers",
          "a campaign runs its own members; leave the containers' command empty"),
    # run_rules._malleable: the run owns the nodes and the jobs
    _rule(f"!has(self.malleable) || (!has(self.campaign) && !({MUX}) && "
          "!(has(self.autoscale) && self.autoscale.enabled))", ".malleable",
          "a malleable run shares the MiniCluster's nodes among its jobs itself; it cannot be combined with a "
          "campaign, multiplexing or autoscaling"),
    _rule("!has(self.malleable) || !self.containers.exists(c, c.command != '')", ".containers",
          "a malleable run submits its own jobs; leave the containers' command empty"),
    # rules._placement and rules._granularity
    _rule(f"!({PLACED}) || !((has(self.autoscale) && self.autoscale.enabled) || {EFFECTIVE_MAX} != self.size)",
          ".placement.policy", "'%s' fixes the job's shape from its ranks and nodes; it cannot be combined with "
          "autoscaling or a maxSize other than size", "self.placement.policy"),
    _rule(f"!({PLACED}) || !({MUX})", ".placement.policy",
          "the multiplexing controller shapes the pods' CPU itself; use placement policy none with it"),
    _rule(f"!({PLACED}) || self.placement.groups == 0", ".placement.groups",
          "set by the '%s' policy; leave it 0", "self.placement.policy"),
    _rule("!has(self.placement) || self.placement.policy != 'none' || self.placement.groups <= self.size",
          ".placement.groups", "%d task groups for %d pod(s): one is empty", "self.placement.groups", "self.size"),
    _rule(f"!has(self.placement) || self.placement.cpus != 'exclusive' || !({MUX})", ".placement.cpus",
          "exclusive CPUs pin each pod to its own cores, while multiplexing shares and resizes them in place; "
          "choose one (cpus: shared, or multiplexing disabled)"),
    _rule("!has(self.placement) || self.placement.policy != 'granularity' || self.tasks >= self.size",
          ".placement.policy", "granularity gives each node at least one rank, but tasks (%d) is below size (%d, "
          "the nodes the job may use); raise tasks or lower size", "self.tasks", "self.size"),
    # rules._restful: the REST server may not take the brokers' overlay port
    _rule("!has(self.restful) || !self.restful.enabled || self.restful.port != 8050", ".restful.port",
          "8050 is the brokers' overlay port; choose another"),
]  # fmt: skip

CONTAINER = [  # rules._container, for containers and services alike
    _label("name"),
    _rule(f"!(self.name in {sorted(RESERVED_CONTAINER_NAMES)})", ".name",
          "'%s' is reserved for the container miniclusters adds", "self.name"),
    _rule("!(self.launcher && self.batch)", ".batch", "launcher and batch cannot both be set; choose one"),
    _rule(f"self.command == '' || !({_blank('self.command')})", ".command",
          "only spaces: give a command, or leave it out (interactive: true)"),
]  # fmt: skip

SERVICE = [
    _rule("self.name != ''", ".name", "a service container needs a name"),
    _rule("!has(self.commands) || (self.commands.pre == '' && self.commands.brokerPre == '' && "
          "self.commands.workerPre == '')", ".commands",
          "service containers do not support pre, brokerPre or workerPre"),
]  # fmt: skip

VOLUME = [  # rules._container_volumes, each volume of a container
    _rule("self.secretName != '' || self.configMapName != '' || self.claimName == '' || self.path != ''", ".path",
          "volume with claimName '%s' needs a path", "self.claimName"),
    _rule("self.secretName != '' || self.configMapName != '' || self.claimName != '' || self.hostPath == '' || "
          "self.path != ''", ".path", "volume with hostPath '%s' needs a path", "self.hostPath"),
    _absolute("path"),
    _rule("self.emptyDirSizeLimit == '' || isQuantity(self.emptyDirSizeLimit)", ".emptyDirSizeLimit",
          "'%s' is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')", "self.emptyDirSizeLimit"),
    _rule("self.emptyDirSizeLimit == '' || !isQuantity(self.emptyDirSizeLimit) || "
          "!quantity(self.emptyDirSizeLimit).isLessThan(quantity('0'))", ".emptyDirSizeLimit", "'%s' is negative",
          "self.emptyDirSizeLimit"),
]  # fmt: skip

FLUX = [  # rules._flux and burst_rules._plugins
    _rule(f"self.connectTimeout.matches({literal(DURATION)})", ".connectTimeout",
          "'%s' is not a duration (expected e.g. '5s', '100ms', '2m', '1h', '1d')", "self.connectTimeout"),
    _rule(f"self.topology == '' || self.topology.matches({literal(TOPOLOGY.pattern)})", ".topology",
          "'%s' is not a Flux topology (kary:N, binomial, mincrit[:N], custom)", "self.topology"),
    _rule(f"self.flavour != 'builtin' || !has(self.scheduler) || self.scheduler.queuePolicy in "
          f"{list(BUILTIN_QUEUE_POLICIES)}", ".scheduler.queuePolicy",
          "'%s' needs flavour 'flux' (fluxion); the builtin broker offers fcfs and easy", "self.scheduler.queuePolicy"),
    _rule("self.flavour == 'builtin' || !has(self.bursting) || !has(self.bursting.plugins) || "
          "size(self.bursting.plugins) == 0", ".bursting.plugins",
          "the burst service runs beside the builtin broker only; with flavour 'flux' burst to the Flux Operator's "
          "static hosts (spec.flux.bursting.clusters or .hostlist), or use flavour 'builtin'"),
]  # fmt: skip

BURSTING = [  # burst_rules.bursting_problems
    _rule("self.hostlist == '' || !has(self.clusters) || size(self.clusters) == 0", "",
          "give either a custom hostlist or clusters to burst to, not both"),
    _rule("self.hostlist == '' || !has(self.plugins) || size(self.plugins) == 0 || has(self.leadBroker)", ".plugins",
          "the burst service adds brokers to a cluster of pods; a custom hostlist replaces the pods (give one)"),
]  # fmt: skip

ARCHIVE = [  # rules._archive
    _absolute("path"),
    _rule("!self.path.contains(',')", ".path", "'%s': a comma cannot be passed in a broker option", "self.path"),
    _rule("self.claimName == '' || self.path != ''", ".path", "claimName '%s' needs the archive's path",
          "self.claimName"),
    _rule("self.claimName == '' || self.path == '' || !self.path.matches('^/{1,2}[^/]*$')", ".path",
          "'%s': put the archive in a directory (the volume's)", "self.path"),
    _label("claimName"),
]  # fmt: skip

CAMPAIGN = [  # run_rules._campaign and _campaign_settings
    _rule("!has(self.weights) || size(self.weights) == 0 || size(self.weights) == self.ranks", ".weights",
          "%d weights for %d ranks per member", "size(self.weights)", "self.ranks"),
    _rule("!has(self.weights) || size(self.weights) == 0 || self.decomposition == 'concentric'", ".weights",
          "weights apply to the concentric decomposition only"),
    _rule("!has(self.weights) || self.weights.all(w, w > 0.0)", ".weights", "weights must be positive"),
]  # fmt: skip

ENSEMBLE = [
    _rule("self.name != ''", ".name", "must not be empty"),
    _label("name"),
    _rule(f"self.name != '{CAMPAIGN_BASE}'", ".name",
          f"'{CAMPAIGN_BASE}' names the campaign's base case directory; choose another"),
]  # fmt: skip

MALLEABLE = [  # run_rules._malleable
    _rule("self.runtimeMin <= self.runtimeMax", ".runtimeMin", "must not be above runtimeMax"),
    _rule("self.runtimeMin <= self.medianRuntime && self.medianRuntime <= self.runtimeMax", ".medianRuntime",
          "must be within [runtimeMin, runtimeMax]"),
]  # fmt: skip

VALIDATIONS: dict[str, list[ValidationRule]] = {
    "": [  # rules._names: the server itself holds metadata.name to a DNS-1123 subdomain, of up to 253 characters
        _rule(
            "size(self.metadata.name) <= 63",
            ".metadata.name",
            "'%s' is %d characters; a DNS-1123 label has at most 63",
            "self.metadata.name",
            "size(self.metadata.name)",
        ),
        _rule(
            f"size(self.metadata.name) > 63 || self.metadata.name.matches({literal(DNS1123_LABEL.pattern)})",
            ".metadata.name",
            f"'%s' {NOT_A_LABEL}",
            "self.metadata.name",
        ),
    ],
    "spec": SPEC,
    "spec.containers[]": CONTAINER,
    "spec.containers[].volumes{}": VOLUME,
    "spec.services[]": CONTAINER + SERVICE,
    "spec.services[].volumes{}": VOLUME,
    "spec.network": [_label("headlessName")],
    "spec.pod.tolerations[]": [
        _rule("!(self.operator == 'Exists' && self.value != '')", ".value", "must be empty when operator is Exists")
    ],
    "spec.flux": FLUX,
    "spec.flux.bursting": BURSTING,
    "spec.flux.bursting.clusters[]": [_label("name")],
    "spec.restful": [_label("secretName")],
    "spec.profiling": [_mpi_call("boundary"), _absolute("directory")],
    "spec.multiplexing": [_mpi_call("boundary")],
    "spec.archive": ARCHIVE,
    "spec.campaign": CAMPAIGN,
    "spec.campaign.ensembles[]": ENSEMBLE,
    "spec.malleable": MALLEABLE,
}
"""Where each list of rules sits in the CRD's schema: `a.b` a property, `[]` a list's items, `{}` a map's values."""
