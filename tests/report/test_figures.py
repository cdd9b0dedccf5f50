"""Figures a reader can read: tick labels of a symlog axis that do not sit on top of each other.

If this fails, C1(a)'s y axis prints 10^-7, 0 and -10^-9 within a few pixels of each other again.
"""

import numpy as np
from matplotlib.figure import Figure

from crl.report.figures import _set_scale


def test_symlog_ticks_near_zero_are_thinned_to_zero_and_the_decades_outside_the_linear_region() -> None:
    """Values from -1e-4 to 0.5 with the smallest magnitude 1e-9 (C1(a)'s AUC gaps): linthresh is 5e-7 (the
    largest magnitude times 1e-6), and the only major ticks are 0 and decades of magnitude >= 1e-6 (none inside
    the linear region, where 1e-7 sat a fifth of a decade from 0), each at least one decade's length from the
    next on the axis."""
    values = np.array([-1e-4, -3e-6, -1e-9, 0.0, 2e-9, 5e-8, 1e-3, 0.4, 0.5])
    figure = Figure()
    axes = figure.add_subplot()
    axes.plot(np.arange(values.size), values, "o")
    _set_scale(axes, "y", "symlog", values)
    ticks = [t for t in axes.yaxis.get_major_locator()() if axes.get_ylim()[0] <= t <= axes.get_ylim()[1]]
    assert 0.0 in ticks
    assert all(t == 0 or abs(t) >= 0.999e-6 for t in ticks) and len(ticks) >= 5, ticks
    place = axes.yaxis.get_transform().transform
    positions = sorted(float(place(np.array([t]))[0]) for t in ticks)
    decade = float(place(np.array([1e-3]))[0] - place(np.array([1e-4]))[0])
    assert min(np.diff(positions)) >= 0.99 * decade, positions
