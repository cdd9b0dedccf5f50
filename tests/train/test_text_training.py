"""Text sources in training: config kinds, tokenised batches, the false-negative mask, GradCache in the loop."""

import json
import math
from functools import partial
from pathlib import Path

import pytest
import torch

from crl.data.text import TextPair, TextPairSource
from crl.models.minilm import load_tokenizer, tokenize
from crl.negatives import Draw, EmbeddedBatch
from crl.train.build import Streams, build_model
from crl.train.config import ConfigError, MiniLMModel, WordnetData, parse_config
from crl.train.data import text_source
from crl.train.false_negatives import false_negative_ids
from crl.train.loop import train
from crl.train.loss import batch_loss

PAIRS = [
    TextPair("a large body of water", "sea", "g0"),
    TextPair("a domesticated canine", "dog", "g1"),
    TextPair("a large body of water", "ocean", "g2"),
    TextPair("a feline pet", "cat", "g3"),
    TextPair("a body of salt water", "sea", "g4"),
    TextPair("to move fast on foot", "run", "g5"),
]


def _document(tmp_path: Path, **overrides: object) -> dict:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"query": p.query, "positive": p.positive}) + "\n" for p in PAIRS * 4))
    data = {
        "source": "text_pairs",
        "path": str(path),
        "batch_size": 4,
        "max_seq_length": 12,
        "test_fraction": 0.2,
    }
    model = {"encoder": "bag", "embedding_dim": 8, "token_dim": 8}
    optim = {"lr": 1e-2, "warmup_steps": 0, "total_steps": 3, "grad_clip": 0.0}
    document = {"data": data, "model": model, "optim": optim, "loss": {"symmetric": True}}
    for key, value in overrides.items():
        section, field = key.split(".")
        document[section][field] = value
    return document


def test_text_kinds_parse() -> None:
    config = parse_config({"data": {"source": "wordnet"}, "model": {"encoder": "minilm"}})
    assert isinstance(config.data, WordnetData) and config.data.max_seq_length == 128
    assert isinstance(config.model, MiniLMModel) and config.model.embedding_dim == 384
    with pytest.raises(ConfigError, match="max_seq_length"):
        parse_config({"data": {"source": "bible", "max_seq_length": 1}})
    with pytest.raises(ConfigError, match="hidden"):
        parse_config({"data": {"source": "bible"}, "model": {"encoder": "minilm", "hidden": [3]}})


def test_minilm_width_must_match_embedding_dim() -> None:
    config = parse_config({"model": {"encoder": "minilm", "embedding_dim": 64}})
    with pytest.raises(ValueError, match="embedding_dim = 384"):
        build_model(config.model, config.loss, (8,), (8,), torch.Generator())


def test_text_source_tokenises_pairs_and_names_duplicates(tmp_path: Path) -> None:
    config = parse_config(_document(tmp_path))
    source = text_source(config.data, "train")  # type: ignore[arg-type]
    assert source.anchor_shape == (12,)
    x, _ = source.pairs(torch.tensor([0, 1]), torch.Generator())
    assert set(x) == {"input_ids", "attention_mask"} and x["input_ids"].shape[0] == 2
    assert isinstance(source, TextPairSource)
    first_id: dict[tuple[str, str], int] = {}
    for pair, item in zip(source.texts, source.item_ids.tolist(), strict=True):
        assert first_id.setdefault((pair.query, pair.positive), item) == item  # the file repeats its pairs
    assert len(first_id) < source.n_pairs


def test_in_batch_false_negatives_are_left_out_of_the_loss() -> None:
    source = TextPairSource(PAIRS, partial(tokenize, load_tokenizer()), 12)
    indices = torch.arange(len(PAIRS))
    gen = torch.Generator().manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(6, 5, generator=gen, dtype=torch.float64), dim=1)
    p = torch.nn.functional.normalize(torch.randn(6, 5, generator=gen, dtype=torch.float64), dim=1)
    drawn = Draw("shared", "in_batch")
    ids = false_negative_ids(source, indices, drawn, symmetric=False, device=torch.device("cpu"))
    assert ids.positive_ids is not None
    masked = batch_loss(
        EmbeddedBatch(a, p),
        drawn,
        tau=torch.tensor(0.1, dtype=torch.float64),
        form="infonce",
        symmetric=False,
        ids=ids,
    )
    linked = source.item_ids
    expected = []
    for i in range(6):
        scores = [float(a[i] @ p[j] - a[i] @ p[i]) / 0.1 for j in range(6) if linked[j] != linked[i]]
        expected.append(math.log1p(sum(math.exp(s) for s in scores)))
    assert int((linked[:, None] == linked[None, :]).sum()) > 6  # the mask really leaves candidates out
    assert float(masked) == pytest.approx(sum(expected) / 6, rel=1e-12)


@pytest.mark.parametrize("negatives", [{}, {"loss.negatives": "independent_pool", "loss.n_negatives": 3}])
def test_gradcache_in_the_loop_trains_like_the_plain_step(tmp_path: Path, negatives: dict) -> None:
    overrides = {"loss.symmetric": False, **negatives} if negatives else {}
    plain = parse_config(_document(tmp_path, **overrides))
    cached = parse_config(_document(tmp_path, **overrides, **{"optim.chunk_size": 3}))
    source = text_source(plain.data, "train")  # type: ignore[arg-type]
    runs = [train(config, source, Streams.derive(0, regime=config.loss.regime)) for config in (plain, cached)]
    losses = [[m.loss for m in run.metrics] for run in runs]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    for a, b in zip(runs[0].model.state_dict().values(), runs[1].model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
