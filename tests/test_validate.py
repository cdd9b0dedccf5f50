"""The one place of argument checks: constraints that name the argument, its value and the fix.

If these fail, a check accepts a value the rest of crl rejects (a bool as a count, NaN as a temperature), or a
message lost the argument's name or what to pass instead.
"""

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from crl._validate import (
    LEVEL,
    TAU,
    ArgumentError,
    FiniteArray,
    Floats,
    Integer,
    Integers,
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


DTYPES = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
)


def _holds_integers(dtype: torch.dtype) -> bool:
    """Whether torch itself has integer limits for ``dtype`` (not for bool, floating or complex dtypes)."""
    try:
        torch.iinfo(dtype)
    except TypeError:
        return False
    return True


def _taken(dtype: torch.dtype, *, int64: bool, allow_bool: bool) -> bool:
    """The dtypes an integer constraint must take: int64 alone, or every integer dtype (and bool when allowed)."""
    if int64:
        return dtype == torch.int64
    return _holds_integers(dtype) or (allow_bool and dtype == torch.bool)


SHAPES = st.lists(st.integers(0, 3), max_size=3).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    shape=SHAPES,
    wanted=st.none() | SHAPES,
    int64=st.booleans(),
    allow_bool=st.booleans(),
)
def test_integers_take_exactly_the_integer_tensors_of_their_shape(
    dtype: torch.dtype, shape: tuple[int, ...], wanted: tuple[int, ...] | None, int64: bool, allow_bool: bool
) -> None:
    """If this fails, an integer check lets floats, complex numbers or (unasked) bools through as ids, refuses
    an integer dtype, or a refusal does not name the argument and what to pass."""
    value = torch.zeros(shape, dtype=dtype)
    dtype_taken = _taken(dtype, int64=int64, allow_bool=allow_bool)
    constraint = Integers(wanted, int64=int64, allow_bool=allow_bool)
    if dtype_taken and wanted in (None, shape):
        assert check("ids", value, constraint) is value
    elif not dtype_taken:
        with pytest.raises(
            ArgumentError, match=rf"^ids has dtype {dtype}; pass an .* tensor \(e\.g\. ids\.long\(\)\)"
        ):
            check("ids", value, constraint)
    else:
        with pytest.raises(ArgumentError, match=rf"^ids has shape {re.escape(str(shape))}; expected "):
            check("ids", value, constraint)


@pytest.mark.parametrize(
    ("value", "constraint", "pattern"),
    [
        (
            [0, 1],
            Integers(),
            r"ids must be an integer torch\.Tensor, got list; "
            r"convert it with torch\.as_tensor\(ids, dtype=torch\.long\)",
        ),
        (
            torch.ones(2),
            Integers(),
            r"ids has dtype torch\.float32; pass an integer tensor \(e\.g\. ids\.long\(\)\)",
        ),
        (torch.ones(2, dtype=torch.bool), Integers(), r"ids has dtype torch\.bool; pass an integer tensor"),
        (
            torch.ones(2, dtype=torch.int32),
            Integers(int64=True),
            r"ids has dtype torch\.int32; pass an int64 tensor",
        ),
        (
            torch.ones(3, dtype=torch.long),
            Integers((4,), what="one id per anchor"),
            r"ids has shape \(3,\); expected \(4,\) \(one id per anchor\)\.",
        ),
    ],
)
def test_integers_name_the_tensor_and_the_fix(value: object, constraint: Integers, pattern: str) -> None:
    for catch in (ValueError, TypeError):
        with pytest.raises(catch, match=pattern):
            check("ids", value, constraint)
