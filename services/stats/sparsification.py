"""Token sparsification (Paper A, Fig. 2(b)): per strategy and k tokens removed, the final test
loss and its change against k = 0 (same seeds, largest N), with 95% CIs."""

import numpy as np

from services.analysis import mean_ci, paired_difference
from services.plotting import subplots
from services.results import CellResult
from services.spec import SweepSpec
from services.stats.base import Statistic, fmt
from services.stats.rows import Summary


class Sparsification(Statistic):
    name, order = "sparsification", 50

    def applies(self, spec: SweepSpec) -> bool:
        return "sparsify_k" in spec.swept

    def compute(self, spec: SweepSpec, cells: list[CellResult]) -> dict:
        by_group: dict[str, dict[int, np.ndarray]] = {}
        for c in cells:
            if c.measured() and not c.failures:
                data = spec.resolved_cell(c.cell).data
                by_group.setdefault(c.cell.group(("sparsify_k",)), {})[data.sparsify_k] = c.outcomes().test_loss[-1]
        out = {}
        for name, losses in by_group.items():
            if 0 in losses:
                out[name] = {
                    k: {"test_loss": mean_ci(losses[k]), "change": paired_difference(losses[k], losses[0])}
                    for k in sorted(losses)
                }
        return {self.name: out}

    def lines(self, summary: Summary) -> list[str]:
        lines = []
        for group, ks in summary.stats[self.name].items():
            change = ks[max(ks)]["change"]
            lines.append(
                f"sparsification, {group}: test loss change at k = {max(ks)}: {fmt(change.mean, '+.4f')}, 95% CI "
                f"{fmt(change.ci95, '+.4f')}"
            )
        return lines

    def figures(self, spec: SweepSpec, summary: Summary, cells: list[CellResult]) -> dict:
        """Final test loss against tokens removed, per strategy, with 95% CIs, beside Fig 2(b)."""
        if not summary.stats[self.name]:
            return {}
        fig, ax = subplots(figsize=(6, 4.5))
        colours = {}  # our strategy -> its colour, which the paper's line of that strategy shares
        for group, ks in summary.stats[self.name].items():
            k = np.array(sorted(ks))
            mean = np.array([ks[i]["test_loss"].mean for i in k])
            ci = np.array([ks[i]["test_loss"].ci95 for i in k]).T
            bars = ax.errorbar(k, mean, yerr=[mean - ci[0], ci[1] - mean], marker="o", capsize=3, label=group)
            colours.setdefault(group.split("sparsify=")[-1].split()[0], bars.lines[0].get_color())
        for strategy, ours, points in spec.FAMILY.sparsification_reference():
            ax.plot(*zip(*points), "x--", lw=0.8, color=colours.get(ours, "grey"), label=f"paper: {strategy}")
        ax.set(xlabel="tokens removed per sample", ylabel="test hinge loss", title="token sparsification (Fig 2b)")
        ax.legend(fontsize=7)
        return {"sparsification.png": fig}


STATISTIC = Sparsification()
