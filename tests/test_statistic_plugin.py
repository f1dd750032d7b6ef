"""A fit of one's own, added in this one file: a Statistic with its entries, line, figure and metric
(here N* where every seed succeeds, fitted along alpha* as the built-in fits are, with their pieces
from services.stats.api, the statistics' public API), registered as an installed package's entry point of group
vitsweep.statistics would be; the summary, its JSON, the report, the figures and MLflow then carry
it beside the built-in ones."""

from functools import partial
from importlib.metadata import EntryPoint

import pytest
from conftest import SYNTHETIC_SPEC, synthetic_sweep
from mlflow.tracking import MlflowClient

from services import stats
from services.app.logs import sweep_log
from services.report import figures
from services.report import text as report
from services.stats.api import Statistic, fitting, subplots
from services.stats.summarize import summarize
from services.store.tracking import record_sweep


class NStarEverySeed(Statistic):
    """N* where every seed succeeds, its exponent along the family's x per group."""

    name, order = "n_star_all_exponent", 60

    def applies(self, sweep) -> bool:
        return fitting.scaled(sweep)

    def compute(self, sweep, cells) -> dict:
        x, flagged = partial(fitting.x, sweep), fitting.flagged(sweep, cells)
        fits = fitting.fits(cells, flagged, sweep.family.scaling.field, x, fitting.NStar(1.0))
        return {self.name: {group: fit.value for group, fit in fits.items()}}

    def lines(self, summary) -> list[str]:
        return [f"N* at every seed, {group}: exponent {k:.3f}" for group, k in summary.stats[self.name].items()]

    def figures(self, spec, summary, cells) -> dict:
        fig, ax = subplots()
        ax.bar(*zip(*summary.stats[self.name].items()))
        return {"n_star_all_exponent.png": fig}

    def metrics(self, summary) -> dict[str, float]:
        return {f"n_star_all_exponent.{group}": k for group, k in summary.stats[self.name].items()}


@pytest.fixture
def n_star_all(monkeypatch):
    point = EntryPoint("n_star_all_exponent", f"{__name__}:NStarEverySeed", stats.GROUP)
    monkeypatch.setattr(stats, "entry_points", lambda group: [point] if group == stats.GROUP else [])
    stats.statistics.cache_clear()
    yield
    monkeypatch.undo()
    stats.statistics.cache_clear()


def test_a_fit_of_ones_own_reaches_the_json_the_report_the_figures_and_mlflow(n_star_all, tmp_path):
    spec, result = synthetic_sweep()
    summary = summarize(spec, "synthetic-1", result.cells)
    fitted = summary.to_dict()["n_star_all_exponent"]
    # seed 3 of each cell succeeds 5 samples later than the others: every seed does from N = 10 at alpha* = 0.3
    # and from 20 at 0.1 (x = 1/alpha* 3x larger), so k = log 2 / log 3; the CNN's cell at 0.3 failed, no fit
    assert fitted["vit"] == pytest.approx(0.6309, abs=1e-3) and set(fitted) == {"vit"}
    assert "N* at every seed, vit: exponent 0.631" in report.markdown(report.view(summary))
    figs = figures.figures(spec, summary, result.cells)
    assert "n_star_all_exponent.png" in figs and "success_rate_vs_n.png" in figs  # beside the built-in ones
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    made = record_sweep(spec, result, uri, tmp_path, SYNTHETIC_SPEC, sweep_log(spec, summary, result.cells))
    logged = MlflowClient(uri).get_run(made.run_id).data.metrics
    assert logged["n_star_all_exponent.vit"] == pytest.approx(fitted["vit"])
