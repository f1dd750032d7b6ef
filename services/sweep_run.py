"""One `vitsweep run` of a sweep, made once: which sweep it is (its spec, id, home, tracking URI,
recorded text, where it speaks), who follows it (the progress line, the live MLflow record, the
strategy's round planner) and the one accumulator of its cells' results. Each finished trial is
decoded once, into a TrialOutcome, from what it reported (services.execution.trial); the planner,
the followers and the final SweepResult read that outcome. Ray Tune's callback feeds it
(services.execution.ray_tune); nothing here imports Ray."""

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from services.results import SELECTION, Cell, CellResult, ModelRecord, SweepResult, in_spec_order
from services.search.packs import TrialConfig, pack_cost
from services.spec import Sweep
from services.spec.strategies import Planner


class Follower(Protocol):
    """What follows a run's cells as its trials start and end (services.store.live.LiveRecord)."""

    def started(self, cell: Cell) -> None: ...

    def ended(self, result: CellResult, failed: bool = False) -> None: ...


@dataclass(frozen=True)
class Running:
    """A trial in flight: its cell's short name (Cell.run_name), its pack's cost (pack_cost), when
    it started (time.monotonic()), once it has said, its step and the most its pack takes, and its
    model kind."""

    cell: str
    cost: float
    since: float
    step: tuple[int, int] | None = None
    kind: str = ""


class Ended(NamedTuple):
    """A trial that reported: its pack's cost, its seconds and its model kind (what the ETA fits)."""

    cost: float
    seconds: float
    kind: str = ""


@dataclass(frozen=True)
class Trials:
    """A run's trials as its progress shows them: how many ended (``failed`` of them without
    records), the models trained or read from the cache, the seconds the ended ones spent training,
    each reported trial's cost, seconds and kind, and the trials in flight."""

    done: int = 0
    failed: int = 0
    models: int = 0
    train_s: float = 0.0
    ended: tuple[Ended, ...] = ()
    running: tuple[Running, ...] = ()


ProgressFn = Callable[[Trials], None]  # told at every trial's start, step and end


def reported(records: list[dict], curves: list[dict]) -> dict[str, str]:
    """What a trial reports of its models besides its scalar metrics (TrialOutcome.of reads it back)."""
    return {"records": json.dumps(records), "curves": json.dumps(curves)}


@dataclass(frozen=True)
class TrialOutcome:
    """A trial that ended: its config and cell, and either its records with its curve parts and
    counts, or ``failure`` (why it failed; records None). ``metrics``: its scalar metrics (an
    objective's value among them)."""

    trial_id: str
    config: TrialConfig
    cell: Cell
    records: list[ModelRecord] | None
    curves: list[dict] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    failure: str | None = None

    @classmethod
    def of(cls, trial_id: str, config: TrialConfig, cell: Cell, result: dict) -> "TrialOutcome":
        """The outcome of a trial that reported ``result``: its records decoded; its curves unless
        the pack is a retry's (its models would count twice) or a tuning selection's (not the cell's
        measured models)."""
        pack = config.pack
        records = [ModelRecord.from_dict(r) for r in json.loads(result["records"])]
        curves = json.loads(result["curves"]) if pack.max_steps is None and pack.phase != SELECTION else []
        scalars = {k: float(v) for k, v in result.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        return cls(trial_id, config, cell, records, curves, scalars)

    @property
    def models(self) -> int:
        """Models the trial trained or read from the result cache."""
        return int(self.metrics.get("trainings", 0) + self.metrics.get("cache_hits", 0))

    def span(self) -> tuple[float, float] | None:
        """When it trained, epoch seconds: its end as it reported it (else Tune's timestamp, whole
        seconds) less its running time; None where it reported neither."""
        if "timestamp" not in self.metrics or "time_total_s" not in self.metrics:
            return None
        end = self.metrics.get("ended_at", self.metrics["timestamp"])
        return end - self.metrics["time_total_s"], end


@dataclass
class SweepRun:
    """One run of a sweep (see the module's docstring). ``started``, ``ended`` and ``failed`` are
    told by Ray Tune's callback; ``restored`` by the executor with the trials an earlier run of the
    same sweep finished (their planner already learnt from them); ``result`` at the end."""

    sweep: Sweep
    sweep_id: str
    home: Path
    uri: str = ""
    spec_text: str = ""
    say: Callable[[str], None] = print
    progress: ProgressFn | None = None
    live: Follower | None = None
    planner: Planner | None = None
    cells: dict[str, CellResult] = field(default_factory=dict)  # cell key -> its results so far: the one accumulator
    outcomes: list[TrialOutcome] = field(default_factory=list)  # every trial that ended, decoded once, in order
    running: dict[str, Running] = field(default_factory=dict)  # trial id -> the trial in flight

    def __post_init__(self) -> None:
        self.cost = pack_cost(self.sweep)  # a pack's cost, for the ETA (services.estimate.eta)

    def started(self, trial_id: str, config: TrialConfig) -> None:
        cell = config.cell(self.sweep)
        self.running[trial_id] = Running(cell.run_name, self.cost(config.pack), time.monotonic(), kind=cell.model)
        if self.live is not None:
            self.live.started(cell)
        self._tell()

    def stepped(self, trial_id: str, step: int, cap: int) -> None:
        """A trial in flight reached ``step`` of the ``cap`` its pack takes at most."""
        if (running := self.running.get(trial_id)) is not None:
            self.running[trial_id] = replace(running, step=(step, cap))
            self._tell()

    def ended(self, trial_id: str, config: TrialConfig, result: dict) -> TrialOutcome | None:
        """A trial ended with ``result``: its outcome, learnt by the planner and added; None where
        it stopped before it reported (its pack failed, for the planner)."""
        self.running.pop(trial_id, None)
        if "records" not in result:
            self._learn(trial_id, None)
            self._tell()
            return None
        outcome = TrialOutcome.of(trial_id, config, config.cell(self.sweep), result)
        self._learn(trial_id, outcome)
        self._add(outcome)
        return outcome

    def failed(self, trial_id: str, config: TrialConfig, why: str) -> TrialOutcome:
        """A trial failed (Ray retried it ``resources.max_failures`` times): ``why``, its cause."""
        self.running.pop(trial_id, None)
        outcome = TrialOutcome(trial_id, config, config.cell(self.sweep), None, failure=why)
        self._learn(trial_id, outcome)
        self._add(outcome)
        return outcome

    def restored(self, finished: list[tuple[str, dict, dict]]) -> None:
        """Trials an earlier run of this sweep finished, as (trial id, config, result): added, not
        learnt (the planner's saved state holds them)."""
        for trial_id, config, result in finished:
            own = TrialConfig.of(config)
            self._add(TrialOutcome.of(trial_id, own, own.cell(self.sweep), result))

    def result(self, unfinished: int, search_ended: bool, slots: int, storage: Path, began: float) -> SweepResult:
        """The sweep as its trials left it since ``began`` (epoch seconds): its cells in spec order,
        what it cost, the best sample where its strategy has an objective."""
        done = [o for o in self.outcomes if o.records is not None]
        result = SweepResult(
            self.sweep_id,
            in_spec_order(self.cells.values(), self.sweep.cells),
            trainings=int(sum(o.metrics.get("trainings", 0) for o in done)),
            wall_s=time.time() - began,
            storage=str(storage),
            unfinished=unfinished,
            search_stopped=not search_ended,
            cache_hits=int(sum(o.metrics.get("cache_hits", 0) for o in done)),
            train_s=sum(o.metrics.get("pack_wall_s", 0.0) for o in done),
            slots=slots,
        )
        result.best = self._best()
        # a resumed sweep started when its earliest trial did, in an earlier run of the command
        result.started_at = min([began, *(c.started_at for c in result.cells if c.started_at is not None)])
        result.ended_at = time.time()
        return result

    def _learn(self, trial_id: str, outcome: TrialOutcome | None) -> None:
        if self.planner is not None:
            ok = outcome is not None and outcome.records is not None
            self.planner.complete(trial_id, outcome.records if ok else None, outcome.metrics if ok else None)

    def _add(self, outcome: TrialOutcome) -> None:
        self.outcomes.append(outcome)
        cell = self.cells.setdefault(outcome.cell.key, CellResult(outcome.cell))
        if outcome.records is None:
            pack = outcome.config.pack
            cell.failures.append(
                f"{outcome.cell.label} n_train={list(pack.n_train)} seeds={list(pack.seeds)}: {outcome.failure}"
            )
        else:
            cell.add(outcome.records, outcome.curves)
            if (span := outcome.span()) is not None:
                cell.started_at = span[0] if cell.started_at is None else min(cell.started_at, span[0])
                cell.ended_at = span[1] if cell.ended_at is None else max(cell.ended_at, span[1])
        if self.live is not None:
            self.live.ended(_snapshot(cell), failed=outcome.records is None)
        self._tell()

    def _best(self) -> dict[str, Any] | None:
        """The best trial of a search with an objective: its sampled values and the objective (the
        first of equals in trial order, trials without a finite value left out)."""
        if (objective := self.sweep.strategy.objective()) is None:
            return None
        metric, direction = objective
        sign = 1 if direction == "max" else -1
        scored = sorted(
            (o for o in self.outcomes if o.records is not None and math.isfinite(o.metrics.get(metric, math.nan))),
            key=_trial_order,
        )
        if not scored:
            return None
        top = max(scored, key=lambda o: sign * o.metrics[metric])  # max keeps the first of equals
        return {"values": top.cell.values, metric: top.metrics[metric]}

    def _tell(self) -> None:
        if self.progress is not None:
            done = [o for o in self.outcomes if o.records is not None]
            self.progress(
                Trials(
                    len(self.outcomes),
                    len(self.outcomes) - len(done),
                    sum(o.models for o in done),
                    sum(o.metrics.get("pack_wall_s", 0.0) for o in done),
                    tuple(
                        Ended(self.cost(o.config.pack), o.metrics.get("time_total_s", 0.0), o.cell.model) for o in done
                    ),
                    tuple(self.running.values()),
                )
            )


def _trial_order(outcome: TrialOutcome) -> tuple[int, str]:
    """Tune's trial ids end in the trial's number (``abc12_00007``): the order trials were made."""
    tail = outcome.trial_id.rsplit("_", 1)[-1]
    return (int(tail), outcome.trial_id) if tail.isdigit() else (0, outcome.trial_id)


def _snapshot(cell: CellResult) -> CellResult:
    """A copy of a cell's results that the live record's thread may read while trials add to the cell."""
    return replace(cell, records=list(cell.records), failures=list(cell.failures), curve_parts=list(cell.curve_parts))
