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
field like any other. Integers lie in -(2**63 - 1) .. 2**63 - 1 (Milvus reads ``-N`` as minus ``N``, so -2**63 is
beyond it) and strings are valid Unicode (no lone surrogates; characters beyond the BMP, such as emoji, are
written into the expression as themselves): what both backends can compare. Both compare numbers as Milvus does:
with an integer exactly (an item's 2**53 + 1 is not the integer 2**53), with a float as floats (the item's number
converted to a float, so 2**53 + 1 is the float 2**53); an ``in`` list mixing integers and floats is written to
Milvus as floats, so its integers lie within +-2**53, where a float holds them exactly.

A filter's size is bounded, the same for every backend, before any backend sees it: at most
:data:`MAX_CONDITIONS` conditions (a Milvus query node fails a conjunction of about 50), at most
:data:`MAX_IN_VALUES` values in one ``in`` list, and at most :data:`MAX_DEPTH` levels of nesting (the filter, a
condition, its list): a filter beyond one is a ``ValueError`` naming the limit. The faiss backend tests an ``in``
list by a set lookup, so a filter costs one pass over the items whatever its lists' lengths.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

Scalar = str | int | float | bool
Operator = Literal["eq", "in", "range"]
Key = tuple[str, Scalar]
"""A value as the filter compares it: its kind ("bool", "str" or "number") and the value (numbers by value)."""

_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = frozenset({"id", "vector"})
"""Names the backends use for the item itself, never for metadata."""
INT64_RANGE = (-(2**63 - 1), 2**63 - 1)
"""The integers a filter compares: int64's, less -2**63 (Milvus reads ``-N`` as minus ``N``, and 2**63 is beyond
int64)."""
EXACT_FLOAT_INT = 2**53
"""The largest integer magnitude a float holds exactly (an ``in`` list mixing ints and floats is written as floats)."""
MAX_CONDITIONS = 32
"""Most conditions (fields) one filter holds: a Milvus query node fails a conjunction of 49 ranges or 50 values."""
MAX_IN_VALUES = 1024
"""Most values of one ``in`` list."""
MAX_DEPTH = 3
"""Most levels of nesting of a filter: the mapping of fields, a condition mapping, its list of values."""
SHOWN = 40
"""Most characters of a field name or a value that an error shows."""


@dataclass(frozen=True)
class Condition:
    """One field's test: ``operator`` "eq" (``values`` holds one value), "in" (any of ``values``) or "range"
    (``values`` = (lo, hi), ends included)."""

    field: str
    operator: Operator
    values: tuple[Scalar, ...]
    _as_float: bool = dataclasses.field(init=False, repr=False, compare=False)
    _keys: frozenset[Key] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        as_float = self.operator != "range" and any(isinstance(value, float) for value in self.values)
        keys = () if self.operator == "range" else (_key(value, as_float) for value in self.values)
        object.__setattr__(self, "_as_float", as_float)
        object.__setattr__(self, "_keys", frozenset(key for key in keys if key is not None))

    def matches(self, metadata: Mapping[str, Any] | None) -> bool:
        """Whether ``metadata`` (an item's dict, or None for none) passes this condition, numbers compared by
        value as Milvus compares them (:func:`_compared`): exactly with an integer (2**53 + 1 != 2**53), as floats
        with a float (and with an ``in`` list holding one); an ``in`` list by one set lookup."""
        if metadata is None or self.field not in metadata:
            return False
        value = metadata[self.field]
        if self.operator == "range":
            low, high = self.values
            above, below = _compared(value, low), _compared(value, high)
            return (
                _is_number(low)
                and _is_number(high)
                and above is not None
                and below is not None
                and low <= above
                and below <= high
            )
        key = _key(value, self._as_float)
        return key is not None and key in self._keys

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
        ValueError: naming the field and the fix, for more than :data:`MAX_CONDITIONS` conditions, a field name
            that is not an identifier, a reserved name, an unknown operator, an empty, mixed-type or too long
            (:data:`MAX_IN_VALUES`) ``in`` list, a ``range`` that is not two numbers lo <= hi, or a value that is
            not a str, int, float or bool (a list or mapping nested deeper than :data:`MAX_DEPTH` levels, a float
            that is NaN or infinite, an integer outside :data:`INT64_RANGE`).
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError(f"filter must be a mapping {{field: condition}}, got {type(spec).__name__}")
    if len(spec) > MAX_CONDITIONS:
        raise ValueError(
            f"filter has {len(spec)} conditions, beyond the limit of {MAX_CONDITIONS} (MAX_CONDITIONS) for every "
            'backend; pass at most that many fields, e.g. one field\'s values as one {"in": [...]} condition'
        )
    return (
        Filter(tuple(_condition(str(field), condition) for field, condition in spec.items()))
        if spec
        else None
    )


def _condition(field: str, condition: Any) -> Condition:
    if not _FIELD.fullmatch(field) or field in _RESERVED:
        raise ValueError(
            f"filter field {_shown(field)} is not a metadata name; use letters, digits and _ (not 'id' or 'vector')"
        )
    if not isinstance(condition, Mapping):
        return Condition(field, "eq", (_scalar(field, condition),))
    if len(condition) != 1 or next(iter(condition)) not in ("in", "range"):
        operators = ", ".join(_shown(str(key)) for key in list(condition)[:3]) or "none"
        raise ValueError(
            f"filter field {_shown(field)}: a condition with operators {operators} is not a condition; pass a"
            ' value, {"in": [values]} or {"range": [lo, hi]}'
        )
    operator, argument = next(iter(condition.items()))
    if not isinstance(argument, list | tuple):
        raise ValueError(
            f'filter field {_shown(field)}: "{operator}" takes a list, got {type(argument).__name__}'
        )
    if operator == "in" and len(argument) > MAX_IN_VALUES:
        raise ValueError(
            f'filter field {_shown(field)}: "in" lists {len(argument)} values, beyond the limit of {MAX_IN_VALUES}'
            " (MAX_IN_VALUES) for every backend; pass at most that many, or split the search"
        )
    values = tuple(_scalar(field, value) for value in argument)
    if operator == "in":
        return Condition(field, "in", _one_type(field, values))
    return Condition(field, "range", _bounds(field, values))


def _scalar(field: str, value: Any) -> Scalar:
    """``value`` when both backends can compare it: a bool, a valid Unicode str, an int in :data:`INT64_RANGE`,
    a finite float."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"filter field {_shown(field)}: the string holds a lone surrogate, not a character; pass valid "
                "Unicode"
            ) from None
        return value
    if isinstance(value, int):
        low, high = INT64_RANGE
        if not low <= value <= high:
            raise ValueError(
                f"filter field {_shown(field)}: {str(value)[:SHOWN]} lies outside [{low}, {high}] (int64 less "
                "-2**63, which Milvus cannot read); pass an integer in that range"
            )
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, Mapping | list | tuple):
        raise ValueError(
            f"filter field {_shown(field)}: a {type(value).__name__} where a value belongs is not a str, int, float"
            f" or bool; a filter nests at most {MAX_DEPTH} levels (MAX_DEPTH), "
            '{field: value | {"in": [values]} | {"range": [lo, hi]}}'
        )
    raise ValueError(
        f"filter field {_shown(field)}: {str(value)[:SHOWN]!r} is not a str, int, float or bool (finite); pass one"
        " of those"
    )


def _one_type(field: str, values: tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    if not values:
        raise ValueError(f'filter field {_shown(field)}: "in" needs at least one value')
    kinds = {str(_kind(v)) for v in values}
    if len(kinds) > 1:
        raise ValueError(
            f'filter field {_shown(field)}: "in" mixes {", ".join(sorted(kinds))}; pass values of one type'
        )
    floats = any(isinstance(v, float) for v in values)
    inexact = next(
        (v for v in values if isinstance(v, int) and not isinstance(v, bool) and abs(v) > EXACT_FLOAT_INT),
        None,
    )
    if floats and inexact is not None:
        raise ValueError(
            f'filter field {_shown(field)}: "in" mixes floats with the integer {inexact}, beyond 2**53, which the'
            " float list Milvus takes cannot hold exactly; pass integers only, or split the list"
        )
    return values


def _bounds(field: str, values: tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    if len(values) == 2:
        low, high = values
        if _is_number(low) and _is_number(high) and low <= high:
            return values
    raise ValueError(f'filter field {_shown(field)}: "range" takes two numbers [lo, hi] with lo <= hi')


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str | None:
    """How both backends compare ``value``: "bool" and "str" only with their kind, "number" by value (Python
    compares an int with a float exactly); None for a value of another type (a list, a dict, None), which
    matches nothing."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "str"
    return "number" if _is_number(value) else None


def _key(value: Any, as_float: bool) -> Key | None:
    """``value`` with its :func:`_kind`, as an ``in`` list's set holds it (a number as a float when ``as_float``:
    :func:`_compared`); None when it has none."""
    kind = _kind(value)
    if kind is None:
        return None
    if kind == "number" and as_float:
        number = _compared(value, 0.0)
        return None if number is None else ("number", number)
    return (kind, value)


def _compared(value: Any, literal: Scalar) -> int | float | None:
    """The number ``value`` as Milvus compares it with the number ``literal``: itself against an integer (Python
    compares an int with an int, or a float, exactly), as a float against a float (an int beyond 2**53 rounded, as
    Milvus converts it); None when ``value`` is not a number, or an int beyond a float's range."""
    if not _is_number(value) or not _is_number(literal):
        return None
    if not isinstance(literal, float):
        return value
    try:
        return float(value)
    except OverflowError:
        return None


def _one_literal_type(values: tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    """The numbers of an ``in`` list all as floats when they mix ints and floats (Milvus takes one literal type
    per list, and compares a float literal with an int field by value; :func:`_one_type` keeps those ints within
    2**53, so each float is exact)."""
    if any(isinstance(v, float) for v in values) and all(_is_number(v) for v in values):
        return tuple(float(v) for v in values)
    return values


def _literal(value: Scalar) -> str:
    """A Milvus expression literal: strings JSON-quoted with their characters as themselves (Milvus cannot read
    the surrogate-pair escape of a character beyond the BMP; the escapes JSON still writes, such as \\n, are
    Go's too), bools lower case, numbers as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _shown(text: str) -> str:
    """``text`` quoted, cut to :data:`SHOWN` characters (marked ``...``)."""
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")
