"""Experiments on real data that are not verdicts: resumable grids through :mod:`crl.sweep` with their reports.

- :mod:`crl.experiments.mstar`: [A]'s m*(n) on locked features of WordNet and Fashion-MNIST with the exact L_hat
  (``crl experiment mstar --data wordnet|fashion``), one module per role;
- :mod:`crl.experiments.learned_vs_ideal`: learned search against [B]'s ideal search on a vMF truth, the
  descriptive section ``crl verify`` adds beside C8.
"""
