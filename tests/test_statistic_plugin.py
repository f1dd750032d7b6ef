"""A statistic of one's own, added in this one file: a Statistic with its entries, line, figure and
metric, registered as an installed package's entry point of group vitsweep.statistics would be;
the summary, its JSON, the report, the figures and MLflow then carry it beside the built-in ones."""

from importlib.metadata import EntryPoint

import pytest
from conftest import SYNTHETIC_SPEC, synthetic_sweep
from mlflow.tracking import MlflowClient

from services import stats
from services.app.logs import sweep_log
from services.plotting import subplots
from services.report import figures
from services.report import text as report
from services.stats.base import Statistic
from services.stats.summarize import summarize
from services.store.tracking import record_sweep


class TrainedModels(Statistic):
    """Models trained per model kind (a toy statistic)."""

    name, order = "trained_models", 60

    def compute(self, spec, cells) -> dict:
        counts: dict[str, int] = {}
        for c in cells:
            counts[c.cell.model] = counts.get(c.cell.model, 0) + len(c.records)
        return {self.name: counts}

    def lines(self, summary) -> list[str]:
        return [f"models trained, {kind}: {n}" for kind, n in summary.stats[self.name].items()]

    def figures(self, spec, summary, cells) -> dict:
        fig, ax = subplots()
        ax.bar(*zip(*summary.stats[self.name].items()))
        return {"trained_models.png": fig}

    def metrics(self, summary) -> dict[str, float]:
        return {f"trained_models.{kind}": n for kind, n in summary.stats[self.name].items()}


@pytest.fixture
def trained_models(monkeypatch):
    point = EntryPoint("trained_models", f"{__name__}:TrainedModels", stats.GROUP)
    monkeypatch.setattr(stats, "entry_points", lambda group: [point] if group == stats.GROUP else [])
    stats.statistics.cache_clear()
    yield
    monkeypatch.undo()
    stats.statistics.cache_clear()


def test_a_statistic_of_ones_own_reaches_the_json_the_report_the_figures_and_mlflow(trained_models, tmp_path):
    spec, result = synthetic_sweep()
    summary = summarize(spec, "synthetic-1", result.cells)
    trained = {m: sum(len(c.records) for c in result.cells if c.cell.model == m) for m in spec.models}
    assert summary.to_dict()["trained_models"] == trained and all(trained.values())
    assert f"models trained, vit: {trained['vit']}" in report.markdown(report.view(summary))
    figs = figures.figures(spec, summary, result.cells)
    assert "trained_models.png" in figs and "success_rate_vs_n.png" in figs  # beside the built-in ones
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    made = record_sweep(spec, result, uri, tmp_path, SYNTHETIC_SPEC, sweep_log(spec, summary, result.cells))
    assert MlflowClient(uri).get_run(made.run_id).data.metrics["trained_models.vit"] == trained["vit"]
