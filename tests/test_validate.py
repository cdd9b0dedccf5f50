"""The one place of argument checks: constraints that name the argument, its value and the fix.

If these fail, a check accepts a value the rest of crl rejects (a bool as a count, NaN as a temperature), or a
message lost the argument's name or what to pass instead.
"""

import math

import numpy as np
import pytest
import torch

from crl._validate import (
    LEVEL,
    TAU,
    ArgumentError,
    FiniteArray,
    Floats,
    Integer,
    Interval,
    OneOf,
    check,
    check_choice,
    check_count,
    check_level,
    check_real,
    check_tau,
)
from crl._vocab import FORMS


@pytest.mark.parametrize("bad", [0, -0.1, math.inf, math.nan, True, "0.1", None])
def test_check_tau_rejects_what_is_not_a_positive_finite_number(bad: object) -> None:
    with pytest.raises(ValueError, match="tau="):
        check_tau(bad)


def test_check_tau_returns_a_float() -> None:
    assert check_tau(1) == 1.0 and isinstance(check_tau(1), float)
    assert check("tau", 0.5, TAU) == 0.5


def test_check_count_and_choice_name_the_argument() -> None:
    with pytest.raises(ValueError, match="n_negatives=0"):
        check_count("n_negatives", 0, 1)
    with pytest.raises(ValueError, match="n_negatives=True"):
        check_count("n_negatives", True, 0)
    with pytest.raises(ValueError, match=r"form='nce'.*'infonce'"):
        check_choice("form", "nce", FORMS)
    with pytest.raises(ValueError, match=r"level=1\.0"):
        check_level("level", 1.0)


def test_an_argument_error_is_caught_as_value_error_and_as_type_error() -> None:
    """Rooms raised TypeError for a wrong type and ValueError for a wrong value (or ValueError for both):
    callers catching either keep catching it."""
    for catch in (ValueError, TypeError):
        with pytest.raises(catch):
            check_real("margin", "1.0")


@pytest.mark.parametrize(
    ("constraint", "text"),
    [
        (Interval(0.0, closed="neither"), "a finite number > 0"),
        (Interval(0.0), "a finite number >= 0"),
        (Interval(high=1.0, closed="neither"), "a finite number < 1"),
        (Interval(0.0, 1.0), "a number in [0, 1]"),
        (Interval(0.0, 1.0, closed="left"), "a number in [0, 1)"),
        (LEVEL, "a number in (0, 1)"),
        (Integer(1), "an integer >= 1"),
        (Integer(1, 5), "an integer in [1, 5]"),
        (Interval(), "a finite number"),
    ],
)
def test_an_interval_says_itself_in_words(constraint: Interval, text: str) -> None:
    assert constraint.describe() == text


@pytest.mark.parametrize(
    ("constraint", "inside", "outside"),
    [
        (Interval(0.0, 1.0, closed="both"), [0, 0.5, 1.0], [-1e-9, 1.5, math.nan]),
        (Interval(0.0, 1.0, closed="neither"), [1e-9, 0.5], [0.0, 1.0]),
        (Interval(0.0, 1.0, closed="left"), [0.0], [1.0]),
        (Interval(0.0, 1.0, closed="right"), [1.0], [0.0]),
        (Interval(), [-1e300, 0, np.float64(2.0)], [math.inf, -math.inf, math.nan, True, "1", None]),
        (Integer(1), [1, 10**30, np.int64(3)], [0, 1.0, True, np.float64(2.0), "2"]),
    ],
)
def test_an_interval_holds_what_it_says(
    constraint: Interval, inside: list[object], outside: list[object]
) -> None:
    for value in inside:
        assert check("x", value, constraint) == value
    for value in outside:
        with pytest.raises(ArgumentError, match=r"^x="):
            check("x", value, constraint)


def test_integers_come_back_as_int_and_reals_as_float() -> None:
    assert type(check("k", np.int64(3), Integer(1))) is int
    assert type(check("x", 3, Interval())) is float


def test_one_of_lists_the_choices_and_refuses_non_strings() -> None:
    assert check("kind", "b", OneOf(("a", "b"))) == "b"
    with pytest.raises(ValueError, match=r"kind=1 is not known; use one of 'a', 'b'\."):
        check("kind", 1, OneOf(("a", "b")))


@pytest.mark.parametrize(
    ("value", "constraint", "pattern"),
    [
        ([1.0], Floats(), r"x must be a torch\.Tensor, got list; convert it with torch\.as_tensor"),
        (
            torch.ones(2, dtype=torch.long),
            Floats(),
            r"x has dtype torch\.int64; pass a floating tensor .*x\.float\(\)",
        ),
        (torch.ones(2), Floats(ndim=2), r"x has shape \(2,\) \(1 dims\); expected 2 dims"),
        (torch.ones(0, 3), Floats(min_rows=1), r"x has shape \(0, 3\): it holds no rows; pass at least one"),
        (torch.ones(2, 3), Floats(last_dim=4), r"x has shape \(2, 3\); it must have last dimension d=4"),
        (torch.tensor([1.0, math.nan, math.inf]), Floats(finite=True), r"x contains 2 NaN/Inf entries; pass"),
        (
            torch.tensor([-math.inf, math.inf]),
            Floats(finite=True, allow_minus_inf=True),
            r"x contains 1 NaN/Inf",
        ),
    ],
)
def test_floats_name_the_tensor_and_the_fix(value: object, constraint: Floats, pattern: str) -> None:
    with pytest.raises(ArgumentError, match=pattern):
        check("x", value, constraint)


def test_floats_return_the_tensor_itself() -> None:
    x = torch.tensor([[0.0, -math.inf]])
    assert check("x", x, Floats(ndim=2, min_rows=1, last_dim=2, finite=True, allow_minus_inf=True)) is x


def test_finite_array_is_flat_float64_and_counts_the_bad_entries() -> None:
    out = check("y", [[1, 2], [3, 4]], FiniteArray())
    assert out.dtype == np.float64 and out.tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match=r"y contains 2 NaN/inf entries; pass finite numbers"):
        check("y", [1.0, math.nan, -math.inf], FiniteArray())
