"""Tests of claim C9: eq. 8 as an identity (a unit test, not a verdict), the d + 1 construction, the optimiser,
and the claim's rule and control at its per-part level (docs/claims/C9.md)."""

import math
from pathlib import Path

import pytest
import torch

import crl.claims.c09_temperature as c09
from crl.claims._temperature_parts import (
    AffineSphereMap,
    closed_form_lift_kl,
    kernel_fit,
    lift_map,
    random_affine_map,
    train_affine_embedding,
)
from crl.claims.base import ClaimContext, ClaimResult, Fidelity, Verdict
from crl.claims.budget import part_level
from crl.risk import kernel_divergences, learned_log_density_ratio, uniform_sphere_quadrature
from crl.sweep import Cell, SweepStore
from crl.synthetic.vmf import VMFUniform

MODEL = VMFUniform(3, c09.KAPPA)


def _eq8_extremes(embed: AffineSphereMap, tau: float, support: str) -> tuple[float, float]:
    """sup |log dQ/dpi| and sup_z KL(Q||pi) on a Gauss rule or on a uniform sample (weights 1/N)."""
    generator = torch.Generator().manual_seed(11)
    anchors = MODEL.sample_anchors(40, generator)
    if support == "gauss":
        nodes, weights = uniform_sphere_quadrature(24, 48)
    else:
        nodes, weights = MODEL.sample_anchors(2000, generator), None
    log_q = learned_log_density_ratio(embed(anchors), embed(nodes), tau=tau, support_weights=weights)
    div = kernel_divergences(log_q, torch.zeros_like(log_q), support_weights=weights)
    return float(div.sup_abs_log_ratio.max()), float(div.kl_learned_to_anchor.max())


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("support", ["gauss", "sample"])
@pytest.mark.parametrize("tau", [0.05, 0.25, 1.0, 4.0])
def test_eq8_is_an_identity_for_random_unit_norm_phi(tau: float, support: str) -> None:
    """If this fails, |log dQ/dpi| <= 2/tau or KL(Q||pi) <= 2/tau ([B] eq. 8) breaks for a unit-norm phi: since
    it holds algebraically on the normalising support, the learned kernel's code would be wrong."""
    for out_dim in (3, 4, 8):
        embed = random_affine_map(out_dim, torch.Generator().manual_seed(out_dim))
        sup_log, sup_kl = _eq8_extremes(embed, tau, support)
        assert sup_log <= 2 / tau + 1e-9
        assert sup_kl <= 2 / tau + 1e-9


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("inv_tau", [1.0, 8.0])
def test_eq8_is_an_identity_for_trained_phi(inv_tau: float) -> None:
    """If this fails, a phi trained by C9's optimiser breaks eq. 8's bounds (the table's sup columns)."""
    embed = train_affine_embedding(MODEL, 1 / inv_tau, 4, seed=3)
    fit = kernel_fit(MODEL, embed, 1 / inv_tau)
    assert fit.sup_abs_log_ratio <= 2 * inv_tau + 1e-9
    assert fit.sup_kl_learned_to_anchor <= 2 * inv_tau + 1e-9
    assert _eq8_extremes(embed, 1 / inv_tau, "sample")[0] <= 2 * inv_tau + 1e-9


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_lift_map_gives_shifted_scaled_cosine(lam: float) -> None:
    """If this fails, phi(z) = (sqrt(lambda) z, sqrt(1 - lambda)) is not unit-norm with
    <phi z, phi z'> = lambda <z,z'> + 1 - lambda (so Q = vMF(lambda/tau)), or the affine family cannot hold it."""
    z = MODEL.sample_anchors(50, torch.Generator().manual_seed(1))
    embed = lift_map(lam)
    image = embed(z)
    assert embed.out_dim == 4
    assert torch.allclose(image.norm(dim=1), torch.ones(50, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(image @ image.T, lam * (z @ z.T) + 1 - lam, atol=1e-12)
    with pytest.raises(ValueError, match="lambda="):
        lift_map(1.5)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("inv_tau", [4.0, 6.0, 12.0])
def test_d_plus_one_construction_reaches_m_exactly(inv_tau: float) -> None:
    """If this fails, the d + 1 construction with lambda = tau kappa does not give KL(M||Q) = 0 for
    tau kappa <= 1 (C9's flat part would have no exact solution in the trained family)."""
    tau = 1 / inv_tau
    assert kernel_fit(MODEL, lift_map(tau * c09.KAPPA), tau).mean_kl == pytest.approx(0.0, abs=1e-12)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("inv_tau", [1.0, 1.5, 3.0])
def test_lift_closed_form_below_kappa(inv_tau: float) -> None:
    """If this fails, the figure's closed form KL(vMF(kappa)||vMF(1/tau)) of the lift family is wrong: it is the
    KL of the family's best member, lambda = 1 (phi = identity), and no lambda < 1 does better."""
    tau = 1 / inv_tau
    best = closed_form_lift_kl(c09.KAPPA, tau)
    assert kernel_fit(MODEL, lift_map(1.0), tau).mean_kl == pytest.approx(best, rel=1e-9)
    assert all(kernel_fit(MODEL, lift_map(lam), tau).mean_kl > best for lam in (0.5, 0.9))
    assert closed_form_lift_kl(c09.KAPPA, 0.25) == 0.0
    assert closed_form_lift_kl(c09.KAPPA, 1 / 3) < closed_form_lift_kl(c09.KAPPA, 2 / 3)


@pytest.mark.usefixtures("one_thread")
def test_optimiser_reaches_m_with_d_plus_one_and_not_with_d() -> None:
    """If this fails, C9's optimiser does not reach eps_flat where Q = M is reachable (D = d + 1), or the control
    (D = d) reaches it where it cannot hold M: the pre-registered tolerance would not describe the optimiser."""
    tau = 1 / 8
    assert kernel_fit(MODEL, train_affine_embedding(MODEL, tau, 4, seed=21), tau).mean_kl < c09.EPS_FLAT
    assert kernel_fit(MODEL, train_affine_embedding(MODEL, tau, 3, seed=21), tau).mean_kl > 100 * c09.EPS_FLAT


def _fake_measure(cell: Cell) -> dict[str, float]:
    """A stand-in for training: KL 0.3 where phi cannot hold M, else a tiny replicate-dependent value."""
    p = cell.params
    unreachable = p["arm"] == "control" or float(p["inv_tau"]) < c09.KAPPA
    kl = 0.3 + 1e-3 * int(p["replicate"]) if unreachable else 1e-7 * (1 + int(p["replicate"]))
    return {"mean_kl": kl, "sup_abs_log_ratio": 1.0, "sup_kl_learned_to_anchor": 0.5}


def _run_claim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measure: object) -> ClaimResult:
    """C9's quick run on a fake measurement, at the level `crl verify` sets."""
    monkeypatch.setattr(c09, "measure", measure)
    with SweepStore(tmp_path / "r.sqlite") as store:
        ctx = ClaimContext(
            "C9", Fidelity.QUICK, store, seed=0, run_id="run", level=part_level(c09.CLAIM.parts)
        )
        return c09.CLAIM.run(ctx)


def test_parts_and_control_are_judged_at_the_claims_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, C9 judges a part or its control at another level than 1 - 0.05/(10 x 6), or miscounts its
    parts (4 flat + 2 rising, as docs/claims/C9.md fixes them), or the rule cannot PASS / the control cannot FAIL."""
    result = _run_claim(tmp_path, monkeypatch, _fake_measure)
    level = part_level(6)
    assert c09.CLAIM.parts == 6
    assert result.level == pytest.approx(level)
    assert len(result.statistics) == 6
    assert len(result.control.statistics) == 4
    assert all(s.ci_level == pytest.approx(level) for s in (*result.statistics, *result.control.statistics))
    assert (result.verdict, result.control.verdict) == (Verdict.PASS, Verdict.FAIL)
    assert result.reasons == ()
    assert any(p.control for fig in result.figures for p in fig.points if p.label.startswith("control:"))


def test_a_flat_part_straddling_eps_flat_is_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a flat part whose interval contains eps_flat is not INCONCLUSIVE with a reason."""

    def straddling(cell: Cell) -> dict[str, float]:
        values = _fake_measure(cell)
        if cell.params["arm"] == "claim" and cell.params["inv_tau"] == 12.0:
            values["mean_kl"] = c09.EPS_FLAT * (0.2 + 0.4 * int(cell.params["replicate"]))
        return values

    result = _run_claim(tmp_path, monkeypatch, straddling)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert len(result.reasons) == 1 and "1/tau = 12" in result.reasons[0]
    assert math.isclose(result.level, part_level(6))
