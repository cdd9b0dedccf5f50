"""Your own data, end to end: an .npz made with numpy -> crl train -> crl eval -> crl embed.

If these fail, a user with their own paired arrays cannot train on them, evaluate the run (eval would read
another data set's held-out split) or get vectors out of the trained model.
"""

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from crl.commands import app

N, DIM_X, DIM_Y = 240, 8, 6


def _write_pairs(path: Path, *, labels: bool = True, dim_x: int = DIM_X, seed: int = 0) -> None:
    """n pairs: y is a noisy linear image of x; labels are the sign pattern of x's first two coordinates."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, dim_x)).astype(np.float32)
    y = (x[:, :DIM_Y] + 0.1 * rng.normal(size=(N, DIM_Y))).astype(np.float32)
    arrays = {"x": x, "y": y}
    if labels:
        arrays["label"] = ((x[:, 0] > 0) * 2 + (x[:, 1] > 0)).astype(np.int64)
    np.savez(path, **arrays)


def _write_config(tmp_path: Path, *, labels: bool = True, name: str = "mine") -> Path:
    labels_line = 'labels_key = "label"\n' if labels else ""
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'[data]\nsource = "arrays"\npath = "{tmp_path / "pairs.npz"}"\n{labels_line}batch_size = 32\n'
        '[model]\nencoder = "mlp"\nhidden = [32]\nembedding_dim = 8\ntowers = "two"\n'
        "[optim]\nwarmup_steps = 2\ntotal_steps = 12\n"
        f'[run]\nname = "{name}"\nout_dir = "{tmp_path / "runs"}"\ncheckpoint_every = 6\nlog_every = 6\n'
        "num_threads = 1\nprogress = false\ntensorboard = false\n",
        encoding="utf-8",
    )
    return config


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_train_eval_embed_on_an_npz(tmp_path: Path) -> None:
    """The run records the arrays source; eval uses their held-out tenth and labels and calls their baseline the
    raw inputs (not pixels: they are not images); embed writes (N, d)."""
    _write_pairs(tmp_path / "pairs.npz")
    config = _write_config(tmp_path)
    _invoke("train", str(config))
    run_dir = tmp_path / "runs" / "mine"
    saved = tomllib.loads((run_dir / "config.toml").read_text(encoding="utf-8"))
    assert saved["data"]["source"] == "arrays" and saved["data"]["path"] == str(tmp_path / "pairs.npz")

    printed = _invoke("eval", str(run_dir), "--device", "cpu")
    written = json.loads((run_dir / "eval.json").read_text(encoding="utf-8"))
    assert written["n_queries"] == written["gallery_size"] == N // 10
    rows = [line for line in printed.splitlines() if not line.startswith("note:")]
    assert any("class retrieval accuracy@1" in row for row in rows)
    assert not any("class retrieval recall@" in row for row in rows)
    assert "class_recall@10" in written and "recall@k <= k /" in printed
    assert written["class_definitions"].startswith("sentence-transformers' InformationRetrievalEvaluator")
    assert 0.0 <= written["knn_accuracy"] <= 1.0 and 0.0 <= written["probe_accuracy"] <= 1.0
    assert "pixels" not in printed, "plain arrays are not images: their baseline is the raw inputs"
    assert "vs raw inputs: paired difference" in printed and "kNN accuracy, raw inputs" in printed

    out = tmp_path / "vectors.npy"
    embedding = _invoke(
        "embed",
        str(run_dir),
        "--data",
        str(tmp_path / "pairs.npz"),
        "--key",
        "y",
        "--tower",
        "positive",
        "--out",
        str(out),
        "--device",
        "cpu",
    )
    vectors = np.load(out)
    assert vectors.shape == (N, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert f"crl: embedding {N:,} inputs with the positive tower" in embedding, "embed names its stage"
    indexing = _invoke(
        "index", "build", str(run_dir), "--data", str(tmp_path / "pairs.npz"), "--out", str(tmp_path / "idx")
    )
    assert f"crl: embedding {N:,} inputs with the anchor tower, then indexing them" in indexing


def test_eval_without_labels_skips_knn_with_a_note(tmp_path: Path) -> None:
    _write_pairs(tmp_path / "pairs.npz", labels=False)
    _invoke("train", str(_write_config(tmp_path, labels=False)))
    output = _invoke("eval", str(tmp_path / "runs" / "mine"), "--device", "cpu")
    assert "note: kNN and linear-probe accuracy skipped" in output and "labels_key" in output
    written = json.loads((tmp_path / "runs" / "mine" / "eval.json").read_text(encoding="utf-8"))
    assert written["knn_accuracy"] is None and written["probe_accuracy"] is None


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--key", "z"), ["--key 'z'", "holds ['x', 'y']"]),
        (("--key", "y"), ["(N, 8)", "--tower"]),
        (("--tower", "middle"), ["--tower 'middle'", "anchor"]),
    ],
)
def test_embed_errors_name_the_fix(tmp_path: Path, args: tuple[str, ...], needles: list[str]) -> None:
    _write_pairs(tmp_path / "pairs.npz", labels=False)
    _invoke("train", str(_write_config(tmp_path, labels=False)))
    result = CliRunner().invoke(
        app,
        [
            "embed",
            str(tmp_path / "runs" / "mine"),
            "--data",
            str(tmp_path / "pairs.npz"),
            "--out",
            str(tmp_path / "v.npy"),
            "--device",
            "cpu",
            *args,
        ],
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output
