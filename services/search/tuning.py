"""The strategy of a sweep with a tuning section (TuningStrategy, entry point ``tuning``): every
cell's (B, eta) chosen on selection seeds, then its N* measured with the search section's strategy,
which it asks only what any Strategy answers; its budget, problems, pilots and planner
(services.search.tuning_one_pass one pass's, tuning_multi_pass multi-pass's)."""

import dataclasses
import math
from typing import TYPE_CHECKING, ClassVar, Literal

from services.results import Cell
from services.search.rounds import RoundPlanner
from services.search.tuning_multi_pass import MultiPassTuning
from services.search.tuning_one_pass import OnePassTuning
from services.spec import PilotRun, Problem, Setting, Strategy, Tuning
from services.spec.resolved import SweepView
from services.spec.strategies import renamed, spread

if TYPE_CHECKING:
    from services.spec import Sweep


class TuningStrategy(Strategy):
    """The strategy of a sweep with a tuning section: every cell's (B, eta) chosen on selection
    seeds, then its N* measured (one pass: under growing sample caps; multi-pass: an N* search of
    ``search`` per setting). Made by services.spec.strategies.tuned, never named by a search section."""

    mode: Literal["tuning"] = "tuning"
    tuning: Tuning
    search: Strategy
    fixed: ClassVar[bool] = False
    planned: ClassVar[bool] = False
    section: ClassVar[bool] = False

    def pilots(self, sweep: SweepView, cell: Cell, models: int) -> list[PilotRun]:
        """At the grid's smallest batch size (one pass: and at its largest, for a run's samples to
        stop change with B: the main job of then's ViT at 0.15, 5,120 at B = 32, > 10,400 at 8),
        each at the cell's sample budget, its models at step sizes spread over the grid's (at the
        middle one alone, fig1_grid_one_pass_tuned's pilots saw a fifth of the steps its
        selections took); multi-pass each of those step sizes at the N grid's smallest and largest
        N (at its largest alone, fig1_grid_multi_pass_tuned's ViT plan counted 2.1x the model-steps
        its sweep took, whose runs at N = 2-16 settle in 20-80 steps; at the step sizes' ends alone,
        its CNN's middle one, the fastest, drew the largest one's runs of thousands of steps)."""
        resolved, tuning = sweep.resolved_cell(cell), sweep.tuning_of(cell.model)
        lrs = sorted(tuning.lr or [resolved.training.lr])
        batches = sorted(tuning.batch_size or [resolved.training.batch_size])
        at = batches[:1] + (batches[-1:] if resolved.one_pass and batches[-1] != batches[0] else [])
        spread_lr = spread(tuning.lr, models) if tuning.lr else None
        n = None
        if not resolved.one_pass:
            each, ends = sorted(set(spread_lr or lrs)), sorted(set(spread(resolved.n_values, 2)))
            spread_lr, n = tuple(lr for _ in ends for lr in each), tuple(x for x in ends for _ in each)
            models = len(n)
        middle = lrs[len(lrs) // 2]
        return [
            PilotRun(dataclasses.replace(resolved.training.at_batch(b), lr=middle), models, spread_lr, n) for b in at
        ]

    def settings(self, sweep: SweepView, model: str) -> int:
        """Settings tried per cell of a model before any extension: the grid's, or Optuna's samples."""
        t = sweep.tuning_of(model)
        return t.num_samples if t.sampler == "optuna" else len(t.lr or [0]) * len(t.batch_size or [0])

    def runs(self, sweep: SweepView, cell: Cell) -> int:
        """A cell's runs before any extension (one pass: one training each; multi-pass: an N* search
        each): every setting on the selection seeds, and the measurement on the sweep's seeds."""
        return self.settings(sweep, cell.model) * self.tuning.selection_seeds + sweep.seeds

    def first_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """Its grid on the selection seeds and the measurement, before any extension."""
        one_pass = sweep.resolved_cell(cell).one_pass
        return self.runs(sweep, cell) * (1 if one_pass else len(sweep.resolved_cell(cell).n_values))

    def most_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """Every setting it may reach (extensions included) on the selection seeds once per sample
        cap (one pass) or through a whole N* search (multi-pass), and its measurement."""
        tuning, training = sweep.tuning_of(cell.model), sweep.resolved_cell(cell).training
        settings = tuning.most_settings(Setting(training.batch_size, training.lr)) * self.tuning.selection_seeds
        if sweep.resolved_cell(cell).one_pass:
            return settings * len(tuning.caps(training.batch_size * training.max_steps)) + sweep.seeds
        return (settings + sweep.seeds) * self.search.most_n(sweep, cell)

    def most_steps(self, sweep: SweepView, cell: Cell) -> int:
        """The cell's sample budget at the smallest batch it may reach (one pass: an extension
        past the grid's smallest takes that many more steps), or a multi-pass retry's cap."""
        training = sweep.resolved_cell(cell).training
        steps = training.batch_size * training.max_steps // self.smallest_batch(sweep, cell)
        if sweep.resolved_cell(cell).one_pass or (adaptive := self.search.adaptive()) is None:
            return steps
        return max(steps, adaptive.max_steps_cap or 0)

    def smallest_batch(self, sweep: SweepView, cell: Cell) -> int:
        """One pass: the smallest batch size its extensions may reach below its grid's; multi-pass: its grid's."""
        training, tuning = sweep.resolved_cell(cell).training, sweep.tuning_of(cell.model)
        if sweep.resolved_cell(cell).one_pass:
            return int(tuning.reach("batch_size", training.batch_size)[0])
        return min(tuning.batch_size or [training.batch_size])

    def most_rounds(self, sweep: SweepView, cell: Cell) -> int:
        """Each selection round moves at least one setting (extensions included) one cap (one
        pass) or one N* search round (multi-pass) on; then the measurement: one round, or a search."""
        tuning = sweep.tuning_of(cell.model)
        if tuning.sampler == "optuna":
            return math.ceil(tuning.num_samples / tuning.parallel) + 1
        training = sweep.resolved_cell(cell).training
        settings = tuning.most_settings(Setting(training.batch_size, training.lr))
        if sweep.resolved_cell(cell).one_pass:
            return settings * len(tuning.caps(training.batch_size * training.max_steps)) + 1
        search = self.search.most_rounds(sweep, cell)
        return (settings + 1) * search

    def n_limit(self, sweep: SweepView) -> int:
        return self.search.n_limit(sweep)

    def trainings_text(self, sweep: SweepView, first: int, most: int) -> str:
        return self.search.trainings_text(sweep, first, most)

    def trials(self, first_packs: int) -> int | None:
        return None

    def objective(self) -> tuple[str, str] | None:
        return None

    def make_planner(self, sweep: "Sweep", slots: int | None = None) -> RoundPlanner:
        """One pass's (successive caps) or multi-pass's (an N* search per setting)."""
        return OnePassTuning(sweep) if sweep.resolved_cell(sweep.cells[0]).one_pass else MultiPassTuning(sweep)

    def problems(self, sweep: SweepView) -> list[Problem]:
        """Tuning searches eta and B in cells of one protocol (multi_pass: a grid, each setting's
        N* searched adaptively): nothing else may set them per cell, and its selection seeds are
        never measurement seeds (seed_start shifts both: Tuning.selection_seed_list)."""
        tuning = self.tuning
        own = {m: grid.tuning for m, grid in sweep.spec.per_model.items() if getattr(grid, "tuning", None)}
        problems = self.search.problems(sweep)
        if not (tuning.lr or tuning.batch_size):
            problems.append(Problem("tuning", None, "give the values to try: lr, batch_size or both"))
        one_pass = [sweep.resolved_cell(c).one_pass for c in sweep.cells]
        if any(one_pass) and not all(one_pass):
            problems.append(
                Problem("tuning", None, "needs one training.protocol in every cell: one_pass or multi_pass")
            )
        if not any(one_pass):
            if self.search.adaptive() is None:  # no N* search to run per setting
                problems.append(
                    Problem(
                        "search.mode", self.search.mode, "multi_pass tuning searches N* per setting: sample_complexity"
                    )
                )
            if tuning.sampler != "grid":
                problems.append(Problem("tuning.sampler", tuning.sampler, "multi_pass tuning searches a grid: grid"))
        if self.search.objective() is not None:  # its trials sample a cell's values themselves
            problems.append(
                Problem("search.mode", self.search.mode, "tuning searches every cell itself: grid or sample_complexity")
            )
        for model in sweep.models:
            mine = sweep.tuning_of(model)
            for name in ("lr", "batch_size"):
                if getattr(mine, name) is None:
                    continue
                training = getattr(sweep.spec.per_model.get(model), "training", None)
                if name in sweep.spec.axes_of(model) or (training and getattr(training, name) is not None):
                    where = "axes" if name in sweep.spec.axes_of(model) else f"per_model.{model}.training"
                    path = f"per_model.{model}.tuning.{name}" if model in own else f"tuning.{name}"
                    problems.append(Problem(path, getattr(mine, name), f"also set in {where}.{name}: keep one"))
        problems += [
            Problem(f"{sweep.family.scaling.rule}.{m}.batch_size", rule.batch_size, "0 when tuning searches batch_size")
            for m, rule in sweep.spec.scaling_rules.items()
            if rule.batch_size and sweep.tuning_of(m).batch_size
        ]
        if any(one_pass) and not all(sweep.resolved_cell(c).training.stability_window for c in sweep.cells):
            problems.append(
                Problem(
                    "training.stability_window", 0, "tuning needs a window (> 1): settings are compared on one rule"
                )
            )
        if tuning.selection_seed_start < sweep.seeds:
            problems.append(
                Problem(
                    "tuning.selection_seed_start",
                    tuning.selection_seed_start,
                    f"must be at least seeds={sweep.seeds}: selection seeds are never measurement seeds "
                    "(seed_start shifts both: the measurement seeds from seed_start, the selection's from "
                    "seed_start + selection_seed_start)",
                )
            )
        return problems


__getattr__ = renamed(
    __name__,
    {
        "Tuned": ("services.search.tuning.TuningStrategy", TuningStrategy),
        "TuningSearch": ("services.search.tuning_one_pass.OnePassTuning", OnePassTuning),
    },
)
