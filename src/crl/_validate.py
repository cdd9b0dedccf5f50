"""Argument validation for every room of crl: small declarative constraints and one :func:`check`.

A public function states what each argument must be as a constraint, and checks it at the boundary::

    tau = check("tau", tau, TAU)
    chunk = check("chunk", chunk, Integer(1))
    form = check("form", form, OneOf(FORMS))
    x = check("anchors", x, Floats(ndim=2, min_rows=1, finite=True))
    ids = check("item_ids", ids, Integers((n,), int64=True))

(the idea of scikit-learn's declarative parameter constraints). A constraint returns the value as its caller
uses it (a ``float``, an ``int``, the tensor itself) or raises :class:`ArgumentError`, whose message names the
argument, shows its value and says what to pass instead. Each room keeps its domain checks (scores of shape
(n, m), ids distinct, a log-log fit's positive points) next to its code, written with these constraints.

Nothing here imports another part of crl, so every floor can use it.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

if typing.TYPE_CHECKING:
    import torch

T = TypeVar("T", covariant=True)

Closed = Literal["both", "left", "right", "neither"]


class ArgumentError(ValueError, TypeError):
    """A bad argument: both a ``ValueError`` and a ``TypeError``, so a caller that caught either before a check
    moved here still catches it (an argument of the wrong type was a ``TypeError`` in some rooms and a
    ``ValueError`` in others)."""


class Constraint(Protocol[T]):
    """What an argument must be: ``constraint(name, value)`` returns the value as its caller uses it, or raises
    :class:`ArgumentError` naming ``name``."""

    def __call__(self, name: str, value: Any) -> T: ...


def check(name: str, value: Any, constraint: Constraint[T]) -> T:
    """``value`` checked against ``constraint`` (and converted as the constraint returns it).

    Raises:
        ArgumentError: naming ``name``, the value and the fix, when ``value`` breaks the constraint.
    """
    return constraint(name, value)


def _format(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e15 else repr(bound)


@dataclass(frozen=True)
class Interval:
    """A finite real number between ``low`` and ``high``, returned as a ``float`` (a bool is not a number).

    Args:
        low, high: the bounds; None leaves that side open (the number must still be finite).
        closed: which bounds belong to the interval.
        example: appended to the message, e.g. ``", e.g. 0.95"``.
    """

    low: float | None = None
    high: float | None = None
    closed: Closed = "both"
    example: str = ""

    kind: ClassVar[str] = "a number"

    def describe(self) -> str:
        """The interval in words: "a finite number > 0", "a number in (0, 1)", "an integer >= 1"."""
        left = self.closed in ("both", "left")
        right = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            brackets = ("[" if left else "(", "]" if right else ")")
            return f"{self.kind} in {brackets[0]}{_format(self.low)}, {_format(self.high)}{brackets[1]}"
        kind = "a finite number" if self.kind == "a number" else self.kind
        if self.low is not None:
            return f"{kind} {'>=' if left else '>'} {_format(self.low)}"
        if self.high is not None:
            return f"{kind} {'<=' if right else '<'} {_format(self.high)}"
        return kind

    def contains(self, value: float) -> bool:
        """Whether the number ``value`` lies in the interval."""
        left = self.closed in ("both", "left")
        right = self.closed in ("both", "right")
        above = self.low is None or (value >= self.low if left else value > self.low)
        below = self.high is None or (value <= self.high if right else value < self.high)
        return above and below

    def _is_number(self, value: object) -> bool:
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | float):
            return False
        return math.isfinite(value)

    def _require(self, name: str, value: Any) -> None:
        if not self._is_number(value) or not self.contains(value):
            raise ArgumentError(f"{name}={value!r} must be {self.describe()}{self.example}.")

    def __call__(self, name: str, value: Any) -> float:
        self._require(name, value)
        return float(value)


@dataclass(frozen=True)
class Integer(Interval):
    """An integer (a Python or numpy integer, not a bool or a float) in the interval, returned as an ``int``."""

    kind: ClassVar[str] = "an integer"

    def _is_number(self, value: object) -> bool:
        return isinstance(value, int | np.integer) and not isinstance(value, bool)

    def __call__(self, name: str, value: Any) -> int:
        self._require(name, value)
        return int(value)


@dataclass(frozen=True)
class OneOf:
    """One of the strings ``choices`` (a bool, a number or another string is not)."""

    choices: Sequence[str]

    def __call__(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or value not in self.choices:
            listing = ", ".join(map(repr, self.choices))
            raise ArgumentError(f"{name}={value!r} is not known; use one of {listing}.")
        return value


@dataclass(frozen=True)
class Floats:
    """A floating ``torch.Tensor``, returned as it is (no copy).

    Args:
        ndim: the number of dimensions it must have (None: any).
        min_rows: the least length of its first dimension (1: not empty).
        last_dim: the length its last dimension must have (None: any).
        finite: no NaN and no infinity in it (read on any device: the caller decides whether that costs a
            host synchronisation it cannot afford).
        allow_minus_inf: with ``finite``, -inf is allowed (a log of a zero weight).
        fix: what the message of a non-finite entry says to do.
    """

    ndim: int | None = None
    min_rows: int = 0
    last_dim: int | None = None
    finite: bool = False
    allow_minus_inf: bool = False
    fix: str = "pass finite numbers"

    def __call__(self, name: str, value: Any) -> torch.Tensor:
        # torch deferred: crl's commands import this module through _vocab, and their --help must not load torch
        import torch

        if not isinstance(value, torch.Tensor):
            raise ArgumentError(
                f"{name} must be a torch.Tensor, got {type(value).__name__}; convert it with torch.as_tensor."
            )
        if not value.is_floating_point():
            raise ArgumentError(
                f"{name} has dtype {value.dtype}; pass a floating tensor (e.g. {name}.float())."
            )
        shape = tuple(value.shape)
        if self.ndim is not None and value.ndim != self.ndim:
            raise ArgumentError(f"{name} has shape {shape} ({value.ndim} dims); expected {self.ndim} dims.")
        if self.min_rows and (value.ndim == 0 or shape[0] < self.min_rows):
            need = "at least one" if self.min_rows == 1 else f"at least {self.min_rows}"
            raise ArgumentError(f"{name} has shape {shape}: it holds no rows; pass {need}.")
        if self.last_dim is not None and (value.ndim == 0 or shape[-1] != self.last_dim):
            raise ArgumentError(f"{name} has shape {shape}; it must have last dimension d={self.last_dim}.")
        if self.finite:
            bad = torch.isnan(value) | torch.isposinf(value)
            if not self.allow_minus_inf:
                bad = bad | torch.isneginf(value)
            if bool(bad.any()):
                raise ArgumentError(f"{name} contains {int(bad.sum())} NaN/Inf entries; {self.fix}.")
        return value


@dataclass(frozen=True)
class Integers:
    """An integer ``torch.Tensor`` (ids, labels, indices; not bool, floating or complex), returned as it is.

    Its values are not read, so the check costs no host synchronisation; bounds on them are the caller's domain
    check.

    Args:
        shape: the shape it must have (None: any).
        int64: only ``torch.int64`` will do (ids that index a state, labels kept as int64).
        allow_bool: a bool tensor counts as the integers 0 and 1.
        what: what its entries are, said when the shape is wrong (e.g. "one training-set id per anchor").
    """

    shape: tuple[int, ...] | None = None
    int64: bool = False
    allow_bool: bool = False
    what: str = ""

    def __call__(self, name: str, value: Any) -> torch.Tensor:
        # torch deferred: crl's commands import this module through _vocab, and their --help must not load torch
        import torch

        if not isinstance(value, torch.Tensor):
            raise ArgumentError(
                f"{name} must be an integer torch.Tensor, got {type(value).__name__}; convert it with "
                f"torch.as_tensor({name}, dtype=torch.long)."
            )
        dtype = value.dtype
        integer = not (dtype.is_floating_point or dtype.is_complex) and (
            dtype != torch.bool or self.allow_bool
        )
        if not (dtype == torch.int64 if self.int64 else integer):
            wanted = "an int64" if self.int64 else "an integer"
            raise ArgumentError(f"{name} has dtype {dtype}; pass {wanted} tensor (e.g. {name}.long()).")
        if self.shape is not None and tuple(value.shape) != self.shape:
            meaning = f" ({self.what})" if self.what else ""
            raise ArgumentError(f"{name} has shape {tuple(value.shape)}; expected {self.shape}{meaning}.")
        return value


@dataclass(frozen=True)
class FiniteArray:
    """Numbers as a flat (1-D) float64 numpy array, every entry finite."""

    def __call__(self, name: str, value: Any) -> NDArray[np.float64]:
        array = np.asarray(value, dtype=np.float64).reshape(-1)
        finite = np.isfinite(array)
        if not finite.all():
            raise ArgumentError(
                f"{name} contains {int(np.sum(~finite))} NaN/inf entries; pass finite numbers."
            )
        return array


@dataclass(frozen=True)
class Instance:
    """An instance of ``kind`` (called ``label`` in the message), returned as it is; ``fix`` says how to make one."""

    kind: type
    label: str
    fix: str

    def __call__(self, name: str, value: Any) -> Any:
        if not isinstance(value, self.kind):
            raise ArgumentError(f"{name} must be a {self.label}, got {type(value).__name__}; {self.fix}")
        return value


TAU = Interval(0.0, closed="neither", example=" (typical values: 0.01 to 1), e.g. tau=0.1")
"""A temperature tau: a finite real number > 0."""

LEVEL = Interval(0.0, 1.0, closed="neither", example=", e.g. 0.95")
"""A confidence level in (0, 1)."""

POSITIVE = Interval(0.0, closed="neither")
"""A finite real number > 0 (a concentration, a weight, a scale)."""

PROBABILITY = Interval(0.0, 1.0)
"""A probability in [0, 1]."""


def check_tau(tau: object) -> float:
    """``check("tau", tau, TAU)``: a finite number > 0, as a float."""
    return check("tau", tau, TAU)


def check_count(name: str, value: object, minimum: int) -> int:
    """``check(name, value, Integer(minimum))``: an integer >= ``minimum``."""
    return check(name, value, Integer(minimum))


def check_level(name: str, level: object) -> float:
    """``check(name, level, LEVEL)``: a confidence level in (0, 1), as a float."""
    return check(name, level, LEVEL)


def check_choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """``check(name, value, OneOf(allowed))``: one of the strings ``allowed``."""
    return check(name, value, OneOf(allowed))


def check_real(name: str, value: object) -> float:
    """``check(name, value, Interval())``: a finite real number, as a float."""
    return check(name, value, Interval())


def check_generator(generator: object) -> torch.Generator:
    """A ``torch.Generator``, the source of every random draw (crl never uses the global RNG)."""
    # torch deferred: crl's commands import this module through _vocab, and their --help must not load torch
    import torch

    return check(
        "generator",
        generator,
        Instance(torch.Generator, "torch.Generator", "pass torch.Generator().manual_seed(seed)"),
    )


def missing_file(path: Path) -> str:
    """Why ``path`` is not a regular file to read: it does not exist, is a folder, or is another kind of file (a
    FIFO, a socket, a device)."""
    if not path.exists():
        return "does not exist"
    if path.is_dir():
        return "is a folder, not a file"
    return "is not a regular file (a FIFO, socket or device)"
