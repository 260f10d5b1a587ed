"""Kubernetes resource quantities, parsed with the official client's parser."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer


def parse_quantity(value: str | int | float) -> Decimal:
    """A quantity as a Decimal (cores for cpu, bytes for memory); ValueError when it does not parse."""
    from kubernetes.utils.quantity import parse_quantity as k8s_parse

    if isinstance(value, bool):
        raise ValueError("a quantity must be a number or a string like '500m' or '2Gi'")
    try:
        parsed = k8s_parse(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')") from exc
    if parsed < 0:
        raise ValueError(f"{value!r} is negative")
    return Decimal(parsed)


def cpu_millicores(value: str | int | float) -> int:
    """CPU quantity in millicores, rounded up the way the API server rounds sub-milli values."""
    cores = parse_quantity(value)
    milli = cores * 1000
    return int(milli.to_integral_value(rounding="ROUND_CEILING"))


def format_millicores(milli: int) -> str:
    """Millicores in the form kubectl shows: `2` for whole cores, `500m` otherwise."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _check_quantity(value: object) -> str | int | float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("a quantity must be a number or a string like '500m' or '2Gi'")
    parse_quantity(value)
    return value


# A quantity field keeps the user's spelling (so conversion is lossless) but is checked to parse.
Quantity = Annotated[
    str | int | float,
    BeforeValidator(_check_quantity),
    PlainSerializer(lambda v: v, return_type=str | int | float),
]
