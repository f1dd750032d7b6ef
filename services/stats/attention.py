"""Attention concentration (Paper A, Prop. 2): per cell that measures it, at its largest N, the
mean label-relevant attention mass at the first and last evaluation, and whether the mean curve
never falls (by more than 0.005); drawn against the step beside the paper's Fig. 2(a)."""

import numpy as np

from services.plotting import legend_beside, subplots
from services.results import CellResult
from services.spec import Sweep
from services.stats.base import Statistic
from services.stats.rows import Summary


class Attention(Statistic):
    name, order = "attention", 30

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict:
        out = {}
        for c in cells:
            if measured := c.attention_curve():
                n, curve = measured
                values = np.array([v for _, v in curve])
                out[c.cell.label] = {
                    "n": n,
                    "start": float(values[0]),
                    "end": float(values[-1]),
                    "monotone": bool(np.all(np.diff(values) > -0.005)),
                }
        return {self.name: out}

    def lines(self, summary: Summary) -> list[str]:
        return [
            f"attention mass, {label} (N = {a['n']}): {a['start']:.3f} -> {a['end']:.3f}, "
            f"{'monotone' if a['monotone'] else 'not monotone'}"
            for label, a in summary.stats[self.name].items()
        ]

    def figures(self, sweep: Sweep, summary: Summary, cells: list[CellResult]) -> dict:
        if not summary.stats[self.name]:
            return {}
        fig, ax = subplots(figsize=(6, 4.5))
        for c in cells:
            if measured := c.attention_curve():
                n, curve = measured
                ax.plot(*zip(*curve), label=f"{c.cell.setting} N={n}")
        if (ref := sweep.family.attention_reference()) is not None:
            ax.plot(ref.x, ref.y, "kx--", label=ref.label)
        ax.set(
            xlabel="SGD step",
            ylabel="attention mass on label-relevant tokens",
            ylim=(0, 1.02),
            title="attention concentration (Prop. 2)",
        )
        legend_beside(ax)
        return {"attention_mass.png": fig}


STATISTIC = Attention()
