"""What the models learned, per cell at its largest N (a multi-pass grid: at each of its N): mean
test and training error with bootstrap CIs over seeds, whether a model fits its own training data,
and on Paper B's synthetic data the lowest error its data allow (bayes_error), patch association
(the share of models whose every row of A is associated with its patch's set; of rows; on P P^T
for vanilla attention) and the median cos(v, w*); on images, the positional scores' mass on each
patch's grid neighbours against uniform attention's, and vanilla minus positional attention's
errors paired by seed. Drawn as Paper B's Fig. 4 curves."""

import numpy as np

from services.analysis import mean_ci, paired_difference
from services.plotting import legend_beside, subplots
from services.results import CellResult
from services.spec import Sweep
from services.stats.base import Statistic, fmt
from services.stats.rows import Summary, at_n

NAMES = (
    "test_error",
    "train_error",
    "bayes_error",
    "patch_association",
    "patch_association_rows",
    "patch_association_gram",
    "cos_v_wstar",
    "local_attention",
    "local_chance",
    "attention_difference",
)
ATTENTIONS = ("positional", "vanilla")  # Paper B's two attentions, compared on real images
UNDERFIT_SHARE, UNDERFIT_FLOOR = 0.8, 0.05


def underfits(test_error: float | None, train_error: float | None) -> bool:
    """A model that cannot fit its own training data: mean training error at least 5% and at least
    80% of its test error. Its test error then says what the model class cannot represent, not
    how it generalises, so such a cell cannot test a claim about what training finds."""
    if test_error is None or train_error is None:
        return False
    return train_error >= UNDERFIT_FLOOR and train_error >= UNDERFIT_SHARE * test_error


def _at(out: dict, label: str, models: list[dict]) -> None:
    """The entries for one cell at one N, from its models' final metrics."""
    for name in ("test_error", "train_error"):
        out[name][label] = mean_ci(np.array([m[name] for m in models], dtype=float))
    if "patch_association" in models[0]:
        out["patch_association"][label] = float(np.mean([m["patch_association"] == 1.0 for m in models]))
        out["patch_association_rows"][label] = float(np.mean([m["patch_association"] for m in models]))
    if "patch_association_gram" in models[0]:
        out["patch_association_gram"][label] = float(np.mean([m["patch_association_gram"] for m in models]))
    if "cos_v_wstar" in models[0]:
        out["cos_v_wstar"][label] = float(np.median([m["cos_v_wstar"] for m in models]))
    if "local_attention" in models[0]:
        out["local_attention"][label] = mean_ci(np.array([m["local_attention"] for m in models], dtype=float))


def _differences(out: dict, cells: list[CellResult]) -> None:
    """Vanilla minus positional attention, per setting both have: test and training error at their
    largest common N, paired by seed (a seed draws the same training images for both)."""
    by_setting: dict[str, dict[str, CellResult]] = {}
    for c in cells:
        if c.cell.model in ATTENTIONS:
            by_setting.setdefault(c.cell.setting, {})[c.cell.model] = c
    for setting, pair in by_setting.items():
        if len(pair) < 2:
            continue
        finals = [
            {(r.n_train, r.seed): r.metrics for r in pair[kind].measured() if not r.diverged} for kind in ATTENTIONS
        ]
        common = sorted(finals[0].keys() & finals[1].keys())
        if not common:
            continue
        n = common[-1][0]
        keys = [key for key in common if key[0] == n]
        out["attention_difference"][setting] = {
            name: paired_difference(*(np.array([f[key][name] for key in keys], dtype=float) for f in finals[::-1]))
            for name in ("test_error", "train_error")
        } | {"n_train": n}


class Structure(Statistic):
    name, order = "structure", 40

    def empty(self) -> dict:
        return {name: {} for name in NAMES}

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict:
        """Labels end "N=n" where a cell has several N (a search's N are its own steps, a one-pass
        run's its evaluations: those keep their largest only)."""
        out = self.empty()
        for c in cells:
            if not c.measured():
                continue
            data = sweep.resolved_cell(c.cell).data
            bayes = sweep.family.bayes_error(data)
            if bayes is not None:
                out["bayes_error"][c.cell.label] = bayes
            if hasattr(data, "local_chance"):
                out["local_chance"][c.cell.label] = data.local_chance
            measured = [r for r in c.measured() if not r.diverged]  # a diverged model's metrics are NaN
            ns = sorted({r.n_train for r in measured})
            if not sweep.search.fixed or sweep.resolved_cell(c.cell).one_pass:
                ns = ns[-1:]
            for n in ns:
                _at(
                    out,
                    c.cell.label if len(ns) == 1 else at_n(c.cell.label, n),
                    [r.metrics for r in measured if r.n_train == n],
                )
        _differences(out, cells)
        return out

    def lines(self, summary: Summary) -> list[str]:
        stats, lines = summary.stats, []
        if not summary.experiment.reference:
            for label, bayes in _labels(summary):
                error, train = stats["test_error"][label], stats["train_error"].get(label)
                train_mean = train.mean if train else None
                lines.append(
                    f"test error, {label}: {fmt(error.mean, '.4f')}, 95% CI {fmt(error.ci95, '.4f')} over "
                    f"{error.seeds} seeds; training error {fmt(train_mean, '.4f')}"
                    + (f" (the lowest any classifier can reach on these data: {bayes:.4f})" if bayes else "")
                    + (
                        f"; the model does not fit its own training data (training error >= {UNDERFIT_FLOOR:.0%} "
                        f"and >= {UNDERFIT_SHARE:.0%} of the test error), so this cell cannot test a claim about "
                        "what training finds"
                        if underfits(error.mean, train_mean)
                        else ""
                    )
                )
        for label, share in stats["patch_association"].items():
            gram, cos = stats["patch_association_gram"].get(label), stats["cos_v_wstar"].get(label)
            lines.append(
                f"patch association, {label}: every row associated in {share:.0%} of seeds, "
                f"{stats['patch_association_rows'][label]:.0%} of rows on average"
                + (f"; on P P^T {gram:.0%} of rows" if gram is not None else "")
                + (f"; median cos(v, w*) {cos:.3f}" if cos is not None else "")
            )
        for label, mass in stats["local_attention"].items():
            chance = stats["local_chance"].get(label.split(" N=")[0])
            lines.append(
                f"local attention, {label}: {fmt(mass.mean, '.3f')} of the positional scores' mass on a patch's grid "
                f"neighbours, 95% CI {fmt(mass.ci95, '.3f')} over {mass.seeds} seeds (uniform attention: "
                f"{fmt(chance, '.3f')})"
            )
        for setting, diff in stats["attention_difference"].items():
            test, train = diff["test_error"], diff["train_error"]
            lines.append(
                f"vanilla minus positional attention, {setting}, N={diff['n_train']}: test error "
                f"{fmt(test.mean, '+.4f')}, 95% CI {fmt(test.ci95, '+.4f')}; training error {fmt(train.mean, '+.4f')}, "
                f"95% CI {fmt(train.ci95, '+.4f')} (paired by seed over {test.seeds} seeds)"
                + (
                    "; their training errors differ, so this is not a comparison at matched training error"
                    if train.ci95 and (train.ci95[0] > 0 or train.ci95[1] < 0)
                    else ""
                )
            )
        return lines

    def figures(self, sweep: Sweep, summary: Summary, cells: list[CellResult]) -> dict:
        figs = {}
        if not sweep.family.reference and any(c.curve_parts for c in cells):
            figs["structure.png"] = _curves(sweep, summary, cells)
        if any(c.mean_scores() for c in cells):
            figs["learned_attention.png"] = _scores(sweep, cells)
        return figs


def _labels(summary: Summary) -> list[tuple[str, float]]:
    """The test error entries in cell order, each with its cell's Bayes error (0 where unknown): a
    cell's own label, or one label per N of a cell that has several ("... N=400")."""
    out = []
    for row in summary.cells:
        bayes = summary.stats["bayes_error"].get(row.label, 0.0)
        labels = [row.label, *(at_n(row.label, n) for n in sorted(map(int, row.outcomes)))]
        out += [(label, bayes) for label in labels if label in summary.stats["test_error"]]
    return out


def _scores(sweep: Sweep, cells: list[CellResult]):
    """Paper B's Fig 4 left: the learned positional scores of every cell at its largest N, the mean
    over seeds and one seed's own (the smallest), beside the true set matrix where the data has one."""
    shown = [c for c in cells if c.mean_scores()]
    data = sweep.resolved_cell(shown[0].cell).data
    truth = sweep.family.true_sets(data)
    matrices = []
    for c in shown:
        mean, n = c.mean_scores(), max(c.mean_scores())
        matrices.append((f"{c.cell.label}\nlearned scores, N={n}, mean over seeds", mean[n]))
        if n in c.one_seed_scores():
            seed, own = c.one_seed_scores()[n]
            matrices.append((f"{c.cell.label}\nlearned scores, N={n}, seed {seed}", own))
    panels = len(matrices) + (truth is not None)
    fig, axes = subplots(1, panels, figsize=(4 * panels, 3.6), squeeze=False)
    for ax, (title, scores) in zip(axes[0], matrices):
        image = ax.imshow(scores, cmap="viridis")
        ax.set_title(title, fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.046)
    if truth is not None:
        axes[0][-1].imshow(truth, cmap="Greys")
        axes[0][-1].set_title("true sets (same-set pairs)", fontsize=8)
    fig.tight_layout()
    return fig


def _curves(sweep: Sweep, summary: Summary, cells: list[CellResult]):
    """Paper B's Fig 4 curves: test and training error, patch association (on A; vanilla: also on
    P P^T) and cos(v, w*) against the step (those the models have); the test error beside the
    paper's values for the data's labels and the lowest error the data allow where it is not 0."""
    names = {
        "test_error": "test error",
        "train_error": "training error",
        "patch_association": "rows of A associated",
        "patch_association_gram": "rows of P P^T associated",
        "cos_v_wstar": "cos(v, w*)",
    }
    names = {k: v for k, v in names.items() if any(c.curves(k) for c in cells)}
    fig, axes = subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    axes = axes[0]
    steps = set()
    for c in cells:
        for ax, name in zip(axes, names):
            curves = c.curves(name)
            if curves:
                n = max(curves)
                steps |= {step for step, _ in curves[n] if step > 0}
                (line,) = ax.plot(*zip(*curves[n]), label=f"{c.cell.label} N={n}")
                bayes = summary.stats["bayes_error"].get(c.cell.label, 0.0)
                if name == "test_error" and bayes:
                    ax.axhline(
                        bayes, color=line.get_color(), lw=0.8, ls="-.", label=f"Bayes error of its data {bayes:.3f}"
                    )
    if "test_error" in names:
        shown = {
            name: error
            for c in cells
            for name, error in sweep.family.test_error_reference(sweep.resolved_cell(c.cell).data).items()
        }
        for name, error in sorted(shown.items()):
            axes[0].axhline(
                error, color="black", lw=0.8, ls=":" if "plateau" in name else "--", label=f"{name} {error}"
            )
    for ax, title in zip(axes, names.values()):
        ax.set(xlabel="SGD step", title=title + " (mean over seeds)")
        if steps:  # linear up to the first evaluation, then logarithmic, as the paper draws 10^4 steps
            ax.set_xscale("symlog", linthresh=min(steps))
            ax.set_xlim(left=0)
        legend_beside(ax)
    fig.tight_layout()
    return fig


STATISTIC = Structure()
