"""One filter language over item metadata, for every search backend.

A filter is a mapping ``{field: condition}``; an item passes when every condition holds on its metadata (a
missing field fails). A condition is one of:

- a value (str, int, float or bool): the field equals it;
- ``{"in": [v1, v2, ...]}``: the field equals one of the values (at least one, all of one type);
- ``{"range": [lo, hi]}``: lo <= field <= hi, for numbers (ends included).

:func:`parse_filter` checks a filter once and returns a :class:`Filter`, which tests metadata dicts
(:meth:`Filter.matches`, the faiss backend's id selector) and writes the same test as a Milvus boolean
expression (:meth:`Filter.milvus_expression`). Field names are identifiers (letters, digits, ``_``; not starting
with a digit), so a name can never break out of an expression, and the expression reads every field as
``$meta["name"]``, so a name that is a word of Milvus's grammar (``like``, ``and``, ``in``, ``exists``, ...) is a
field like any other. Integers lie in int64's range and strings are valid Unicode (no lone surrogates): what
both backends can compare.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Scalar = str | int | float | bool
Operator = Literal["eq", "in", "range"]

_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = frozenset({"id", "vector"})
"""Names the backends use for the item itself, never for metadata."""
INT64_RANGE = (-(2**63), 2**63 - 1)
"""The integers a filter compares (Milvus parses integer literals as int64)."""


@dataclass(frozen=True)
class Condition:
    """One field's test: ``operator`` "eq" (``values`` holds one value), "in" (any of ``values``) or "range"
    (``values`` = (lo, hi), ends included)."""

    field: str
    operator: Operator
    values: tuple[Scalar, ...]

    def matches(self, metadata: Mapping[str, Any] | None) -> bool:
        """Whether ``metadata`` (an item's dict, or None for none) passes this condition."""
        if metadata is None or self.field not in metadata:
            return False
        value = metadata[self.field]
        if self.operator == "range":
            low, high = self.values
            return _is_number(value) and float(low) <= float(value) <= float(high)
        return any(_same(value, wanted) for wanted in self.values)

    def milvus_expression(self) -> str:
        """This condition in Milvus's boolean expression language."""
        field = f"$meta[{json.dumps(self.field)}]"
        if self.operator == "range":
            low, high = self.values
            return f"({field} >= {_literal(low)} and {field} <= {_literal(high)})"
        if self.operator == "eq":
            return f"({field} == {_literal(self.values[0])})"
        return f"({field} in [{', '.join(_literal(v) for v in _one_literal_type(self.values))}])"


@dataclass(frozen=True)
class Filter:
    """A checked filter: the conditions that must all hold (:func:`parse_filter` builds it)."""

    conditions: tuple[Condition, ...]

    def matches(self, metadata: Mapping[str, Any] | None) -> bool:
        """Whether an item with this ``metadata`` passes every condition."""
        return all(condition.matches(metadata) for condition in self.conditions)

    def milvus_expression(self) -> str:
        """The conjunction of the conditions as one Milvus boolean expression."""
        return " and ".join(condition.milvus_expression() for condition in self.conditions)


def parse_filter(spec: Mapping[str, Any] | None) -> Filter | None:
    """``spec`` (module docstring) checked and turned into a :class:`Filter`; None or ``{}`` means no filter.

    Raises:
        ValueError: naming the field and the fix, for a field name that is not an identifier, a reserved name,
            an unknown operator, an empty or mixed-type ``in`` list, a ``range`` that is not two numbers
            lo <= hi, or a value that is not a str, int, float or bool (or a float that is NaN or infinite).
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError(f"filter must be a mapping {{field: condition}}, got {type(spec).__name__}")
    return (
        Filter(tuple(_condition(str(field), condition) for field, condition in spec.items()))
        if spec
        else None
    )


def _condition(field: str, condition: Any) -> Condition:
    if not _FIELD.fullmatch(field) or field in _RESERVED:
        raise ValueError(
            f"filter field {field!r} is not a metadata name; use letters, digits and _ (not 'id' or 'vector')"
        )
    if not isinstance(condition, Mapping):
        return Condition(field, "eq", (_scalar(field, condition),))
    if len(condition) != 1 or next(iter(condition)) not in ("in", "range"):
        raise ValueError(
            f"filter field {field!r}: {json.dumps(condition, default=str)[:60]} is not a condition; pass a value,"
            ' {"in": [values]} or {"range": [lo, hi]}'
        )
    operator, argument = next(iter(condition.items()))
    if not isinstance(argument, list | tuple):
        raise ValueError(f'filter field {field!r}: "{operator}" takes a list, got {type(argument).__name__}')
    values = tuple(_scalar(field, value) for value in argument)
    if operator == "in":
        return Condition(field, "in", _one_type(field, values))
    return Condition(field, "range", _bounds(field, values))


def _scalar(field: str, value: Any) -> Scalar:
    """``value`` when both backends can compare it: a bool, a valid Unicode str, an int64, a finite float."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"filter field {field!r}: the string holds a lone surrogate, not a character; pass valid Unicode"
            ) from None
        return value
    if isinstance(value, int):
        low, high = INT64_RANGE
        if not low <= value <= high:
            raise ValueError(
                f"filter field {field!r}: {str(value)[:40]} lies outside int64 [{low}, {high}]; pass an "
                "integer in that range"
            )
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise ValueError(
        f"filter field {field!r}: {str(value)[:40]!r} is not a str, int, float or bool (finite); pass one of those"
    )


def _one_type(field: str, values: tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    if not values:
        raise ValueError(f'filter field {field!r}: "in" needs at least one value')
    kinds = {"number" if _is_number(v) else type(v).__name__ for v in values}
    if len(kinds) > 1:
        raise ValueError(
            f'filter field {field!r}: "in" mixes {", ".join(sorted(kinds))}; pass values of one type'
        )
    return values


def _bounds(field: str, values: tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    if len(values) != 2 or not all(_is_number(v) for v in values) or float(values[0]) > float(values[1]):
        raise ValueError(f'filter field {field!r}: "range" takes two numbers [lo, hi] with lo <= hi')
    return values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(value: Any, wanted: Scalar) -> bool:
    """Equality as both backends see it: numbers by value (1 == 1.0), bools and strings only with their kind."""
    if isinstance(wanted, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(wanted, bool) and value == wanted
    if _is_number(wanted):
        return _is_number(value) and float(value) == float(wanted)
    return isinstance(value, str) and value == wanted


def _one_literal_type(values: tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    """The numbers of an ``in`` list all as floats when they mix ints and floats (Milvus takes one literal type
    per list, and compares a float literal with an int field by value, as :func:`_same` does)."""
    if any(isinstance(v, float) for v in values) and all(_is_number(v) for v in values):
        return tuple(float(v) for v in values)
    return values


def _literal(value: Scalar) -> str:
    """A Milvus expression literal: strings JSON-quoted (escapes included), bools lower case, numbers as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)
