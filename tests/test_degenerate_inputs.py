"""Degenerate inputs that crl must refuse with an error naming the argument, never accept silently or answer with a
torch traceback.

Each test names the case; each must raise an error naming the argument, its value and the fix, before anything is
computed or allocated.
"""

import math
import sqlite3
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import crl.train.build
import crl.verify
from crl.claims import Registry
from crl.commands import app
from crl.metrics.retrieval import retrieval_metrics
from crl.objectives import (
    ContrastiveLoss,
    CVaR,
    Temperature,
    contrastive_loss,
    oce_loss,
    pairwise_loss,
    sigmoid_loss,
    tiled_logsumexp,
)
from crl.sweep._integrity import ResultsFileError, check_results_file
from crl.synthetic import AsymmetricSphere, GaussianTwoTower, VMFUniform
from crl.train.build import build_sampler, negative_buffer_bytes
from crl.train.config import ConfigError, parse_config
from tests.verify.test_verify import ToyRate

EMPTY = torch.zeros(4, 0)
EMBEDDINGS = torch.nn.functional.normalize(
    torch.randn(4, 3, generator=torch.Generator().manual_seed(0)), dim=1
)


@pytest.mark.parametrize(
    "loss",
    [
        lambda a: contrastive_loss(a, a, tau=0.1),
        lambda a: pairwise_loss(a, a, tau=0.1),
        lambda a: sigmoid_loss(a, a, tau=0.1),
        lambda a: oce_loss(a, a, tau=0.1),
    ],
)
def test_d0_embeddings_are_refused_by_every_objective(loss: object) -> None:
    """d = 0 gave loss log n (every score 0) without a word."""
    with pytest.raises(ValueError, match=r"anchors has shape \(4, 0\).*d >= 1"):
        loss(EMPTY)  # type: ignore[operator]


def test_d0_embeddings_are_refused_by_the_retrieval_metrics() -> None:
    """d = 0 gave recall 0 without a word."""
    with pytest.raises(ValueError, match=r"queries has shape \(4, 0\): d = 0 .*pass d >= 1"):
        retrieval_metrics(EMPTY, EMPTY, positive_index=torch.arange(4))


@pytest.mark.parametrize("margin", [math.nan, math.inf, -math.inf])
def test_a_non_finite_pairwise_margin_is_refused(margin: float) -> None:
    """margin = NaN/inf gave a NaN/inf loss."""
    with pytest.raises(ValueError, match="margin="):
        pairwise_loss(EMBEDDINGS, EMBEDDINGS, tau=0.1, psi="hinge", margin=margin)


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: CVaR(True), ValueError, r"alpha=True"),  # type: ignore[arg-type]
        (lambda: sigmoid_loss(EMBEDDINGS, EMBEDDINGS, tau=0.1, bias="x"), TypeError, r"bias='x'"),  # type: ignore[arg-type]
        (lambda: tiled_logsumexp(EMBEDDINGS, EMBEDDINGS, block_size=2.5), ValueError, r"block_size=2.5"),  # type: ignore[arg-type]
        (lambda: ContrastiveLoss(0.1, block_size=2.5), ValueError, r"block_size=2.5"),  # type: ignore[arg-type]
        (lambda: Temperature(True), TypeError, r"init=True"),  # type: ignore[arg-type]
        (lambda: Temperature("0.1"), TypeError, r"init='0.1'"),  # type: ignore[arg-type]
        (lambda: Temperature(math.inf), ValueError, r"init=inf"),
        (lambda: Temperature(0.1, max_inverse=math.inf), ValueError, r"max_inverse=inf"),
        (lambda: Temperature(0.1, learnable="no"), TypeError, r"learnable='no'"),  # type: ignore[arg-type]
    ],
)
def test_bad_types_are_refused_at_the_boundary(call: object, error: type[Exception], pattern: str) -> None:
    """CVaR(True) was accepted; bias='x' and block_size=2.5 raised a TypeError from inside torch."""
    with pytest.raises(error, match=pattern):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    "model", [VMFUniform(3, 2.0), GaussianTwoTower(3, 0.5), AsymmetricSphere(3, kappa=1.0, anchor_kappa=2.0)]
)
def test_nan_anchors_to_sample_positives_are_refused(model: object) -> None:
    """NaN anchors gave NaN positives (vMF: NaN passed the unit-norm check)."""
    x = torch.full((2, 3), math.nan, dtype=torch.float64)
    with pytest.raises(ValueError, match="x contains 6 NaN/Inf"):
        model.sample_positives(x, torch.Generator())  # type: ignore[attr-defined]


class _Source:
    """The part of a PairSource that build_sampler reads."""

    n_pairs = 100
    anchor_shape = (64,)
    positive_shape = (64,)
    generate_negatives = None


def test_a_negative_pool_that_cannot_fit_in_memory_is_refused_before_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """n_negatives = 10^8 tried to allocate 25.6 GB in the first step; now the stated bound is checked first."""
    config = parse_config({"loss": {"negatives": "shared_pool", "n_negatives": 100_000_000}})
    needed = negative_buffer_bytes(config, _Source.positive_shape)
    assert needed == 4 * 100_000_000 * (64 + config.model.embedding_dim) + 4 * 4 * (1 << 22)
    monkeypatch.setattr(crl.train.build, "_machine_memory_bytes", lambda: 16 * 10**9)
    with pytest.raises(
        ValueError, match=r"n_negatives = 100000000 .*51.3 GB.*4 R \(P \+ S D\).*P = 64.* 16 GB"
    ):
        build_sampler(config, _Source())  # type: ignore[arg-type]
    small = parse_config({"loss": {"negatives": "shared_pool", "n_negatives": 4096}})
    assert build_sampler(small, _Source()).n_negatives == 4096  # type: ignore[arg-type, attr-defined]


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", ".", "a\\b"])
def test_a_run_name_that_is_not_one_folder_is_refused(name: str) -> None:
    """run.name = '../../x' wrote the run outside out_dir."""
    with pytest.raises(ConfigError, match=r"\[run\] name = .*one folder name inside out_dir"):
        parse_config({"run": {"name": name}})


def test_eval_on_cuda_without_cuda_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """crl eval --device cuda without CUDA raised torch's AssertionError."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--device", "cuda"])
    assert result.exit_code == 2, result.output
    assert "device = 'cuda' but torch finds no CUDA device on this machine; use 'cpu'" in result.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize("claims", ["[/]", "[bold]C3"])
def test_claim_ids_with_rich_markup_are_a_usage_error(
    claims: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """crl verify --claims '[/]' raised rich's MarkupError; now one line naming the id, exit 2."""
    monkeypatch.setattr(crl.verify, "default_registry", lambda: Registry.of([ToyRate()]))
    result = CliRunner().invoke(app, ["verify", "--claims", claims, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "unknown claim id(s)" in result.output and claims.upper() in result.output


def _random_bytes(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 64)


def _wrong_schema(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE cells (id INTEGER PRIMARY KEY, other TEXT)")


@pytest.mark.parametrize("damage", [_random_bytes, _wrong_schema])
def test_a_malformed_results_file_is_named_with_the_fresh_fix(damage: object, tmp_path: Path) -> None:
    """A random or foreign results.sqlite raised sqlite3 errors from inside the store, naming no file."""
    path = tmp_path / "results.sqlite"
    damage(path)  # type: ignore[operator]
    with pytest.raises(ResultsFileError, match=rf"{path} is not a usable crl results database.*--fresh"):
        check_results_file(path)


def test_a_missing_or_empty_results_file_is_fine(tmp_path: Path) -> None:
    """No file, or an empty one (SQLite's empty database), is what a first run sees."""
    check_results_file(tmp_path / "results.sqlite")
    (tmp_path / "results.sqlite").write_bytes(b"")
    check_results_file(tmp_path / "results.sqlite")


@pytest.mark.timeout(120)
def test_crl_verify_names_a_damaged_results_file_and_fresh_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: exit 2 with the file and --fresh named; then --fresh runs the claims."""
    monkeypatch.setattr(crl.verify, "default_registry", lambda: Registry.of([ToyRate()]))
    _random_bytes(tmp_path / "results.sqlite")
    args = ["verify", "--fidelity", "quick", "--out", str(tmp_path)]
    damaged = CliRunner().invoke(app, args)
    assert damaged.exit_code == 2, damaged.output
    flat = " ".join(damaged.output.split())
    assert "results.sqlite is not a usable crl results database" in flat and "--fresh" in flat
    recovered = CliRunner().invoke(app, [*args, "--fresh"])
    assert recovered.exit_code == 0, recovered.output
