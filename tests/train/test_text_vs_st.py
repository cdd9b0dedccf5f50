"""studies.text_vs_st: crl's text step beside sentence-transformers' MNRL, on one batch sequence.

If these fail, the side-by-side compares different things: crl's InfoNCE (as the training loop calls it) and
MNRL at scale 1/tau disagree on the same embeddings, in value or in gradient, for the one-sided or the symmetric
form; the two arms could train on different batches, or on batches that are not the ones ``crl train`` draws; or
the script no longer runs end to end, writes its figures, or answers bad input with one line.
"""

import json
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import Tensor

from crl.data.text import TextPair
from crl.negatives import Draw, EmbeddedBatch
from crl.train.build import Streams
from crl.train.config import TextData, TrainConfig, load_config, parse_config
from crl.train.data import text_pairs, text_source
from crl.train.false_negatives import FalseNegativeIds
from crl.train.loop import TrainingLoop
from crl.train.loss import batch_loss
from studies.text_vs_st import plan as study_plan
from studies.text_vs_st.__main__ import main as study_main
from tests.train.helpers import tiny_text_config

TAU = 0.05


@pytest.fixture(scope="module")
def bench() -> SimpleNamespace:
    """The study's functions the tests call: its plan's, the command line of ``python -m studies.text_vs_st``,
    and crl's own readers of the config and its pairs."""
    return SimpleNamespace(
        st_loss=study_plan.st_loss,
        shared_item_rows=study_plan.shared_item_rows,
        batch_sequence=study_plan.batch_sequence,
        sequence_hash=study_plan.sequence_hash,
        batch_columns=study_plan.batch_columns,
        main=study_main,
        load_config=load_config,
        text_pairs=text_pairs,
    )


def _config(**loss: object) -> TrainConfig:
    """A MiniLM text config with ``[loss]`` fields (nothing is loaded: only the loss and optim are read)."""
    optim = {"chunk_size": loss.pop("chunk_size", 0)}
    return parse_config(
        {
            "data": {"source": "text_pairs", "path": "pairs.jsonl"},
            "model": {"encoder": "minilm"},
            "loss": {"form": "infonce", "tau": TAU, **loss},
            "optim": optim,
        }
    )


def _embeddings(n: int, dtype: torch.dtype, seed: int) -> tuple[Tensor, Tensor]:
    """Pooled anchors and positives (n, 16) of norms near 2, before the unit-norm step."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(n, 16, generator=generator, dtype=torch.float64) / 2
    p = a + 1.5 * torch.randn(n, 16, generator=generator, dtype=torch.float64)
    return a.to(dtype), p.to(dtype)


def _unit(z: Tensor) -> Tensor:
    """z / ||z||: crl's Encoder(normalize=True) and ST's Normalize module."""
    return torch.nn.functional.normalize(z, dim=1)


def _reference(a: Tensor, p: Tensor, symmetric: bool, keep: Tensor | None = None) -> Tensor:
    """Float64 brute force: L_xy = (1/n) sum_i [log sum_{j in K_i} exp(s_ij / tau) - s_ii / tau] over candidates
    K_i (all j, or ``keep[i]``), s_ij = cos(a_i, p_j); symmetric: (L_xy + L_yx) / 2 with L_yx the same on s^T."""
    s = _unit(a.double()) @ _unit(p.double()).T / TAU
    allowed = torch.ones_like(s, dtype=torch.bool) if keep is None else keep

    def one_way(scores: Tensor, mask: Tensor) -> Tensor:
        masked = scores.masked_fill(~mask, float("-inf"))
        return (torch.logsumexp(masked, dim=1) - scores.diagonal()).mean()

    forward = one_way(s, allowed)
    return (forward + one_way(s.T, allowed.T)) / 2 if symmetric else forward


def _crl_loss(a: Tensor, p: Tensor, symmetric: bool, ids: Tensor | None = None) -> Tensor:
    """crl's loss as the training loop computes it for in-batch negatives (crl.train.loss.batch_loss), on the
    unit-norm embeddings its encoder gives."""
    n = a.shape[0]
    positive_ids = torch.arange(n) if ids is None else ids
    return batch_loss(
        EmbeddedBatch(_unit(a), _unit(p)),
        Draw("shared", "in_batch"),
        tau=torch.tensor(TAU, dtype=a.dtype),
        form="infonce",
        symmetric=symmetric,
        ids=FalseNegativeIds(positive_ids),
    )


def _value_and_gradients(loss_of, a: Tensor, p: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # type: ignore[no-untyped-def]
    a, p = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
    value = loss_of(a, p)
    grad_a, grad_p = torch.autograd.grad(value, (a, p))
    return value.detach(), grad_a, grad_p


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_crl_infonce_equals_the_st_loss_the_benchmark_builds_in_value_and_gradient(
    bench: SimpleNamespace, symmetric: bool, dtype: torch.dtype
) -> None:
    """One-sided: MNRL(scale = 1/tau); symmetric: MNRL with both directions partitioned per direction. Both equal
    crl's loss and a float64 brute force, and so do the gradients with respect to both sides' pooled embeddings
    (before the unit-norm step both models end with). On unit vectors alone the losses agree in value but not in
    the radial part of the gradient, which MNRL's cosine drops and crl's dot product keeps; the unit-norm step
    removes it again, so the parameters get the same gradient."""
    a, p = _embeddings(12, dtype, seed=int(symmetric))
    st = bench.st_loss(_config(symmetric=symmetric), None)
    assert st.scale == pytest.approx(1 / TAU)
    crl_value, crl_a, crl_p = _value_and_gradients(lambda x, y: _crl_loss(x, y, symmetric), a, p)
    st_value, st_a, st_p = _value_and_gradients(
        lambda x, y: st.compute_loss_from_embeddings([_unit(x), _unit(y)], None), a, p
    )
    ref_value, ref_a, ref_p = _value_and_gradients(lambda x, y: _reference(x, y, symmetric), a, p)
    rtol, atol = (1e-12, 1e-12) if dtype == torch.float64 else (2e-5, 2e-6)
    torch.testing.assert_close(crl_value, st_value, rtol=rtol, atol=atol)
    torch.testing.assert_close(crl_value.double(), ref_value, rtol=rtol, atol=atol)
    for crl_grad, st_grad, ref_grad in ((crl_a, st_a, ref_a), (crl_p, st_p, ref_p)):
        torch.testing.assert_close(crl_grad, st_grad, rtol=rtol, atol=atol)
        torch.testing.assert_close(crl_grad.double(), ref_grad.double(), rtol=rtol, atol=atol)


def test_the_symmetric_form_is_what_sts_deprecated_symmetric_loss_computes(bench: SimpleNamespace) -> None:
    """MultipleNegativesSymmetricRankingLoss (the name an ST user knows) gives the symmetric loss too."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesSymmetricRankingLoss

    a, p = _embeddings(9, torch.float64, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = MultipleNegativesSymmetricRankingLoss(None, scale=1 / TAU)
    torch.testing.assert_close(
        old.compute_loss_from_embeddings([_unit(a), _unit(p)], None), _crl_loss(a, p, True)
    )


def test_gradcache_arm_uses_sts_cached_loss_with_the_same_value_and_gradients(bench: SimpleNamespace) -> None:
    """[optim] chunk_size > 0: CachedMNRL with mini_batch_size = chunk_size, whose chunked loss on the same
    embeddings equals crl's (value and gradients)."""
    a, p = _embeddings(10, torch.float64, seed=7)
    stand_in = torch.nn.Sequential(torch.nn.Identity())  # CachedMNRL only looks at model[0]'s kind
    st = bench.st_loss(_config(symmetric=True, chunk_size=4), stand_in)
    assert type(st).__name__ == "CachedMultipleNegativesRankingLoss" and st.mini_batch_size == 4
    crl = _value_and_gradients(lambda x, y: _crl_loss(x, y, True), a, p)
    cached = _value_and_gradients(
        lambda x, y: st.calculate_loss([[_unit(x[:4]), _unit(x[4:])], [_unit(y[:4]), _unit(y[4:])]]), a, p
    )
    for mine, theirs in zip(crl, cached, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


def test_crl_leaves_a_shared_item_out_where_mnrl_scores_it_as_a_negative(bench: SimpleNamespace) -> None:
    """Pairs 0 and 3 name one item (the same positive text): crl drops each from the other's candidates (the brute
    force with those two entries left out), MNRL scores the copy as a negative, so its loss is higher on such a
    batch (the result counts these rows)."""
    a, p = _embeddings(6, torch.float64, seed=9)
    p[3] = p[0]
    ids = torch.tensor([0, 1, 2, 0, 4, 5])
    keep = torch.ones(6, 6, dtype=torch.bool)
    keep[0, 3] = keep[3, 0] = False
    masked = _crl_loss(a, p, True, ids)
    torch.testing.assert_close(masked, _reference(a, p, True, keep))
    st = bench.st_loss(_config(symmetric=True), None).compute_loss_from_embeddings([_unit(a), _unit(p)], None)
    assert float(st - masked) > 0.1
    batches = np.array([[0, 1, 2], [0, 3, 4], [3, 3, 5]])
    assert bench.shared_item_rows(ids.numpy(), batches).tolist() == [0, 2, 2]


def test_the_batch_sequence_is_deterministic_in_the_seed_and_hashed_in_order(bench: SimpleNamespace) -> None:
    """Same seed, same (T, b) indices and hash; another seed, another hash; two batches swapped, another hash.
    Each epoch's batches are disjoint slices of one permutation (50 pairs, 6 batches of 8 an epoch)."""
    first, again = bench.batch_sequence(50, 8, 20, 3), bench.batch_sequence(50, 8, 20, 3)
    assert first.shape == (20, 8) and first.dtype == np.int64
    assert np.array_equal(first, again) and bench.sequence_hash(first) == bench.sequence_hash(again)
    assert bench.sequence_hash(bench.batch_sequence(50, 8, 20, 4)) != bench.sequence_hash(first)
    swapped = first[[1, 0, *range(2, 20)]]
    assert bench.sequence_hash(swapped) != bench.sequence_hash(first)
    for epoch in range(3):
        rows = first[6 * epoch : 6 * epoch + 6].reshape(-1)
        assert len(set(rows.tolist())) == 48 and rows.max() < 50


def test_the_planned_batches_are_those_crls_training_loop_draws(
    bench: SimpleNamespace, tmp_path: Path
) -> None:
    """crl's own loop (a bag-of-tokens text run, its default cursor) trains on exactly batch_sequence(seed)."""
    config = tiny_text_config(tmp_path, "order", run={"seed": 11})
    assert isinstance(config.data, TextData)
    source = text_source(config.data, "train")
    loop = TrainingLoop(config, source, Streams.derive(11, regime=config.loss.regime))
    drawn: list[Tensor] = []
    draw = loop.cursor.next_batch

    def recorded() -> Tensor:
        drawn.append(draw().clone())
        return drawn[-1]

    loop.cursor.next_batch = recorded  # type: ignore[method-assign]
    for _ in range(6):
        loop.train_step()
    planned = bench.batch_sequence(source.n_pairs, config.data.batch_size, 6, 11)
    assert np.array_equal(torch.stack(drawn).numpy(), planned)


def test_the_st_columns_are_the_texts_of_the_planned_rows(bench: SimpleNamespace) -> None:
    """[queries, positives] of the batch's rows, then one column per negative with the negatives' positives."""
    pairs = [TextPair(f"q{i}", f"p{i}", f"g{i}") for i in range(6)]
    rows, negatives = np.array([4, 1]), np.array([[0, 5], [2, 3]])
    assert bench.batch_columns(pairs, rows, None) == [["q4", "q1"], ["p4", "p1"]]
    assert bench.batch_columns(pairs, rows, negatives) == [
        ["q4", "q1"],
        ["p4", "p1"],
        ["p0", "p2"],
        ["p5", "p3"],
    ]


def _tiny_config(tmp_path: Path) -> Path:
    """A MiniLM config on 120 pairs of your own (about 80 for training), batches of 8, 32 word pieces."""
    pairs = tmp_path / "pairs.jsonl"
    things = [
        "river",
        "mountain",
        "forest",
        "ocean",
        "desert",
        "island",
        "valley",
        "castle",
        "bridge",
        "garden",
    ]
    lines = [
        json.dumps(
            {"query": f"story {12 * i + j}: a walk by the {thing}", "positive": f"{thing} tale {12 * i + j}"}
        )
        for i, thing in enumerate(things)
        for j in range(12)
    ]
    pairs.write_text("\n".join(lines) + "\n")
    config = tmp_path / "tiny.toml"
    config.write_text(
        f"""[data]
source = "text_pairs"
path = "{pairs}"
batch_size = 8
max_seq_length = 32
val_fraction = 0.2
test_fraction = 0.1

[model]
encoder = "minilm"

[loss]
form = "infonce"
symmetric = true
tau = {TAU}

[optim]
lr = 5e-5
warmup_steps = 1
total_steps = 300

[run]
name = "tiny_st"
num_threads = 1
device = "cpu"
log_every = 1
"""
    )
    return config


@pytest.mark.slow  # two MiniLM arms and their evaluation: 36 s under load
def test_a_two_step_run_writes_both_arms_figures_on_the_same_batches(
    bench: SimpleNamespace, tmp_path: Path
) -> None:
    """Both arms (two MiniLM processes) train 2 steps on the planned batches and are scored on the validation
    split; result.json holds the metrics, times, memory, the paired differences and the command line."""
    config, out = _tiny_config(tmp_path), tmp_path / "out"
    bench.main([str(config), "--steps", "2", "--out", str(out)])
    result = json.loads((out / "result.json").read_text())
    expected = {
        "command", "config", "overrides", "extra", "split", "n_queries", "n_documents", "steps", "batch_size",
        "batch_sequence_sha256", "batches_with_shared_items", "rows_with_shared_items", "matched",
        "memory_measure", "versions", "arms", "crl_minus_st", "criterion",
    }  # fmt: skip
    assert expected <= set(result)
    assert result["split"] == "validation" and result["steps"] == 2 and "--steps 2" in result["command"]
    planned = bench.batch_sequence(len(bench.text_pairs(bench.load_config(config).data, "train")), 8, 2, 0)
    assert result["batch_sequence_sha256"] == bench.sequence_hash(planned)
    metrics = {"ndcg@10", "recall@10", "mrr@10"}
    for arm in ("crl", "st"):
        figures = result["arms"][arm]
        assert figures["steps"] == 2 and figures["batches_sha256"] == result["batch_sequence_sha256"]
        assert set(figures["metrics"]) == metrics and figures["n_queries"] == result["n_queries"] > 1
        assert all(0 <= value <= 1 for value in figures["metrics"].values())
        assert len(figures["step_seconds"]) == 2 and figures["seconds_per_step"]["median"] > 0
        assert figures["memory"]["peak_rss_bytes"] >= figures["memory"]["peak_rss_growth_bytes"] > 0
    assert "MultipleNegativesRankingLoss(scale=20" in result["arms"]["st"]["loss"]
    assert set(result["crl_minus_st"]) == metrics
    for difference in result["crl_minus_st"].values():
        assert difference["low"] <= difference["delta"] <= difference["high"]
    assert isinstance(result["criterion"]["met"], bool)


def test_help_and_bad_input(
    bench: SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--help names the options; bad input is one line naming the argument (or the config field), exit 2."""
    with pytest.raises(SystemExit) as done:
        bench.main(["--help"])
    assert done.value.code == 0 and "--extra" in capsys.readouterr().out
    config = tmp_path / "any.toml"
    config.write_text('[data]\nsource = "text_pairs"\npath = "x.jsonl"\n[model]\nencoder = "minilm"\n')
    cases = [
        ([str(config), "--split", "test"], "--allow-test"),
        ([str(config), "--steps", "0"], "argument --steps"),
        ([str(config), "--extra", "nope"], "argument --extra"),
        ([str(config), "--set", 'loss.form="dcl"'], "[loss] form = 'dcl'"),
        ([str(tmp_path / "missing.toml")], "argument config"),
    ]
    for argv, needle in cases:
        with pytest.raises(SystemExit) as done:
            bench.main(argv)
        error = capsys.readouterr().err
        assert done.value.code == 2 and needle in error and len(error.strip().splitlines()) == 1, (
            argv,
            error,
        )
