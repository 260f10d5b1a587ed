"""The cross-field rules of rules.py that the API server itself can enforce, as CEL (`x-kubernetes-validations`
on the CRD's `spec`): a MiniCluster that breaks one is refused at `kubectl apply`, with the field path and the
same words `minicluster validate` says, instead of being stored and then marked InvalidSpec by the operator.

Messages use the strings library's `format` (v1.37.2 refuses a CRD whose messageExpression concatenates
`string(int)`: its estimated cost exceeds the budget more than 100 times; `format` is within it).

The API server applies the schema's defaults before it evaluates these, so each field here has a value (size 1,
minSize 0, maxSize 0: "equal to size"). tests/api/test_crd_rules.py holds each rule equal to its Python twin
over every small spec; tests/kubernetes runs them on the real server and the fake (which evaluates them with
cel-python).
"""

from __future__ import annotations

from typing import Any

EFFECTIVE_MAX = "(self.maxSize == 0 ? self.size : self.maxSize)"
"""spec.effective_max_size in CEL: maxSize 0 means "equal to size", as in the Flux Operator."""


def _rule(rule: str, field_path: str, message: str) -> dict[str, Any]:
    return {"rule": rule, "fieldPath": field_path, "reason": "FieldValueInvalid", "messageExpression": message}


SPEC_VALIDATIONS: list[dict[str, Any]] = [
    # rules._sizes, in its order: minSize against maxSize first, then against size
    _rule(
        f"self.minSize == 0 || self.minSize <= {EFFECTIVE_MAX}",
        ".minSize",
        f"'minSize (%d) must not exceed maxSize (%d)'.format([self.minSize, {EFFECTIVE_MAX}])",
    ),
    _rule(
        f"self.minSize == 0 || self.minSize > {EFFECTIVE_MAX} || self.minSize <= self.size",
        ".minSize",
        "'minSize (%d) must not exceed size (%d)'.format([self.minSize, self.size])",
    ),
    _rule(
        "self.maxSize == 0 || self.maxSize >= self.size",
        ".maxSize",
        "'maxSize (%d) must not be smaller than size (%d)'.format([self.maxSize, self.size])",
    ),
    _rule(
        f"!has(self.autoscale) || !has(self.autoscale.enabled) || !self.autoscale.enabled || "
        f"{EFFECTIVE_MAX} > (self.minSize > 1 ? self.minSize : 1)",
        ".autoscale.enabled",
        f"'nothing to scale: maxSize (%d) must exceed max(1, minSize) to autoscale'.format([{EFFECTIVE_MAX}])",
    ),
    # rules._multiplexing: how many simulations in all, and how many profiled at once, against max
    _rule(
        "!has(self.multiplexing) || self.multiplexing.total == 0 || self.multiplexing.total >= self.multiplexing.max",
        ".multiplexing.total",
        "\"%d is below max (%d); use 0 for 'as many as max'\".format([self.multiplexing.total, self.multiplexing.max])",
    ),
    _rule(
        "!has(self.multiplexing) || self.multiplexing.profileTogether <= self.multiplexing.max",
        ".multiplexing.profileTogether",
        "'%d is above max (%d)'.format([self.multiplexing.profileTogether, self.multiplexing.max])",
    ),
    # rules._restful: the REST server may not take the brokers' overlay port
    _rule(
        "!has(self.restful) || !self.restful.enabled || self.restful.port != 8050",
        ".restful.port",
        '"8050 is the brokers\' overlay port; choose another"',
    ),
]
