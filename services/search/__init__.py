"""How a sweep chooses what to train: each search mode's round planner (planners), the packs they
plan (packs, rounds), and the planners themselves (grid, optuna, nstar, tuning, tuning_multi_pass)."""
