"""How a sweep chooses what to train: the built-in search strategies, each beside its round planner
(grid, nstar, optuna, tuning), the first round a sweep's strategy plans (planners), the packs they
plan (packs, rounds) and tuning's planners (tuning_one_pass, tuning_multi_pass)."""

import services.spec  # noqa: F401  # first, whatever is imported: its entry points load this package's strategies whole
