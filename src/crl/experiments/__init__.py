"""Experiments on real data that are not verdicts: resumable grids through :mod:`crl.sweep` with their reports.

- :mod:`crl.experiments.mstar`: the saturation point m*(n) of a metric curve (the C6 rule, with censoring);
- :mod:`crl.experiments.fashion_cell` and :mod:`crl.experiments.fashion_mstar`: [A]'s m*(n) experiment at small
  scale on Fashion-MNIST (``crl experiment fashion-mstar``);
- :mod:`crl.experiments.learned_vs_ideal`: learned search against [B]'s ideal search on a vMF truth, the
  descriptive section ``crl verify`` adds beside C8.
"""
