"""Run folders written before [data] and [model] became kinds: their flat config.toml and checkpoint JSON load.

Before the change every run folder's config.toml, and the config inside every checkpoint's JSON, carried every
field of the flat [data] and [model] sections (root and kappa alike, cnn_hidden). If these tests fail, an
existing run folder can no longer be resumed or evaluated.
"""

import json
import tomllib
from pathlib import Path

import pytest
import torch

from crl.serving.evaluate import load_trained_model
from crl.train.config import (
    CnnModel,
    ConfigError,
    DigitsData,
    MlpModel,
    config_to_toml,
    load_config,
    parse_config,
)
from tests.train.helpers import fit, tiny_config

# As the flat config_to_toml wrote tests/train/configs/tiny_digits.toml's [data] and [model].
FLAT_SECTIONS = """[data]
source = "digits"
pairs = "halves"
root = "/usr/share/datasets/fashion-mnist"
n_train = 0
batch_size = 128
crop_scale_min = 0.6
max_shift = 0
flip_p = 0.5
erase_p = 0.25
noise_std = 0.05
truth = "vmf"
dim = 8
kappa = 10.0
rho = 0.8
n_heldout = 10000

[model]
encoder = "mlp"
embedding_dim = 16
hidden = [384, 384]
channels = [32, 64]
cnn_hidden = 128
towers = "two"
normalize = true
"""


def _flat_config_toml(new_toml: str) -> str:
    """A flat-layout config.toml: the flat [data]/[model] above, the other sections as they are now."""
    rest = new_toml[new_toml.index("[loss]") :]
    return f"{FLAT_SECTIONS}\n{rest}"


def test_a_flat_config_toml_loads_as_its_kinds(tmp_path: Path) -> None:
    """The flat sections become DigitsData and MlpModel with the same values; other kinds' fields are dropped."""
    config = tiny_config(tmp_path, "flat")
    path = tmp_path / "config.toml"
    path.write_text(_flat_config_toml(config_to_toml(config)), encoding="utf-8")
    loaded = load_config(path)
    assert loaded == config
    assert isinstance(loaded.data, DigitsData) and isinstance(loaded.model, MlpModel)


def test_a_flat_cnn_section_keeps_its_fully_connected_width() -> None:
    """The flat [model] cnn_hidden is the CNN kind's hidden: a migrated CNN must keep its width."""
    flat = tomllib.loads(FLAT_SECTIONS.replace('encoder = "mlp"', 'encoder = "cnn"').replace("= 128", "= 96"))
    model = parse_config({"model": flat["model"]}).model
    assert isinstance(model, CnnModel) and model.hidden == 96 and model.channels == [32, 64]


def test_a_hand_written_section_with_a_flat_field_is_still_an_error() -> None:
    """Only complete flat sections (run folders) migrate; a stray cnn_hidden in a user's config is named."""
    with pytest.raises(ConfigError, match=r"\[model\] cnn_hidden = 64 is not a known field"):
        parse_config({"model": {"encoder": "cnn", "cnn_hidden": 64}})


def test_an_old_run_folder_resumes_and_evaluates(tmp_path: Path) -> None:
    """A finished run whose config.toml and checkpoint JSON are flat must resume (as complete) and evaluate.

    Such a checkpoint was written before the state checksum, so its JSON has none (and loads with a warning). It
    was also written before [data] validation, so it trained on every image: it reads as validation = 0, resumes
    with that, and a config with today's default is refused with the fix.
    """
    config = tiny_config(tmp_path, "old", optim={"total_steps": 6, "warmup_steps": 2}, data={"validation": 0})
    result = fit(config)
    (config.run_dir / "config.toml").write_text(_flat_config_toml(config_to_toml(config)), encoding="utf-8")
    document_path = result.checkpoint.with_suffix(".json")
    document = json.loads(document_path.read_text(encoding="utf-8"))
    document["config"].update(tomllib.loads(FLAT_SECTIONS))
    del document["state_sha256"]
    document_path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.warns(UserWarning, match="carries no state checksum"):
        again = fit(config)
    assert again.resumed_from == 6 and again.checkpoint == result.checkpoint
    with pytest.warns(UserWarning, match="carries no state checksum"):
        model, saved, step = load_trained_model(result.checkpoint, torch.device("cpu"))
    assert saved == config and step == 6
    assert sum(p.numel() for p in model.parameters()) > 0
    with pytest.raises(
        ConfigError,
        match=r"(?s)\[data\] validation: 0 in the run folder, 'auto' now.*--set data\.validation=0",
    ):
        fit(config.model_copy(update={"data": config.data.model_copy(update={"validation": "auto"})}))
