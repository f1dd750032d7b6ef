"""What a sweep produces, apart from how it ran: a cell, one model's record, a cell's and a sweep's
results. Plain data and numpy, so that the report, the MLflow module and the state files read
results without Ray or torch."""

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar

import numpy as np

from services import legacy
from services.analysis import Outcomes, counted_success
from vit_core.outcomes import Outcome, summarize_by_n

SELECTION, MEASUREMENT = "selection", "measurement"  # a tuned cell's two phases, as its records name them
CURVES_KEPT = ("test_error", "attention_mass", "patch_association", "cos_v_wstar")  # what a cell's mean curves need


@dataclass(frozen=True)
class Cell:
    """One point of a sweep: a model kind and one value per axis."""

    model: str
    values: dict[str, Any]

    @property
    def label(self) -> str:
        """The cell for people: the model and every axis value ("vit alpha_star=0.1")."""
        return self.group(())

    @property
    def run_name(self) -> str:
        """The cell in a table's width: the model and its axis values alone ("vit 0.1 premised"), MLflow's
        run name (the params name each value's axis)."""
        return " ".join([self.model, *map(str, self.values.values())])

    def group(self, without: tuple[str, ...]) -> str:
        """The label without the axes in ``without``: the name of the cells fitted together along them."""
        return " ".join([self.model, *(f"{k}={v}" for k, v in self.values.items() if k not in without)])

    @property
    def setting(self) -> str:
        """The axis values alone ("alpha_star=0.1", "all" without axes): where two models meet."""
        return " ".join(f"{k}={v}" for k, v in self.values.items()) or "all"

    @property
    def key(self) -> str:
        """The cell as canonical JSON: the stable tag MLflow finds its child run by (from_key reads it)."""
        return json.dumps({"model": self.model, "values": self.values}, sort_keys=True)

    @classmethod
    def from_key(cls, key: str) -> "Cell":
        raw = json.loads(key)
        return cls(raw["model"], raw["values"])


# MLflow's log_table writes floats as pandas' to_json does: 10 decimal places, or 10 significant
# digits in exponent form below 1e-15 and above 1e16 (its JSON encoder's thresholds). A record keeps
# what MLflow keeps, so that a sweep read back from MLflow (report, export) is the sweep that ran (run).
METRIC_DIGITS, EXPONENT_BELOW, EXPONENT_ABOVE = 10, 1e-15, 1e16 - 1


def as_logged(value: float) -> float:
    """``value`` as MLflow's table stores it (see METRIC_DIGITS)."""
    if value != 0 and not EXPONENT_BELOW <= abs(value) <= EXPONENT_ABOVE:
        return float(f"{value:.{METRIC_DIGITS}g}")
    return round(value, METRIC_DIGITS)


@dataclass(frozen=True)
class ModelRecord:
    """One trained model at one N (one pass: one per evaluated N of its run), as vit_core reports
    it (``PackResult.model_records``), typed; ``metrics`` are its final curve values."""

    n_train: int
    seed: int
    outcome: Outcome
    lr: float
    success: bool
    diverged: bool
    settled: bool
    steps: int
    iterations_to_zero: int  # first evaluated step with zero test error; -1: never
    metrics: dict[str, float]  # test_error, test_loss, train_error, attention_mass, ... (NaN: not measured)
    max_steps: int | None = None  # the step budget it trained with (a retry's is larger)
    batch_size: int | None = None  # one pass, or a tuned cell's: B
    n_first_zero: int | None = None  # one pass: its first N with zero test error (-1: never)
    n_stable: int | None = None  # one pass: the N from which its test error stays zero (-1: never)
    censored: bool | None = None  # one pass with a stability window: stopped at its cap before its window closed
    phase: str | None = None  # tuned: "selection" (choosing its setting) or "measurement" (search.tuning_one_pass)

    @property
    def test_error(self) -> float:
        return self.metrics["test_error"]

    @property
    def test_loss(self) -> float:
        return self.metrics["test_loss"]

    @classmethod
    def from_dict(cls, row: dict) -> "ModelRecord":
        """A record from vit_core's flat dict (or a table row); every other number is a metric, kept
        as MLflow keeps it (as_logged). Older names: services.legacy.record_row."""
        row = legacy.record_row(row)
        named = {f.name for f in fields(cls)} - {"metrics"}
        known = {k: v for k, v in row.items() if k in named}
        metrics = {k: float("nan") if v is None else as_logged(float(v)) for k, v in row.items() if k not in named}
        return cls(**known | {"outcome": Outcome(known["outcome"])}, metrics=metrics)

    def as_dict(self) -> dict:
        """The flat dict from_dict reads: vit_core's keys, the metrics beside them."""
        flat = {k: v for k, v in asdict(self).items() if k != "metrics" and v is not None}
        return flat | self.metrics


def model_of(r: ModelRecord) -> tuple:
    """The model a record belongs to: its (seed, setting, phase) and, multi-pass, its N (a one-pass
    run is recorded at every N it was evaluated at)."""
    return (None if r.n_stable is not None else r.n_train, r.seed, r.lr, r.batch_size, r.phase)


def trial_metrics(records: list[ModelRecord], max_steps: int) -> dict[str, float]:
    """The metrics an Optuna search may optimise, over a trial's models: the success rate (over
    the models that count, as everywhere; 0 when none does), the mean test error (1 for a
    diverged model) and the median steps to zero test error (max_steps for a model that never
    reached it)."""
    counted = [v for r in records if (v := counted_success(r.outcome)) is not None]
    return {
        "success_rate": float(np.mean(counted)) if counted else 0.0,
        "mean_test_error": float(np.nanmean([1.0 if r.diverged else r.test_error for r in records])),
        "median_iterations_to_zero": float(
            np.median([r.iterations_to_zero if r.iterations_to_zero >= 0 else max_steps for r in records])
        ),
    }


def in_spec_order(cells, spec_cells: list[Cell]) -> list["CellResult"]:
    """Cell results in their spec's order, then a searcher's sampled cells by their values (not by
    when their trials ended)."""
    order = {cell.key: i for i, cell in enumerate(spec_cells)}
    return sorted(cells, key=lambda c: (order.get(c.cell.key, len(order)), sorted(c.cell.values.items())))


def latest_budget(records: list[ModelRecord]) -> list[ModelRecord]:
    """The records of each model's run with the largest step budget, where a model was trained
    again with a larger one (a multi-pass retry; a tuned one-pass run under a larger cap)."""
    top: dict[tuple, int] = {}
    for r in records:
        top[model_of(r)] = max(top.get(model_of(r), 0), r.max_steps or 0)
    return [r for r in records if (r.max_steps or 0) == top[model_of(r)]]


def confirmed_onwards(records: list[ModelRecord]) -> list[ModelRecord]:
    """One-pass records with a stability window, completed: a run that stopped once its window was
    confirmed is stable at every larger N its setting's other runs were evaluated at, so its last
    record stands for it there (its steps unchanged). Other records are returned as they are."""
    runs: dict[tuple, list[ModelRecord]] = {}
    grids: dict[tuple, set[int]] = {}
    for r in records:
        runs.setdefault((r.seed, r.lr, r.batch_size, r.phase), []).append(r)
        grids.setdefault((r.batch_size, r.phase), set()).add(r.n_train)
    out = list(records)
    for (_, _, batch_size, phase), mine in runs.items():
        last = max(mine, key=lambda r: r.n_train)
        if last.censored is False and last.success:
            out += [replace(last, n_train=n) for n in sorted(grids[batch_size, phase]) if n > last.n_train]
    return out


def outcomes_of(records: list[ModelRecord]) -> Outcomes:
    """One cell's records as the (N x seed) tables the statistics read (services.analysis)."""
    ns = np.array(sorted({r.n_train for r in records}))
    seeds = np.array(sorted({r.seed for r in records}))
    tables = {name: np.full((len(ns), len(seeds)), np.nan) for name in ("success", "steps_to_zero", "test_loss")}
    row, col = {n: i for i, n in enumerate(ns)}, {s: j for j, s in enumerate(seeds)}
    one_pass = all(r.n_first_zero is not None for r in records)
    first_zero = np.full((len(ns), len(seeds)), np.nan) if one_pass else None
    iterate = np.full((len(ns), len(seeds)), np.nan) if one_pass else None
    for r in records:
        i, j = row[r.n_train], col[r.seed]
        tables["success"][i, j] = np.nan if (value := counted_success(r.outcome)) is None else value
        tables["steps_to_zero"][i, j] = r.iterations_to_zero if r.iterations_to_zero >= 0 else np.nan
        tables["test_loss"][i, j] = r.test_loss
        if one_pass and not r.diverged:
            first_zero[i, j] = float(0 <= r.n_first_zero <= r.n_train)
            iterate[i, j] = float(r.test_error == 0) if np.isfinite(r.test_error) else np.nan
    batch = {r.batch_size for r in records}
    batch_size = batch.pop() if one_pass and len(batch) == 1 else None  # N = B·t in one pass only
    return Outcomes(ns, seeds, **tables, batch_size=batch_size, first_zero=first_zero, iterate=iterate)


@dataclass
class CellResult:
    """Every trained model of one cell, and the packs of it that failed."""

    cell: Cell
    records: list[ModelRecord] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    curve_parts: list[dict] = field(default_factory=list)  # per pack: curve -> N -> steps, sums, counts
    started_at: float | None = None  # epoch seconds: when its first pack started training (None: unknown)
    ended_at: float | None = None  # when its last pack finished

    def add(self, records: list[ModelRecord], curves: list[dict]) -> None:
        """A finished trial's records and curve parts: a model trained again under a larger budget
        keeps that run's records alone (latest_budget)."""
        self.records = latest_budget(self.records + records)
        self.curve_parts += curves

    @property
    def trainings(self) -> int:
        """Models trained for the cell (one pass: runs, each recorded at every N it was evaluated at)."""
        return len({model_of(r) for r in self.records})

    def curve_names(self) -> list[str]:
        return [name for name in CURVES_KEPT if any(name in part for part in self.curve_parts)]

    def mean_scores(self) -> dict[int, np.ndarray]:
        """Paper B, per N: the positional attention scores (D, D) averaged over the cell's models."""
        parts = [part["scores"] for part in self.curve_parts if "scores" in part]
        out = {}
        for n in sorted({int(n) for part in parts for n in part}):
            mine = [part[str(n)] for part in parts if str(n) in part]
            out[n] = sum(np.array(p["sum"]) for p in mine) / sum(p["count"] for p in mine)
        return out

    def one_seed_scores(self) -> dict[int, tuple[int, np.ndarray]]:
        """Paper B, per N: (seed, its scores (D, D)) of the cell's smallest seed whose trial kept its
        own, for a figure of one model's A beside the mean (older records keep none)."""
        found: dict[int, tuple[int, np.ndarray]] = {}
        for part in self.curve_parts:
            for n, p in part.get("scores", {}).items():
                if "one" in p and (int(n) not in found or p["seed"] < found[int(n)][0]):
                    found[int(n)] = (p["seed"], np.array(p["one"]))
        return found

    def curves(self, name: str) -> dict[int, list[tuple[int, float]]]:
        """Per N: the mean of curve ``name`` over the cell's models at every evaluated step.

        A pack stops once its models settled, and a settled model no longer changes, so a pack
        that ended earlier counts with its last values at later steps."""
        curves = {}
        mine = [part[name] for part in self.curve_parts if name in part]
        for n in sorted({int(n) for part in mine for n in part}):
            parts = [part[str(n)] for part in mine if str(n) in part]
            steps = sorted({s for p in parts for s in p["steps"]})
            means = []
            for step in steps:
                total = count = 0.0
                for p in parts:
                    i = min(np.searchsorted(p["steps"], step), len(p["steps"]) - 1)
                    total, count = total + p["sum"][i], count + p["count"][i]
                if count:  # else every model had diverged by this step
                    means.append((step, total / count))
            curves[n] = means
        return curves

    def attention_curve(self) -> tuple[int, list[tuple[int, float]]] | None:
        """(the largest N, the mean label-relevant attention mass at each step there), where the
        cell's models measure one (attention on data with label-relevant tokens); else None."""
        curves = self.curves("attention_mass")
        return (max(curves), curves[max(curves)]) if curves and curves[max(curves)] else None

    def measured(self) -> list[ModelRecord]:
        """The records N* is measured on: all of them, or a tuned cell's measurement phase (its
        selection runs chose the setting), runs confirmed by a stability window completed."""
        return confirmed_onwards([r for r in self.records if r.phase != SELECTION])

    def by_n(self) -> list[dict]:
        """Per N, ascending: vit_core.outcomes.summarize_by_n over the cell's measured models."""
        return summarize_by_n([r.as_dict() for r in self.measured()])

    def outcomes(self) -> Outcomes:
        return outcomes_of(self.measured())

    def n_star(self, p: float, criterion: str = "stable") -> int | None:
        """N* at threshold p under ``criterion`` (services.analysis.CRITERIA; a multi-pass cell has
        the stable one alone); None when a pack of the cell failed (an N may be missing) or the
        largest N misses p."""
        if self.failures or not self.records:
            return None
        outcomes = self.outcomes()
        return outcomes.n_star(p, criterion=outcomes.as_defined(criterion))

    def per_seed(self) -> dict | None:
        """One pass: each seed's first N with zero test error and its stable N (-1: never), by seed."""
        firsts = {r.seed: (r.n_first_zero, r.n_stable) for r in self.measured() if r.n_stable is not None}
        seeds = sorted(firsts)
        return (
            {"seeds": seeds, "n_first_zero": [firsts[s][0] for s in seeds], "n_stable": [firsts[s][1] for s in seeds]}
            if firsts
            else None
        )


@dataclass
class SweepResult:
    """A finished (or interrupted) sweep: its cells in spec order and what running it cost."""

    sweep_id: str
    cells: list[CellResult]
    trainings: int
    wall_s: float
    storage: str
    best: dict | None = None  # optuna: the best trial's sampled values and objective
    unfinished: int = 0  # trials stopped before they finished (an interrupted sweep)
    search_stopped: bool = False  # the search was stopped with packs still to plan (Ctrl-C between rounds)
    cache_hits: int = 0  # models read from the result cache instead of trained
    train_s: float = 0.0  # seconds the trials spent in train_pack, summed over trials
    started_at: float | None = None  # epoch seconds: when the sweep started (its first run, if resumed)
    ended_at: float | None = None  # when its last trial was collected
    slots: int = 0  # trials the cluster ran at once (0: not known)
    estimated_s: float | None = None  # the wall time `vitsweep plan` estimated on these slots (None: not planned)
    FORMAT: ClassVar[int] = 1  # to_json's format number, written in the file

    @property
    def busy_fraction(self) -> float | None:
        """The share of the slots' time over the sweep's span (started_at to ended_at) that trials
        spent training (train_s): how busy the sweep kept the CPUs (GPUs). A resumed sweep's span
        holds the time between its runs too."""
        span = (self.ended_at or 0) - (self.started_at or 0)
        return round(self.train_s / (self.slots * span), 4) if self.slots and span > 0 else None

    def to_json(self) -> str:
        cells = [
            {
                "model": c.cell.model,
                "values": c.cell.values,
                "records": [r.as_dict() for r in c.records],
                "failures": c.failures,
                "curve_parts": c.curve_parts,
                "started_at": c.started_at,
                "ended_at": c.ended_at,
            }
            for c in self.cells
        ]
        saved = {"format": self.FORMAT} | {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps(saved | {"cells": cells})

    @classmethod
    def from_dict(cls, saved: dict) -> "SweepResult":
        """A result as to_json wrote it (older formats: services.legacy)."""
        saved = legacy.sweep_result({k: v for k, v in saved.items() if k != "format"})
        cells = [
            CellResult(
                Cell(c["model"], c["values"]),
                [ModelRecord.from_dict(r) for r in c["records"]],
                c["failures"],
                c["curve_parts"],
                c["started_at"],
                c["ended_at"],
            )
            for c in map(legacy.cell_result, saved.pop("cells"))
        ]
        return cls(cells=cells, **saved)
