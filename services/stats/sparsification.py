"""Token sparsification (Paper A, Fig. 2(b) and Section 4.3): per strategy and k tokens removed, a
final test quantity and its change against k = 0 (same seeds), with 95% CIs. A swept
``sparsify_k`` (every sample, training and test, loses k tokens): the final test loss (token data)
or error (real images) at the largest N. Real images with ``test_sparsify`` keep their training
images whole: each trained model's test error after its test images lost k patches by each rule
(k = 0: its test error), from the same models, at the largest N."""

import numpy as np

from services.analysis import mean_ci, paired_difference
from services.plotting import legend_beside, subplots
from services.results import CellResult
from services.spec import Sweep
from services.stats.base import Statistic, fmt
from services.stats.rows import Summary
from vit_core.sparsify import sparsified_name

QUANTITIES = {"test_loss": "test hinge loss", "test_error": "test error"}  # what a group measures, in words

Groups = dict[str, tuple[str, dict[int, np.ndarray]]]  # group -> (its quantity, k -> per-seed values)


def _swept(sweep: Sweep, cells: list[CellResult]) -> Groups:
    """Along a swept sparsify_k (every sample, training and test, loses k tokens): per cell, the
    family's final test quantity (token data: the loss; images: the error) per seed, at the largest N."""
    groups: Groups = {}
    quantity = sweep.family.sparsification_quantity
    for c in cells:
        if c.measured() and not c.failures and "sparsify_k" in c.cell.values:
            data = sweep.resolved_cell(c.cell).data
            group = groups.setdefault(c.cell.group(("sparsify_k",)), (quantity, {}))
            group[1][data.sparsify_k] = _final(c, quantity)
    return groups


def _final(cell: CellResult, quantity: str) -> np.ndarray:
    """A cell's final test ``quantity`` at its largest N, per seed in seed order (NaN: no record)."""
    if quantity == "test_loss":
        return cell.outcomes().test_loss[-1]
    records = cell.measured()
    n = max(r.n_train for r in records)
    values = {r.seed: r.metrics[quantity] for r in records if r.n_train == n}
    return np.array([values.get(seed, np.nan) for seed in sorted({r.seed for r in records})], dtype=float)


def _at_test(sweep: Sweep, cells: list[CellResult]) -> Groups:
    """Real images: per cell and rule, the test error per model at the largest N, whole (k = 0) and
    after removing each k; a model's values sit at one index in every array (paired by seed)."""
    groups: Groups = {}
    for c in cells:
        data = sweep.resolved_cell(c.cell).data
        records = [r for r in c.measured() if not r.diverged]
        if not getattr(data, "test_sparsify_k", ()) or not records:
            continue
        n = max(r.n_train for r in records)
        models = [r.metrics for r in records if r.n_train == n]
        whole = np.array([m["test_error"] for m in models], dtype=float)
        for rule in data.test_sparsify:
            removed = {
                k: np.array([m.get(sparsified_name(rule, k, "error"), np.nan) for m in models], dtype=float)
                for k in data.test_sparsify_k
            }
            groups[f"{c.cell.label} sparsify={rule}"] = ("test_error", {0: whole} | removed)
    return groups


class Sparsification(Statistic):
    name, order = "sparsification", 50

    def applies(self, sweep: Sweep) -> bool:
        tested = any(getattr(sweep.resolved_cell(c).data, "test_sparsify_k", ()) for c in sweep.cells)
        return "sparsify_k" in sweep.swept or tested

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict:
        out = {}
        for name, (quantity, values) in (_swept(sweep, cells) | _at_test(sweep, cells)).items():
            if 0 in values:
                out[name] = {
                    k: {quantity: mean_ci(values[k]), "change": paired_difference(values[k], values[0])}
                    for k in sorted(values)
                }
        return {self.name: out}

    def lines(self, summary: Summary) -> list[str]:
        """Per group: the quantity at k = 0, and its change at every k, paired by seed."""
        lines = []
        for group, ks in summary.stats[self.name].items():
            quantity = _quantity(ks[0])
            changes = "; ".join(
                f"k = {k}: {fmt(ks[k]['change'].mean, '+.4f')}, 95% CI {fmt(ks[k]['change'].ci95, '+.4f')}"
                for k in sorted(ks)
                if k
            )
            lines.append(
                f"sparsification, {group}: {QUANTITIES[quantity]} {fmt(ks[0][quantity].mean, '.4f')} at k = 0; "
                f"change against it (paired by seed over {ks[0]['change'].seeds} seeds) at {changes}"
            )
        return lines

    def figures(self, sweep: Sweep, summary: Summary, cells: list[CellResult]) -> dict:
        """The test quantity against tokens removed, per strategy, with 95% CIs, beside Fig 2(b)."""
        if not summary.stats[self.name]:
            return {}
        fig, ax = subplots(figsize=(6, 4.5))
        colours = {}  # our strategy -> its colour, which the paper's line of that strategy shares
        for group, ks in summary.stats[self.name].items():
            k, quantity = np.array(sorted(ks)), _quantity(ks[0])
            mean = np.array([ks[i][quantity].mean for i in k])
            ci = np.array([ks[i][quantity].ci95 for i in k]).T
            bars = ax.errorbar(k, mean, yerr=[mean - ci[0], ci[1] - mean], marker="o", capsize=3, label=group)
            colours.setdefault(group.split("sparsify=")[-1].split()[0], bars.lines[0].get_color())
        for strategy, ours, points in sweep.family.sparsification_reference():
            ax.plot(*zip(*points), "x--", lw=0.8, color=colours.get(ours, "grey"), label=f"paper: {strategy}")
        ylabel = QUANTITIES[_quantity(next(iter(summary.stats[self.name].values()))[0])]
        title = "token sparsification" + (" (Fig 2b)" if sweep.family.sparsification_reference() else "")
        ax.set(xlabel="tokens removed per sample", ylabel=ylabel, title=title)
        legend_beside(ax)
        return {"sparsification.png": fig}


def _quantity(entry: dict) -> str:
    """The quantity an entry measures (its key other than the change)."""
    return next(q for q in entry if q != "change")


STATISTIC = Sparsification()
