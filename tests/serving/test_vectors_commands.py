"""crl embed, crl index build and crl eval use the vectors the run chose on its validation images (h or z), or
--vectors; they say which, and crl eval sets them beside the pixels and their PCA."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result
from typer.testing import CliRunner

from crl.commands import app
from crl.train.data import labelled_inputs
from crl.train.trainer import RunResult
from crl.train.vectors import VECTORS_FILE, read_choice
from tests.train.helpers import fit, tiny_config

DIMENSION = {"h": 384, "z": 16}
"""The tiny MLP's last hidden layer (h) and its embedding (z)."""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """A 10-step shared-tower run on the digits' halves (143 validation images held out)."""
    config = tiny_config(
        tmp_path_factory.mktemp("runs"),
        "shared",
        model={"towers": "shared"},
        optim={"total_steps": 10, "warmup_steps": 2},
        eval={"linear_probe": False},
    )
    return fit(config)


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(arg) for arg in args])


def _eval(run: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "eval.json"
    result = _invoke("eval", run, "--device", "cpu", "--out", out, *extra)
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert f"vectors {written['vectors']}" in result.output
    assert "vs pixels: paired difference" in result.stdout and "raw inputs" not in result.stdout  # images
    return written


def test_the_trainer_records_its_choice(shared: RunResult) -> None:
    choice = read_choice(shared.run_dir, shared.step)
    assert choice is not None and choice == shared.vectors
    assert (choice.n_queries, choice.n_gallery, choice.held_out) == (143, 1438 - 143, True)
    assert choice.vectors == max(choice.scores, key=lambda name: (choice.scores[name], name == "z"))


def test_eval_uses_the_recorded_vectors_beside_the_pixels_and_their_pca(
    shared: RunResult, tmp_path: Path
) -> None:
    chosen = shared.vectors
    assert chosen is not None
    written = _eval(shared.run_dir, tmp_path)
    assert written["vectors"] == chosen.vectors and written["vectors_reason"] == "recorded"
    assert written["vectors_choice"]["scores"] == chosen.scores
    baselines = written["baselines"]
    learned = baselines["learned"]
    assert learned["features"] == chosen.vectors and learned["dimension"] == DIMENSION[chosen.vectors]
    assert written["class_accuracy@1"] == learned["class_accuracy@1"]
    features = "backbone" if chosen.vectors == "h" else "embedding"
    assert written["knn_accuracy"] == learned["knn_accuracy"] == written[f"{features}_knn_accuracy"]
    assert baselines["pixels"]["knn_accuracy"] == written["pixels_knn_accuracy"]
    assert baselines["pca"]["dimension"] == min(DIMENSION[chosen.vectors], 32)
    for name in ("pixels", "pca"):
        for figure, (delta, low, high) in baselines[name]["learned_minus"].items():
            assert delta == pytest.approx(learned[figure] - baselines[name][figure], abs=1e-12)
            assert low <= delta <= high


def test_vectors_z_overrides_the_choice_everywhere(shared: RunResult, tmp_path: Path) -> None:
    written = _eval(shared.run_dir, tmp_path, "--vectors", "z")
    assert written["vectors"] == "z" and written["vectors_reason"] == "--vectors"
    assert (
        written["baselines"]["pca"]["dimension"] == 16 and written["baselines"]["pixels"]["dimension"] == 32
    )
    assert written["knn_accuracy"] == written["embedding_knn_accuracy"]
    data = labelled_inputs(_config(shared).data, "train")
    assert data is not None
    np.savez(tmp_path / "x.npz", x=data.inputs[:50].numpy())
    for vectors, extra in (("h", ["--vectors", "h"]), ("z", ["--vectors", "z"])):
        out = tmp_path / f"{vectors}.npy"
        result = _invoke("embed", shared.run_dir, "--data", tmp_path / "x.npz", "--out", out, *extra)
        assert result.exit_code == 0, result.output
        assert (
            np.load(out).shape == (50, DIMENSION[vectors])
            and f"vectors {vectors} (--vectors)" in result.output
        )
        index = tmp_path / f"idx-{vectors}"
        result = _invoke("index", "build", shared.run_dir, "--out", index, "--device", "cpu", *extra)
        assert result.exit_code == 0, result.output
        manifest = json.loads((index / "manifest.json").read_text())
        assert manifest["encoder"]["vectors"] == vectors and manifest["dimension"] == DIMENSION[vectors]


def _config(result: RunResult):  # type: ignore[no-untyped-def]
    from crl.train.config import load_config

    return load_config(result.run_dir / "config.toml")


def test_embed_and_index_default_to_the_recorded_choice(shared: RunResult, tmp_path: Path) -> None:
    assert shared.vectors is not None
    data = labelled_inputs(_config(shared).data, "test")
    assert data is not None
    np.savez(tmp_path / "x.npz", x=data.inputs[:20].numpy())
    result = _invoke("embed", shared.run_dir, "--data", tmp_path / "x.npz", "--out", tmp_path / "v.npy")
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "v.npy").shape == (20, DIMENSION[shared.vectors.vectors])
    assert f"vectors {shared.vectors.vectors}, the run's choice (recorded)" in result.output
    result = _invoke("index", "build", shared.run_dir, "--out", tmp_path / "idx", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert (
        json.loads((tmp_path / "idx" / "manifest.json").read_text())["encoder"]["vectors"]
        == shared.vectors.vectors
    )


def test_a_run_without_a_record_gets_the_choice_measured_and_recorded(
    shared: RunResult, tmp_path: Path
) -> None:
    copy = tmp_path / "old"
    shutil.copytree(shared.run_dir, copy)
    (copy / VECTORS_FILE).unlink()
    written = _eval(copy, tmp_path)
    assert written["vectors_reason"] == "measured now" and read_choice(copy, shared.step) == shared.vectors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "RUN", "--vectors", "x"], "--vectors 'x' is not known; use h (the backbone features) or z"),
        (
            ["embed", "RUN", "--vectors", "hz", "--data", "DATA", "--out", "v.npy"],
            "--vectors 'hz' is not known",
        ),
        (["index", "build", "RUN", "--vectors", "Z", "--out", "idx"], "--vectors 'Z' is not known"),
    ],
)
def test_a_bad_vectors_value_is_one_line(
    shared: RunResult, args: list[str], message: str, tmp_path: Path
) -> None:
    data = labelled_inputs(_config(shared).data, "test")
    assert data is not None
    np.savez(tmp_path / "x.npz", x=data.inputs[:5].numpy())
    named = {
        "RUN": shared.run_dir,
        "DATA": tmp_path / "x.npz",
        "v.npy": tmp_path / "v.npy",
        "idx": tmp_path / "i",
    }
    result = _invoke(*(named.get(arg, arg) for arg in args))
    lines = [
        line for line in result.output.splitlines() if not line.startswith("crl: ")
    ]  # stages begun before
    assert result.exit_code == 2 and message in result.output and len(lines) == 1, result.output


def test_two_towers_use_z_and_refuse_h(tmp_path: Path) -> None:
    config = tiny_config(
        tmp_path, "two", optim={"total_steps": 2, "warmup_steps": 1}, eval={"linear_probe": False}
    )
    result = fit(config)
    assert result.vectors is None and not (config.run_dir / VECTORS_FILE).exists()
    written = _eval(config.run_dir, tmp_path)
    assert written["vectors"] == "z" and written["vectors_reason"].startswith("z: this run has two towers")
    refused = _invoke("eval", config.run_dir, "--device", "cpu", "--vectors", "h")
    assert refused.exit_code == 2 and "--vectors h: this run has two towers" in refused.output
    assert refused.output.count("\n") == 1


def test_texts_take_no_vectors(tmp_path: Path) -> None:
    refused = _invoke("embed", "minilm", "--text", "a dog", "--out", tmp_path / "v.npy", "--vectors", "h")
    assert refused.exit_code == 2 and "--vectors h: texts are embedded by the text model" in refused.output
