"""The TOML config: every field documented and defaulted, errors that name the field, value and what is allowed."""

from pathlib import Path

import pytest

from crl.commands.config import section_variants
from crl.train.config import (
    CnnModel,
    ConfigError,
    DigitsData,
    FashionMnistData,
    MlpModel,
    SyntheticData,
    TrainConfig,
    config_to_toml,
    load_config,
    parse_config,
    resume_differences,
)

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "configs").glob("*.toml")) + sorted(
    (Path(__file__).parent / "configs").glob("*.toml")
)


def test_every_field_has_a_default_and_a_description() -> None:
    """Configs are documented by their models: a field without a description or default is a defect."""
    TrainConfig()
    for section in TrainConfig.model_fields.values():
        for model in section_variants(section):
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
        (
            {"data": {"source": "digits", "kappa": 3.0}},
            ["[data] kappa", "not a known field", "source = 'digits'"],
        ),
        ({"model": {"encoder": "mlp", "channels": [4]}}, ["[model] channels", "encoder = 'mlp'", "hidden"]),
        ({"model": {"encoder": "rnn"}}, ["[model] encoder", "'rnn'", "'mlp', 'cnn', 'bag'"]),
        ({"model": {"encoder": "cnn", "hidden": 0}}, ["[model] hidden", "greater than or equal to 1"]),
        ({"data": {"source": "synthetic", "n_train": 8, "dim": 1}}, ["[data] dim = 1", "greater than"]),
        (
            {"data": {"source": "synthetic", "n_train": 8, "kappa": 1e12}},
            ["[data] kappa = 1000000000000.0", "less than or equal to 10000000000"],
        ),
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


def test_each_kind_holds_only_its_own_fields() -> None:
    """[data] source and [model] encoder pick one model each; a section without its tag is of the default kind."""
    assert isinstance(TrainConfig().data, FashionMnistData) and isinstance(TrainConfig().model, CnnModel)
    assert isinstance(parse_config({"data": {"batch_size": 8}}).data, FashionMnistData)
    assert isinstance(parse_config({"data": {"source": "digits"}}).data, DigitsData)
    synthetic = parse_config({"data": {"source": "synthetic", "n_train": 64, "kappa": 2.0}}).data
    assert isinstance(synthetic, SyntheticData) and synthetic.kappa == 2.0
    assert not hasattr(synthetic, "crop_scale_min") and not hasattr(DigitsData(), "root")
    mlp = parse_config({"model": {"encoder": "mlp", "hidden": [8]}}).model
    assert isinstance(mlp, MlpModel) and mlp.hidden == [8] and not hasattr(mlp, "channels")


def test_resume_differences_skip_what_is_declared_resumable() -> None:
    """Only RESUMABLE fields may differ on resume; another kind of [data] shows every field it changes."""
    base = parse_config({})
    moved = parse_config({"run": {"name": "elsewhere", "num_threads": 2}, "eval": {"knn_k": 3}})
    assert resume_differences(base, moved) == []
    assert resume_differences(base, parse_config({"run": {"seed": 1}})) == [
        "[run] seed: 0 in the run folder, 1 now"
    ]
    digits = parse_config({"data": {"source": "digits"}})
    assert resume_differences(base, digits) == [
        "[data] source: 'fashion_mnist' in the run folder, 'digits' now",
        "[data] root: '/usr/share/datasets/fashion-mnist' in the run folder, None now",
    ]
    assert "run.seed" not in TrainConfig.RESUMABLE and "eval" in TrainConfig.RESUMABLE
