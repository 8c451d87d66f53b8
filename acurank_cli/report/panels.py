"""Figures with several panels (pareto --view all, allocation): the grid and its axes."""

from __future__ import annotations

import math


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) for n panels: at most 3 columns, as few empty slots as possible, then as square as
    possible (4 panels: 2 x 2, not 3 + 1; 3: one row; 5: 3 + 2)."""
    if n <= 3:
        return 1, max(1, n)
    best = min(range(2, 4), key=lambda c: ((-n) % c, abs(math.ceil(n / c) - c), -c))
    return math.ceil(n / best), best


def panel_axes(fig, n: int, rows: int, cols: int) -> list:
    """n axes on a rows x cols grid; a short last row is centred (no empty panel is drawn)."""
    grid = fig.add_gridspec(rows, 2 * cols)
    axes = []
    for i in range(n):
        r, c = divmod(i, cols)
        shift = (cols - (n - r * cols)) if r == rows - 1 and n % cols else 0  # half-panels of centring
        axes.append(fig.add_subplot(grid[r, 2 * c + shift: 2 * c + shift + 2]))
    return axes
