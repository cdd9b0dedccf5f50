"""``--set section.field=value`` overrides: parsed as TOML literals, applied before validation.

If these fail, a command-line override would change the wrong field, change the file's value in place, or
smuggle a wrongly typed value past the strict config.
"""

import pytest

from crl.train.config.files import apply_overrides, parse_override


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("loss.n_negatives=1024", ("loss", "n_negatives"), 1024),
        ("optim.lr=1e-3", ("optim", "lr"), 1e-3),
        ("loss.symmetric=true", ("loss", "symmetric"), True),
        ('run.name="a b"', ("run", "name"), "a b"),
        ("run.name=sweep3", ("run", "name"), "sweep3"),
        ("eval.ks=[1, 5]", ("eval", "ks"), [1, 5]),
        (" loss.tau = 0.2 ", ("loss", "tau"), 0.2),
    ],
)
def test_values_are_toml_literals(text: str, path: tuple[str, ...], value: object) -> None:
    override = parse_override(text)
    assert override.path == path
    assert override.value == value and type(override.value) is type(value)


@pytest.mark.parametrize("text", ["loss.tau", "=3", "loss..tau=3", ".tau=1"])
def test_malformed_overrides_show_the_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"section\.field=value"):
        parse_override(text)


def test_overrides_apply_in_order_to_a_copy() -> None:
    data = {"loss": {"tau": 0.1}, "run": {"name": "x"}}
    result = apply_overrides(data, ["loss.tau=0.3", "optim.lr=0.01", "loss.tau=0.5"])
    assert result == {"loss": {"tau": 0.5}, "run": {"name": "x"}, "optim": {"lr": 0.01}}
    assert data == {"loss": {"tau": 0.1}, "run": {"name": "x"}}, "the parsed file must not change"


def test_a_path_through_a_value_is_refused() -> None:
    with pytest.raises(ValueError, match=r"loss\.tau is a value, not a section"):
        apply_overrides({"loss": {"tau": 0.1}}, ["loss.tau.x=1"])
