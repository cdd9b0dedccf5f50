"""``crl train CONFIG --out DIR --set a.b=v``: the overrides reach the run, and its config.toml records them.

If these fail, a command-line override would be ignored (the run trains with the file's value), written to the
wrong place, or let a wrongly typed value past the strict config.
"""

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from crl.commands import app
from crl.commands.train import command_line_overrides
from crl.train.config import ConfigError, load_config

CONFIG = """
[data]
source = "synthetic"
n_train = 64
dim = 3
batch_size = 16
[model]
encoder = "mlp"
embedding_dim = 4
hidden = []
[optim]
total_steps = 3
warmup_steps = 1
[run]
name = "tiny"
out_dir = "{out}"
progress = false
tensorboard = false
"""


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG.format(out=tmp_path / "from_file"), encoding="utf-8")
    return path


def test_out_and_set_reach_the_run_and_its_saved_config(tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    args = ["train", str(_config(tmp_path)), "--out", str(out), "--set", "optim.lr=0.002"]
    result = CliRunner().invoke(app, [*args, "--set", "loss.tau=0.2"])
    assert result.exit_code == 0, result.output
    saved = tomllib.loads((out / "tiny" / "config.toml").read_text(encoding="utf-8"))
    assert saved["optim"]["lr"] == 0.002 and saved["loss"]["tau"] == 0.2
    assert saved["run"]["out_dir"] == str(out)
    assert not (tmp_path / "from_file").exists(), "--out must replace the file's out_dir"


def test_a_set_after_out_wins() -> None:
    overrides = command_line_overrides(Path("a"), ["run.out_dir=b"])
    assert overrides == ['run.out_dir="a"', "run.out_dir=b"]


def test_a_bad_override_names_the_field(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", str(_config(tmp_path)), "--set", "optim.lr=fast"])
    assert result.exit_code == 2
    assert "[optim] lr = 'fast'" in result.output and "with --set optim.lr=fast" in result.output


def test_an_unknown_field_is_named(tmp_path: Path) -> None:
    try:
        load_config(_config(tmp_path), ["loss.n_negativs=3"])
    except ConfigError as error:
        assert "n_negativs" in str(error) and "not a known field" in str(error)
    else:
        raise AssertionError("an unknown override field must be refused")


def test_a_non_utf8_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('[run]\nname = "caf\xe9"\n'.encode("latin-1"))
    result = CliRunner().invoke(app, ["train", str(path)])
    assert result.exit_code == 2 and str(path) in result.output and "UTF-8" in result.output
