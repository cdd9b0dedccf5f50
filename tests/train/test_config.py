"""The TOML config: every field documented and defaulted, errors that name the field, value and what is allowed."""

from pathlib import Path

import pytest

from crl.train.config import ConfigError, TrainConfig, config_to_toml, load_config, parse_config

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "configs").glob("*.toml")) + sorted(
    (Path(__file__).parent / "configs").glob("*.toml")
)


def test_every_field_has_a_default_and_a_description() -> None:
    """Configs are documented by their models: a field without a description or default is a defect."""
    TrainConfig()
    for section in TrainConfig.model_fields.values():
        model = section.annotation
        assert model is not None
        for name, field in model.model_fields.items():
            assert field.description, f"[{model.__name__}] {name} has no description"
            assert not field.is_required(), f"[{model.__name__}] {name} has no default"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"loss": {"form": "nce"}}, ["[loss] form", "'nce'", "'infonce', 'dcl', 'gcl'"]),
        ({"loss": {"frm": "dcl"}}, ["[loss] frm", "not a known field", "form, symmetric"]),
        ({"optim": {"lr": -1.0}}, ["[optim] lr", "-1.0", "greater than 0"]),
        (
            {"data": {"source": "cifar"}},
            ["[data] source", "'cifar'", "'fashion_mnist', 'digits', 'synthetic'"],
        ),
        ({"run": {"seed": "zero"}}, ["[run] seed", "'zero'", "integer"]),
        ({"modle": {}}, ["modle", "not a known field", "data, model, loss"]),
        ({"loss": {"negatives": "queue"}}, ["[loss]", "n_negatives (m) >= 1"]),
        ({"loss": {"n_negatives": 5}}, ["[loss]", "n_negatives = 5", "in_batch"]),
        ({"loss": {"negatives": "independent_pool", "n_negatives": 4, "symmetric": True}}, ["symmetric"]),
        ({"optim": {"warmup_steps": 20, "total_steps": 10}}, ["[optim]", "warmup_steps = 20"]),
        ({"data": {"source": "synthetic"}}, ["[data]", "n_train"]),
    ],
)
def test_bad_fields_are_named_with_value_and_what_is_allowed(document: dict, expected: list[str]) -> None:
    """A user must see which field is wrong, the value given and the allowed values, not a pydantic dump."""
    with pytest.raises(ConfigError) as caught:
        parse_config(document, source="x.toml")
    message = str(caught.value)
    assert message.startswith("x.toml: ")
    for fragment in expected:
        assert fragment in message


def test_all_errors_are_reported_at_once() -> None:
    """Two bad fields give two lines, so a user fixes a config in one pass."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"loss": {"form": "x"}, "optim": {"lr": 0}})
    assert "[loss] form" in str(caught.value) and "[optim] lr" in str(caught.value)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_configs_load_and_survive_a_toml_round_trip(path: Path, tmp_path: Path) -> None:
    """Shipped configs must validate; the run folder's config.toml must read back to the same config."""
    config = load_config(path)
    copy = tmp_path / "config.toml"
    copy.write_text(config_to_toml(config))
    assert load_config(copy) == config


def test_unreadable_files_raise_config_errors(tmp_path: Path) -> None:
    """A missing file or broken TOML must be a ConfigError naming the file, not a raw traceback."""
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[loss\nform = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken)


def test_regime_follows_the_sampler() -> None:
    """independent_pool is SCRL (independent regime); every other sampler is SSCRL (shared)."""
    assert (
        parse_config({"loss": {"negatives": "independent_pool", "n_negatives": 3}}).loss.regime
        == "independent"
    )
    for negatives, m in (("in_batch", 0), ("shared_pool", 3), ("queue", 3)):
        assert parse_config({"loss": {"negatives": negatives, "n_negatives": m}}).loss.regime == "shared"


def test_crl_train_reports_a_bad_config_and_exits_2(tmp_path: Path) -> None:
    """`crl train BAD.toml` must print the named field and value and exit with status 2, before any training."""
    from typer.testing import CliRunner

    from crl.commands import app

    bad = tmp_path / "bad.toml"
    bad.write_text('[loss]\nform = "nce"\n')
    result = CliRunner().invoke(app, ["train", str(bad)])
    assert result.exit_code == 2
    assert "[loss] form = 'nce' is not allowed" in result.output
