"""Search mode ``optuna``: fields of one cell tuned by Optuna's TPE sampler through its ask and tell
interface, one trial per sample, each training every (N, seed) of the cell at the sampled values."""

import base64
import dataclasses
import pickle
from typing import TYPE_CHECKING

from services.search.packs import Pack, TrialConfig, packs
from services.search.rounds import RoundPlanner

if TYPE_CHECKING:
    from services.results import ModelRecord
    from services.spec import OptunaMode, Sweep


def distributions(search: "OptunaMode") -> dict:
    """Optuna's distribution of each field of the search space."""
    from optuna.distributions import FloatDistribution, IntDistribution

    return {
        name: IntDistribution(int(r.low), int(r.high), log=r.log)
        if r.integer
        else FloatDistribution(r.low, r.high, log=r.log)
        for name, r in search.space.items()
    }


class OptunaPlanner(RoundPlanner):
    """``num_samples`` trials of the sweep's one cell, each a pack of every (N, seed) at values
    Optuna asks for; the ``metric`` the trial reported (services.results.trial_metrics)
    is told to Optuna. A failed trial is told as failed, and the search goes on."""

    def __init__(self, sweep: "Sweep", slots: int | None = None):
        import optuna

        super().__init__(1)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.sweep, self.search, self.pack = sweep, sweep.search, packs(sweep)[0]
        self.distributions = distributions(sweep.search)
        direction = "maximize" if sweep.search.direction == "max" else "minimize"
        self.study = optuna.create_study(
            sampler=optuna.samplers.TPESampler(seed=sweep.search.seed), direction=direction
        )
        self.asked: dict[str, object] = {}  # trial id -> Optuna's trial
        self.left = sweep.search.num_samples

    def suggest(self, trial_id: str) -> "Pack | str | None":
        if not self.left:
            return None if self.in_flight else self.FINISHED
        self.left -= 1
        self.asked[trial_id] = self.study.ask(self.distributions)
        self.in_flight[trial_id] = self.pack
        return self.pack

    def trial_config(self, trial_id: str, pack: Pack) -> TrialConfig:
        """The pack, the values sampled, and its cell with them resolved here (the trial has no schema)."""
        trial = TrialConfig(pack, self.asked[trial_id].params)
        return dataclasses.replace(trial, resolved=self.sweep.resolve(trial.cell(self.sweep)).to_config())

    def complete(self, trial_id: str, records: "list[ModelRecord] | None", metrics: dict | None = None) -> None:
        import optuna

        self.in_flight.pop(trial_id, None)
        trial = self.asked.pop(trial_id)
        if records is None or metrics is None:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, metrics[self.search.metric])

    def get_state(self) -> dict:
        study = base64.b64encode(pickle.dumps((self.study, self.asked))).decode()
        return super().get_state() | {"study": study, "left": self.left}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.study, self.asked = pickle.loads(base64.b64decode(state["study"]))
        self.left = state["left"]
