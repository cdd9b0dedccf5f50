"""The CNN's representation h (before the projection head), its options, and crl eval's backbone and pixel rows."""

import json
from pathlib import Path

import pytest
import torch

from crl.commands.evaluate import eval_command
from crl.metrics.class_report import centred_pixels
from crl.metrics.classification import knn_accuracy
from crl.models import SmallCNN
from crl.train.data import labelled_inputs
from tests.train.helpers import fit, tiny_config


@pytest.mark.parametrize(("pool", "batch_norm", "size"), [("flatten", False, 16 * 7 * 7), ("mean", True, 16)])
def test_cnn_embedding_is_the_head_of_its_representation(pool: str, batch_norm: bool, size: int) -> None:
    """z = head(h) with h of size C*H*W (flatten) or C (global average pooling)."""
    cnn = SmallCNN(
        (28, 28), 8, (8, 16), 32, batch_norm=batch_norm, pool=pool, generator=torch.Generator().manual_seed(0)
    ).eval()
    images = torch.rand(5, 28, 28, generator=torch.Generator().manual_seed(1))
    h = cnn.representation(images)
    assert h.shape == (5, size)
    assert torch.equal(cnn(images), cnn.head(h))
    assert any(isinstance(layer, torch.nn.BatchNorm2d) for layer in cnn.modules()) == batch_norm


def test_cnn_keeps_the_parameter_names_of_older_checkpoints() -> None:
    cnn = SmallCNN((28, 28), 8, (8,), 32, generator=torch.Generator().manual_seed(0))
    assert sorted(cnn.state_dict()) == [
        "features.0.bias",
        "features.0.weight",
        "head.1.bias",
        "head.1.weight",
        "head.3.bias",
        "head.3.weight",
    ]


def test_cnn_refuses_an_unknown_pool() -> None:
    with pytest.raises(ValueError, match="pool = 'max'"):
        SmallCNN((28, 28), 8, pool="max", generator=torch.Generator())  # type: ignore[arg-type]


def test_eval_reports_backbone_and_pixel_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """crl eval writes kNN/probe of the embedding, the backbone h and raw centred pixels, with intervals; its
    table, printed to a pipe, is not cut at 80 columns, and each row's word says what its paired CI says."""
    config = tiny_config(
        tmp_path, "backbone", optim={"total_steps": 4, "warmup_steps": 1}, eval={"probe_max_iter": 50}
    )
    fit(config)
    capsys.readouterr()
    assert eval_command(config.run_dir, device="cpu") == 0
    written = json.loads((config.run_dir / "eval.json").read_text())
    printed = capsys.readouterr().out
    assert "…" not in printed
    for features in ("embedding", "backbone"):
        for method, label in (("knn", "kNN accuracy"), ("probe", "linear-probe accuracy")):
            low, high = written[f"{features}_{method}_minus_pixels_ci"]
            word = "above pixels" if low > 0 else "below pixels" if high < 0 else "no difference resolved"
            line = next(line for line in printed.splitlines() if f"{label}, {features} " in line)
            assert f"{low:+.4f}, {high:+.4f}]: {word}" in line
    for name in (
        "embedding_knn",
        "embedding_probe",
        "backbone_knn",
        "backbone_probe",
        "pixels_knn",
        "pixels_probe",
    ):
        low, high = written[f"{name}_ci"]
        assert low <= written[f"{name}_accuracy"] <= high
    assert written["embedding_knn_accuracy"] == written["knn_accuracy"]
    assert "pixels_knn_minus_pixels" not in written
    difference = written["backbone_knn_accuracy"] - written["pixels_knn_accuracy"]
    assert written["backbone_knn_minus_pixels"] == pytest.approx(difference)
    train, test = labelled_inputs(config.data, "train"), labelled_inputs(config.data, "test")
    assert train is not None and test is not None
    pixels = centred_pixels(train.inputs, test.inputs)
    expected = knn_accuracy(pixels[0], train.labels, pixels[1], test.labels, k=20, n_classes=10)
    assert written["pixels_knn_accuracy"] == pytest.approx(expected)
