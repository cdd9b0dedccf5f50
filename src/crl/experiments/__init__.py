"""Experiments on real data that are not verdicts: resumable grids through :mod:`crl.sweep` with their reports.

- :mod:`crl.experiments.mstar`: the saturation point m*(n) of a metric curve (the C6 rule, with censoring);
- :mod:`crl.experiments.mstar_design`, :mod:`~crl.experiments.mstar_cell`, :mod:`~crl.experiments.mstar_experiment`,
  :mod:`~crl.experiments.mstar_summary` and :mod:`~crl.experiments.mstar_report`: [A]'s m*(n) on locked features
  of WordNet and Fashion-MNIST with the exact L_hat (``crl experiment mstar --data wordnet|fashion``);
- :mod:`crl.experiments.learned_vs_ideal`: learned search against [B]'s ideal search on a vMF truth, the
  descriptive section ``crl verify`` adds beside C8.
"""
