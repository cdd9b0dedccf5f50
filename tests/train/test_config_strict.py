"""Config types are strict and finite: a quoted number or an infinite rate is an error that names the field.

If these fail, ``tau = "0.1"`` or ``lr = inf`` in a TOML file (or a --set) trains with a silently coerced or
meaningless value instead of stopping at the line that is wrong.
"""

import math
from pathlib import Path

import pytest

from crl.train.config import ConfigError, load_config, parse_config


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"loss": {"tau": "0.1"}}, ["[loss] tau = '0.1'", "valid number"]),
        ({"data": {"batch_size": "32"}}, ["[data] batch_size = '32'", "valid integer"]),
        ({"optim": {"total_steps": 10.0}}, ["[optim] total_steps = 10.0", "valid integer"]),
        ({"run": {"progress": 1}}, ["[run] progress = 1", "valid boolean"]),
        ({"run": {"name": 7}}, ["[run] name = 7", "valid string"]),
        ({"eval": {"ks": [1, "5"]}}, ["[eval] ks[1] = '5'", "valid integer"]),
        ({"optim": {"lr": math.inf}}, ["[optim] lr = inf", "finite number"]),
        ({"optim": {"weight_decay": math.inf}}, ["[optim] weight_decay = inf", "finite number"]),
        ({"loss": {"max_inverse_tau": math.inf}}, ["[loss] max_inverse_tau = inf", "finite number"]),
        ({"loss": {"tau": math.nan}}, ["[loss] tau = nan", "finite number"]),
        (
            {"data": {"source": "synthetic", "n_train": 8, "kappa": math.inf}},
            ["[data] kappa = inf", "finite"],
        ),
        ({"data": {"source": "arrays", "heldout_fraction": "0.1"}}, ["[data] heldout_fraction = '0.1'"]),
    ],
)
def test_strings_for_numbers_and_non_finite_floats_are_refused(document: dict, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(document, source="x.toml")
    for fragment in expected:
        assert fragment in str(caught.value)


def test_an_int_is_a_float_where_a_float_is_wanted() -> None:
    config = parse_config({"loss": {"tau": 1}, "optim": {"min_lr_ratio": 0}})
    assert isinstance(config.loss.tau, float) and config.loss.tau == 1.0 and config.optim.min_lr_ratio == 0.0


def test_a_quoted_override_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[loss]\ntau = 0.2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[loss\] tau = '0.1'"):
        load_config(path, ['loss.tau="0.1"'])
    with pytest.raises(ConfigError, match=r"\[optim\] lr = inf"):
        load_config(path, ["optim.lr=inf"])
