"""Learned search against ideal search ([B], docs/theory.md section 5) on a synthetic truth where s* is exact.

For each (k, tau) of a grid, crl's trainer fits an embedding on pairs of the vMF truth (x uniform on S^{d-1},
y ~ vMF(x, kappa), negatives y' ~ p- uniform; SCRL with k independent negatives per anchor and temperature tau),
and its score s(x, y) = <f(x), g(y)> is compared with the ideal similarity s*(x, y) = log dM(x, .)/dpi (y)
= kappa <x, y> - log C_d(kappa) on held-out draws:

- **top-10 overlap**: |top 10 of the corpus by s ∩ top 10 by s*| / 10, averaged over queries x;
- **Kendall tau** (tau-b) between s(x, .) and s*(x, .) over the first 400 corpus items, averaged over the first
  200 queries;
- **AUC gap** E* - E(s), E(s) = P[s(x, y) > s(x, y')] + 1/2 P[=], both estimated on the same held-out draws
  (each anchor's positive against the whole corpus; paired, so the gap's noise is far below either AUC's);
  the exact E* (quadrature, :meth:`VMFUniform.optimal_auc`) is reported beside it;
- **search**: [B]'s softmax search ``Q_hat_k(x, xi_i) = softmax_i(s(x, xi_i)/tau)`` over k unseen points
  xi_i ~ pi against the ideal search ``M_hat_k(x, .) = (1/k) sum_i w_i delta_{xi_i}``, w_i = dM(x, .)/dpi (xi_i):
  the cross-entropy ``CE[M_hat_k || Q_hat_k]`` as :func:`crl.risk.kernel.ideal_search_cross_entropy`
  defines it (crl's reconstruction of [B]'s normalisation), KL(M_hat_k / wbar || Q_hat_k) and the total variation
  between the two search distributions, averaged over queries.

These are descriptive figures, not a claim: they carry no verdict (the alpha budget is fixed over C1-C10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from crl.models import DualEncoder
from crl.risk.kernel import ideal_search_cross_entropy
from crl.sweep import Cell as SweepCell
from crl.synthetic.vmf import VMFUniform
from crl.train.build import Streams
from crl.train.config import parse_config
from crl.train.data import build_source
from crl.train.loop import train

__all__ = [
    "GRIDS",
    "SECTION_COLUMNS",
    "SECTION_TITLE",
    "Cell",
    "Setup",
    "compare_search",
    "compute_cell",
    "grid_cells",
    "learned_vs_ideal",
    "section_paragraphs",
    "section_rows",
    "train_embedding",
]


@dataclass(frozen=True)
class Setup:
    """The truth, training size and evaluation sizes of one study."""

    dim: int = 3
    kappa: float = 8.0
    n_train: int = 2048
    steps: int = 120
    batch_size: int = 64
    hidden: int = 64
    embedding_dim: int = 8
    queries: int = 1000
    corpus: int = 1000
    search_draws: int = 200


GRIDS: dict[str, tuple[tuple[int, ...], tuple[float, ...], Setup]] = {
    "quick": ((2, 32), (0.1, 0.5), Setup()),
    "standard": (
        (2, 8, 32, 128),
        (0.1, 0.3, 1.0),
        Setup(steps=400, queries=2000, corpus=2000, search_draws=500),
    ),
    "full": (
        (2, 8, 32, 128, 512),
        (0.05, 0.1, 0.3, 1.0),
        Setup(n_train=8192, steps=1500, queries=4000, corpus=5000, search_draws=1000),
    ),
}
"""(k values, tau values, setup) per fidelity; quick runs in about 10-20 s on 2 cores."""


@dataclass(frozen=True)
class Cell:
    """Figures of one (k, tau): see the module docstring."""

    k: int
    tau: float
    top10_overlap: float
    kendall_tau: float
    auc: float
    optimal_auc: float
    auc_gap: float
    search_cross_entropy: float
    search_kl: float
    search_tv: float


def train_embedding(setup: Setup, k: int, tau: float, seed: int) -> DualEncoder:
    """crl's trainer on the vMF truth: SCRL, k negatives y' ~ p- per anchor, InfoNCE at temperature tau."""
    config = parse_config(
        {
            "data": {
                "source": "synthetic",
                "truth": "vmf",
                "dim": setup.dim,
                "kappa": setup.kappa,
                "n_train": setup.n_train,
                "n_heldout": 2,
                "batch_size": setup.batch_size,
            },
            "model": {
                "encoder": "mlp",
                "hidden": [setup.hidden],
                "embedding_dim": setup.embedding_dim,
                "towers": "two",
            },
            "loss": {"tau": tau, "negatives": "independent_pool", "n_negatives": k, "symmetric": False},
            "optim": {"lr": 3e-3, "warmup_steps": min(10, setup.steps), "total_steps": setup.steps},
            "run": {"seed": seed},
        }
    )
    source = build_source(config.data, seed=seed)
    outcome = train(config, source, Streams.derive(seed, regime=config.loss.regime))
    return outcome.model.eval()


def _kendall_tau_b(a: Tensor, b: Tensor, chunk: int = 32) -> Tensor:
    """Kendall's tau-b of each row pair of ``a`` and ``b`` (q, n), by all n(n-1)/2 pairs, ``chunk`` rows at once."""
    upper = torch.triu_indices(a.shape[1], a.shape[1], offset=1)
    out = []
    for start in range(0, a.shape[0], chunk):
        rows_a, rows_b = a[start : start + chunk], b[start : start + chunk]
        da = torch.sign(rows_a[:, upper[0]] - rows_a[:, upper[1]])
        db = torch.sign(rows_b[:, upper[0]] - rows_b[:, upper[1]])
        concordance = (da * db).sum(1)
        out.append(concordance / torch.sqrt((da != 0).sum(1).double() * (db != 0).sum(1).double()))
    return torch.cat(out)


def compare_search(
    truth: VMFUniform, score: DualEncoder, *, k: int, tau: float, setup: Setup, generator: torch.Generator
) -> Cell:
    """The figures of one trained model against s* on fresh held-out draws."""
    x = truth.sample_anchors(setup.queries, generator)
    y = truth.sample_positives(x, generator)
    corpus = truth.sample_negatives((setup.corpus,), generator)
    with torch.no_grad():
        fx = score.encode_anchors(x.float()).double()
        learned = fx @ score.encode_positives(corpus.float()).double().T
        learned_pos = (fx * score.encode_positives(y.float()).double()).sum(1)
    ideal = truth.log_positive_density(x[:, None, :], corpus[None, :, :])
    ideal_pos = truth.log_positive_density(x, y)
    overlap = _top_overlap(learned, ideal, 10)
    rows, width = min(setup.queries, 200), min(setup.corpus, 400)
    kendall = float(_kendall_tau_b(learned[:rows, :width], ideal[:rows, :width]).mean())
    auc, ideal_auc = _auc(learned_pos, learned), _auc(ideal_pos, ideal)
    ce, kl, tv = _search_figures(truth, score, k=k, tau=tau, draws=setup.search_draws, generator=generator)
    return Cell(k, tau, overlap, kendall, auc, truth.optimal_auc(), ideal_auc - auc, ce, kl, tv)


def _auc(positive: Tensor, negatives: Tensor) -> float:
    """Mean of 1[s(x, y) > s(x, y')] + 1/2 1[=] over the anchors' positives and the corpus (ties 1/2)."""
    wins = (positive[:, None] > negatives).double() + 0.5 * (positive[:, None] == negatives).double()
    return float(wins.mean())


def _top_overlap(a: Tensor, b: Tensor, top: int) -> float:
    ta, tb = a.topk(top, dim=1).indices, b.topk(top, dim=1).indices
    return float((ta[:, :, None] == tb[:, None, :]).any(2).double().mean())


def _search_figures(
    truth: VMFUniform, score: DualEncoder, *, k: int, tau: float, draws: int, generator: torch.Generator
) -> tuple[float, float, float]:
    """Mean CE[M_hat_k || Q_hat_k], KL(M_hat_k/wbar || Q_hat_k) and TV over ``draws`` anchors with k points."""
    z = truth.sample_anchors(draws, generator)
    xi = truth.sample_negatives((draws, k), generator)
    log_w = truth.log_positive_density(z[:, None, :], xi) - truth.log_negative_density(xi)
    with torch.no_grad():
        fz = score.encode_anchors(z.float()).double()
        s = (
            fz[:, None, :]
            * score.encode_positives(xi.reshape(-1, truth.dim).float()).double().reshape(draws, k, -1)
        ).sum(2)
    ce = ideal_search_cross_entropy(s, log_w, tau=tau)
    log_q = torch.log_softmax(s / tau, dim=1)
    log_m = torch.log_softmax(log_w, dim=1)
    kl = (log_m.exp() * (log_m - log_q)).sum(1)
    tv = 0.5 * (log_m.exp() - log_q.exp()).abs().sum(1)
    return float(ce.mean()), float(kl.mean()), float(tv.mean())


def grid_cells(fidelity: str, seed: int = 0) -> list[SweepCell]:
    """One sweep cell per (k, tau) of ``GRIDS[fidelity]``, seeded ``seed``; its params hold the whole
    :class:`Setup`, so a stored cell names exactly what it computed."""
    if fidelity not in GRIDS:
        raise ValueError(f"fidelity = {fidelity!r}; pass one of {', '.join(GRIDS)}")
    ks, taus, setup = GRIDS[fidelity]
    return [SweepCell({"k": k, "tau": tau, "setup": asdict(setup)}, seed) for k in ks for tau in taus]


def compute_cell(cell: SweepCell) -> dict[str, Any]:
    """Train one (k, tau) embedding on one thread and compare it with s* (module-level, for spawned workers):
    the fields of :class:`Cell`."""
    setup = Setup(**cell.params["setup"])
    k, tau = int(cell.params["k"]), float(cell.params["tau"])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        model = train_embedding(setup, k, tau, cell.seed)
        state = np.random.SeedSequence([cell.seed, k, round(tau * 1000)]).generate_state(1)[0]
        generator = torch.Generator().manual_seed(int(state))
        truth = VMFUniform(setup.dim, setup.kappa)
        return asdict(compare_search(truth, model, k=k, tau=tau, setup=setup, generator=generator))
    finally:
        torch.set_num_threads(threads)


def learned_vs_ideal(fidelity: str, seed: int = 0) -> list[Cell]:
    """The grid of ``GRIDS[fidelity]`` computed in this process: one trained embedding and its figures per
    (k, tau)."""
    return [Cell(**compute_cell(cell)) for cell in grid_cells(fidelity, seed)]


SECTION_TITLE = "Learned search vs ideal search ([B])"
SECTION_COLUMNS = (
    "k",
    "tau",
    "top-10 overlap",
    "Kendall tau",
    "E(s)",
    "E* (exact)",
    "E* - E (paired)",
    "CE[M_hat_k||Q_hat_k]",
    "KL",
    "TV",
)


def section_paragraphs(setup: Setup) -> tuple[str, ...]:
    """The report section's text before its table: the truth, the training and the columns of one study."""
    return (
        f"Truth: vMF on S^{setup.dim - 1} with kappa = {setup.kappa} (x uniform, y ~ vMF(x, kappa), y' uniform), "
        "where the ideal similarity s*(x, y) = kappa <x, y> - log C(kappa) is exact. For each (k, tau), crl's "
        f"trainer fits a two-tower MLP ({setup.steps} steps, batch {setup.batch_size}, {setup.n_train} pairs, "
        f"SCRL with k negatives y' ~ p- per anchor, InfoNCE at tau); its score s = <f(x), g(y)> is compared "
        f"with s* on {setup.queries} held-out anchors against {setup.corpus} held-out items.",
        "Columns: the top-10 overlap of the rankings by s and by s*; Kendall's tau-b between them; the AUC "
        "E(s), the exact E*, and the gap E* - E estimated on the same draws; [B]'s softmax search Q_hat_k "
        "over k unseen points against the ideal search M_hat_k: the cross-entropy CE[M_hat_k||Q_hat_k] "
        "(crl's reconstruction, as in C8), KL(M_hat_k normalised || Q_hat_k) and their total variation. "
        "Descriptive figures outside the claims: no verdict, no share of the alpha budget.",
    )


def section_rows(cells: Sequence[Cell]) -> tuple[tuple[str, ...], ...]:
    """The report section's table: one row of :data:`SECTION_COLUMNS` per (k, tau)."""
    return tuple(
        (
            str(cell.k),
            f"{cell.tau:g}",
            f"{cell.top10_overlap:.3f}",
            f"{cell.kendall_tau:.3f}",
            f"{cell.auc:.4f}",
            f"{cell.optimal_auc:.4f}",
            f"{cell.auc_gap:+.4f}",
            f"{cell.search_cross_entropy:.3f}",
            f"{cell.search_kl:.3f}",
            f"{cell.search_tv:.3f}",
        )
        for cell in cells
    )
