"""Kubernetes resource quantities in the spec (the parsing itself is elasticity/model/resources.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

from elasticity.model.resources import cpu_millicores, format_millicores, parse_quantity

__all__ = ["Quantity", "cpu_millicores", "format_millicores", "parse_quantity"]


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
