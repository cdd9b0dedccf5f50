"""The advisor's held-out error on locked features: which metric a locked config gets, what it refuses, and the
zero-shot baseline the cells are read against."""

import pytest
import torch

from crl.advise import heldout as heldout_module
from crl.advise.answer import Scope
from crl.advise.heldout import EvalSizes, check_metric, default_metric, identity_baseline
from crl.advise.session import AdviseOptions, model_covered, plan_session
from crl.train.config import parse_config
from crl.train.locked_heldout import HeldOut, identity_scores


def _locked(dataset: str, backbone: str, towers: str = "shared", **data: object):
    return parse_config(
        {
            "data": {"source": "locked", "dataset": dataset, "backbone": backbone, "n_train": 4000, **data},
            "model": {"encoder": "mlp", "hidden": [], "embedding_dim": 16, "towers": towers},
            "loss": {"negatives": "fixed_pool", "n_negatives": 40, "form": "gcl"},
        }
    )


def test_locked_texts_get_ndcg_error_and_images_two_view_recall() -> None:
    assert default_metric(_locked("wordnet", "minilm")) == "ndcg_error"
    assert default_metric(_locked("fashion_mnist", "pixels")) == "recall_error"
    with pytest.raises(ValueError, match=r"--metric 'knn_error' is not available.*use one of recall_error"):
        check_metric(_locked("fashion_mnist", "pixels"), "knn_error")
    with pytest.raises(ValueError, match="use one of ndcg_error"):
        check_metric(_locked("wordnet", "minilm"), "recall_error")


def test_a_locked_config_off_the_default_test_split_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"\[data\] split_seed = 3 changes it: remove split_seed"):
        default_metric(_locked("wordnet", "minilm", split_seed=3))


def test_the_advice_names_the_head_it_covers_and_whether_that_is_its_scope() -> None:
    scope = model_covered(_locked("wordnet", "minilm"))
    assert scope == Scope("a linear head on frozen minilm features of wordnet, not the backbone", True)
    synthetic = parse_config({"data": {"source": "synthetic", "dim": 4, "n_train": 4096, "batch_size": 16}})
    assert not model_covered(synthetic).locked


def test_the_whole_test_split_is_for_locked_features_only() -> None:
    synthetic = parse_config({"data": {"source": "synthetic", "dim": 4, "n_train": 4096, "batch_size": 16}})
    options = AdviseOptions(sizes=EvalSizes(queries=0))
    with pytest.raises(ValueError, match=r"--eval-queries 0 .* is for \[data\] source = 'locked'"):
        plan_session(synthetic, options, probe=False)


def test_the_baseline_on_locked_features_is_the_identity_maps_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """On locked images the baseline is 1 - the identity map's two-view recall@1 on the cells' test split (what the
    m*(n) experiment's backbone cell scores); elsewhere, and between two backbones' features (cjk), there is no
    identity map to score."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(30, 5, generator=g)
    heldout = HeldOut(x, x + 0.9 * torch.randn(30, 5, generator=g), labels=torch.arange(30) % 3)
    asked = []

    def fake_load(dataset: str, backbone: str, backbone_path: str, n_test: int) -> HeldOut:
        asked.append((dataset, backbone, n_test))
        return heldout

    monkeypatch.setattr(heldout_module, "load_heldout", fake_load)
    baseline = identity_baseline(_locked("fashion_mnist", "pixels"), "recall_error", EvalSizes(queries=0))
    assert baseline is not None and asked == [("fashion_mnist", "pixels", 0)]
    assert baseline.error == pytest.approx(1.0 - identity_scores(heldout, "pixels")["recall@1"])
    assert "zero-shot identity map" in baseline.label
    synthetic = parse_config({"data": {"source": "synthetic", "dim": 4, "n_train": 4096, "batch_size": 16}})
    assert identity_baseline(synthetic, "excess_risk", EvalSizes()) is None
    glyphs = _locked("cjk", "efficientnet_minilm", towers="two")
    assert default_metric(glyphs) == "ndcg_error"
    assert identity_baseline(glyphs, "ndcg_error", EvalSizes()) is None and len(asked) == 1
