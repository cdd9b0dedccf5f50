"""The advisor's held-out error on locked features: which metric a locked config gets, and what it refuses."""

import pytest

from crl.advise.heldout import EvalSizes, check_metric, default_metric
from crl.advise.session import AdviseOptions, model_covered, plan_session
from crl.train.config import parse_config


def _locked(dataset: str, backbone: str, **data: object):
    return parse_config(
        {
            "data": {"source": "locked", "dataset": dataset, "backbone": backbone, "n_train": 4000, **data},
            "model": {"encoder": "mlp", "hidden": [], "embedding_dim": 16, "towers": "shared"},
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


def test_the_advice_names_the_head_it_covers() -> None:
    text = model_covered(_locked("wordnet", "minilm"))
    assert text == "a linear head on frozen minilm features of wordnet, not the backbone"


def test_the_whole_test_split_is_for_locked_features_only() -> None:
    synthetic = parse_config({"data": {"source": "synthetic", "dim": 4, "n_train": 4096, "batch_size": 16}})
    options = AdviseOptions(sizes=EvalSizes(queries=0))
    with pytest.raises(ValueError, match=r"--eval-queries 0 .* is for \[data\] source = 'locked'"):
        plan_session(synthetic, options, probe=False)
