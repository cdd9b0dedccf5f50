"""Learned vs ideal search: an oracle score agrees with s* exactly, a reversed one disagrees, the report renders."""

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from crl import verify
from crl.claims.context import Fidelity
from crl.experiments import learned_vs_ideal as lvi
from crl.report.document import write_report
from crl.sweep import SweepStore
from crl.synthetic.vmf import VMFUniform
from crl.verify import learned_vs_ideal_section
from tests.report.test_report import INFO

SMALL = lvi.Setup(n_train=128, steps=3, batch_size=32, hidden=8, queries=60, corpus=80, search_draws=40)


class FixedScore:
    """s(x, y) = sign <x, y>: the oracle (sign = 1) ranks exactly as s* = kappa <x, y> - log C."""

    def __init__(self, sign: float) -> None:
        self.sign = sign

    def encode_anchors(self, x: torch.Tensor) -> torch.Tensor:
        return self.sign * x

    def encode_positives(self, y: torch.Tensor) -> torch.Tensor:
        return y


def test_kendall_tau_b_equals_scipy_with_ties() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 4, size=(5, 30)).astype(float), rng.integers(0, 4, size=(5, 30)).astype(float)
    ours = lvi._kendall_tau_b(torch.from_numpy(a), torch.from_numpy(b), chunk=2)
    expected = [kendalltau(a[i], b[i]).statistic for i in range(5)]
    np.testing.assert_allclose(ours.numpy(), expected, atol=1e-12)


def test_the_oracle_score_is_the_ideal_search_and_a_reversed_score_is_not() -> None:
    truth = VMFUniform(3, 8.0)
    oracle = lvi.compare_search(
        truth, FixedScore(1.0), k=16, tau=1 / 8.0, setup=SMALL, generator=torch.Generator().manual_seed(0)
    )
    assert oracle.top10_overlap == pytest.approx(1.0) and oracle.kendall_tau == pytest.approx(1.0)
    assert oracle.auc_gap == pytest.approx(0.0, abs=1e-12)
    assert oracle.search_kl == pytest.approx(0.0, abs=1e-5) and oracle.search_tv == pytest.approx(
        0.0, abs=1e-5
    )
    assert abs(oracle.auc - oracle.optimal_auc) < 0.05
    reverse = lvi.compare_search(
        truth, FixedScore(-1.0), k=16, tau=1 / 8.0, setup=SMALL, generator=torch.Generator().manual_seed(0)
    )
    assert reverse.kendall_tau == pytest.approx(-1.0) and reverse.top10_overlap < 0.2
    assert reverse.auc_gap > 0.8 and reverse.search_tv > 0.5


def _where(tmp_path: Path, run_id: str = "run-a") -> verify.SectionRun:
    store = SweepStore(tmp_path / "results.sqlite")
    store.begin_run(run_id, {})
    return verify.SectionRun(store, run_id)


def test_the_report_section_renders_without_a_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(lvi.GRIDS, "quick", ((2, 4), (0.5,), SMALL))
    section = learned_vs_ideal_section("quick", 1, _where(tmp_path))
    assert [row[:2] for row in section.rows] == [("2", "0.5"), ("4", "0.5")]
    assert len(section.columns) == len(section.rows[0])
    files = write_report(tmp_path, [], INFO, [section])
    text = files.markdown.read_text()
    assert "## Learned search vs ideal search ([B]) (no verdict)" in text and "| 4 | 0.5 |" in text
    assert "Learned search vs ideal search ([B]) (no verdict)" in files.html.read_text()
    with pytest.raises(ValueError, match="fidelity"):
        lvi.learned_vs_ideal("slow")


def test_the_section_cells_are_stored_and_reused_as_computed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The store keeps each (k, tau) cell under the section's namespace; a second run recomputes none, and the
    stored figures equal an in-process computation of the same cell."""
    monkeypatch.setitem(lvi.GRIDS, "quick", ((2, 4), (0.5,), SMALL))
    first = learned_vs_ideal_section("quick", 3, _where(tmp_path, "run-a"))
    where = _where(tmp_path, "run-b")
    again = learned_vs_ideal_section("quick", 3, where)
    assert again.rows == first.rows
    (namespace,) = where.store.namespaces()
    assert namespace.startswith(f"{verify.LEARNED_VS_IDEAL}@")
    records = where.store.records(namespace)
    assert len(records) == 2 and {record.run_id for record in records} == {"run-a"}
    assert lvi.learned_vs_ideal("quick", seed=3) == [lvi.Cell(**record.result) for record in records]


def test_verify_adds_the_section_and_survives_its_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(lvi.GRIDS, "quick", ((2,), (0.5,), SMALL))
    (section,) = verify.note_sections(Fidelity.QUICK, 0, _where(tmp_path))
    assert section.title == lvi.SECTION_TITLE and len(section.rows) == 1

    def broken(fidelity: str, seed: int, where: verify.SectionRun) -> None:
        raise RuntimeError("no truth today")

    monkeypatch.setattr(verify, "learned_vs_ideal_section", broken)
    (failed,) = verify.note_sections(Fidelity.QUICK, 0, _where(tmp_path, "run-c"))
    assert failed.rows == () and "RuntimeError: no truth today" in failed.paragraphs[0]
