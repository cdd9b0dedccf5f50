"""[A]'s m*(n) on locked features of WordNet and Fashion-MNIST with the exact L_hat (``crl experiment mstar``;
docs/claims/C6_real.md): one module per role.

- :mod:`crl.experiments.mstar.design`: the grids, arms, recipes and cells of each data set and fidelity;
- :mod:`crl.experiments.mstar.cell`: one cell, a head trained through :mod:`crl.train.loop` and scored;
- :mod:`crl.experiments.mstar.experiment`: the locked features, the resumable run of the grid, the stored cells;
- :mod:`crl.experiments.mstar.summary`: curves, the tolerance-band m*, slopes, contrasts, convergence, cost;
- :mod:`crl.experiments.mstar.passage`: the first-passage m_q at fixed tolerances and [A]'s shape;
- :mod:`crl.experiments.mstar.report`: the figures and the Markdown report.

The saturation statistics themselves live in :mod:`crl.stats.saturation`.
"""
