"""Tests of claims C7, C8 (C9: test_c09_temperature.py): each quick run ends PASS with its control FAIL, and
their helpers."""

from pathlib import Path

import numpy as np
import pytest
import torch

from crl.claims import _kernel_heavy_tail as heavy
from crl.claims import c07_ce_gap as c07
from crl.claims import c08_ideal_search as c08
from crl.claims._kernel_series import FORM_ORDER, doubling, fit_series, rate_verdict
from crl.claims._sphere_kernel import DrawSummary, FormGap, GapCell, sphere_embedding
from crl.claims.budget import part_level
from crl.claims.c08_ideal_search import IdealSearchCell
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.verdict import Verdict
from crl.sweep import Cell, SweepStore
from crl.synthetic.vmf import VMFUniform


def test_doubling_grid() -> None:
    """If this fails, the k grids of C7/C8 are not the powers-of-two multiples the rule names."""
    assert doubling(128, 2048) == (128, 256, 512, 1024, 2048)


def test_linear_embedding_is_on_the_sphere_but_no_isometry() -> None:
    """If this fails, C7/C8's second phi is off the unit sphere or is a rotation (no test beyond phi = id)."""
    embed = sphere_embedding("linear", 3)
    z = VMFUniform(3, 1.0).sample_anchors(200, torch.Generator().manual_seed(0))
    image = embed(z)
    assert torch.allclose(image.norm(dim=1), torch.ones(200, dtype=torch.float64), atol=1e-12)
    assert float((image @ image.T - z @ z.T).abs().max()) > 0.1
    with pytest.raises(ValueError, match="phi kind"):
        sphere_embedding("rotation", 0)


def _summary(value: float, relative_se: float = 0.005) -> DrawSummary:
    se = abs(value) * relative_se
    return DrawSummary(mean=value, se=se, sd=se, sd_se=0.0)


def _exact_like_cell(cell: Cell) -> dict[str, float]:
    """A C7/C8 claim cell whose gaps are exactly +-0.5/k (inside every bound), as if measured to 0.5%."""
    k = int(cell.params["k"])
    gap = {
        form: FormGap(_summary(sign * 0.5 / k), _summary(sign * 0.5 / k))
        for form, sign in (("dcl", 1.0), ("infonce", -1.0))
    }
    counting = _summary(0.5)
    return IdealSearchCell(gap["dcl"], gap["infonce"], _summary(1.0), counting, counting).to_dict()


def _exact_control_cell(cell: Cell) -> dict[str, float]:
    """A control cell at the heavy-tailed model's exact expected gaps, as if measured to 0.5%."""
    k = int(cell.params["k"])
    exact = heavy.cross_entropy_gap if "rho" in cell.params else heavy.ideal_search_gap
    gap = {form: FormGap(_summary(exact(k, form)), _summary(exact(k, form))) for form in FORM_ORDER}
    return GapCell(gap["dcl"], gap["infonce"]).to_dict()


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("claim_id", ["C7", "C8"])
def test_c7_c8_parts_and_control_are_judged_at_the_claims_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claim_id: str
) -> None:
    """If this fails, C7/C8 judge a part or the control at another level than 1 - 0.05/(10 x 5), miscount their
    parts (4 rates + 1 count, docs/claims/C7.md, C8.md), or the rule cannot PASS exact 1/k gaps / the control
    cannot FAIL the heavy-tailed model's exact gaps."""
    module = c07 if claim_id == "C7" else c08
    monkeypatch.setattr(
        module,
        "measure_cross_entropy_gap" if claim_id == "C7" else "measure_ideal_search_gap",
        _exact_like_cell,
    )
    monkeypatch.setattr(module, "measure_control_gap", _exact_control_cell)
    level = part_level(5)
    with SweepStore(tmp_path / "r.sqlite") as store:
        ctx = ClaimContext(claim_id, Fidelity.QUICK, store, seed=0, run_id="run", level=level)
        result = module.CLAIM.run(ctx)
    assert module.CLAIM.parts == 5 and result.level == pytest.approx(level)
    judged = [s for s in result.statistics if "not judged" not in s.name]
    assert len(judged) == 5
    assert all(s.ci_level == pytest.approx(level) for s in (*result.statistics, *result.control.statistics))
    assert (result.verdict, result.control.verdict) == (Verdict.PASS, Verdict.FAIL)
    assert result.slack is not None and result.slack < 0.1
    assert "not informative" in result.notes
    assert all(p.control for p in result.figures[1].points)
    if claim_id == "C8":
        assert "reconstruction" in result.title and "reconstruction" in module.CLAIM.evidence
        assert len(result.statistics) == 9


def test_rate_rule_of_the_series() -> None:
    """If this fails, a C7/C8 series is not judged by the equivalence band [-1.1, -0.9] at the given level."""
    ks = doubling(128, 1024)
    rng = np.random.default_rng(0)
    true = fit_series("a", ks, [1 / k for k in ks], [1e-3 / k for k in ks], rng, level=0.999)
    slow = fit_series("b", ks, [k**-0.5 for k in ks], [1e-3 * k**-0.5 for k in ks], rng, level=0.999)
    assert true.fit.ci_level == 0.999
    assert rate_verdict(true) == (Verdict.PASS, "")
    assert rate_verdict(slow) == (Verdict.FAIL, "")


def test_c8_cell_reduced_chunk_by_chunk_equals_the_whole_draw_matrices() -> None:
    """If this fails, C8's cell (reduced per chunk of draws so that a full-fidelity worker holds O(2^18) scores, not
    the ~13 GB of its whole (R, k) matrices) no longer equals the same statistics of the whole matrices."""
    from crl.claims._sphere_kernel import joined_draws, kernel_score_chunks
    from crl.risk import ideal_search_cross_entropy, ideal_search_gap
    from crl.risk.kernel import counting_search_gap

    params = {"dim": 3, "kappa": 4.0, "phi": "linear", "phi_seed": 1, "tau": 0.5, "n_draws": 10, "k": 1 << 16}
    cell = Cell(params, 7)
    got = c08.measure_ideal_search_gap(cell)
    draws = joined_draws(
        kernel_score_chunks(
            VMFUniform(3, 4.0),
            sphere_embedding("linear", 1),
            tau=0.5,
            n_draws=10,
            n_negatives=1 << 16,
            generator=torch.Generator().manual_seed(7),
            with_kernel_ratio=True,
        )
    )
    pos, neg, log_w = draws.positive_scores, draws.negative_scores, draws.log_kernel_ratio
    assert log_w is not None
    gaps = {
        form: FormGap.of(ideal_search_gap(pos, neg, log_w, draws.log_partition, tau=0.5, form=form))
        for form in FORM_ORDER
    }
    counting = {
        form: DrawSummary.of(counting_search_gap(pos, neg, tau=0.5, form=form)) for form in FORM_ORDER
    }
    want = IdealSearchCell(
        gaps["dcl"],
        gaps["infonce"],
        DrawSummary.of(ideal_search_cross_entropy(neg, log_w, tau=0.5)),
        counting["dcl"],
        counting["infonce"],
    ).to_dict()
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
