"""`vitsweep plan` and `run --max-minutes`: counts from the budgets on every bundled spec, the
slots a cluster gives, and a refusal that starts nothing. The smoke sweep's estimate against its
measured time, and the estimate from history, are in test_service.py (they need a sweep run)."""

import dataclasses
import functools
import itertools
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import bundled_specs
from typer.testing import CliRunner

from services.app.cli import app
from services.app.progress import ProgressLines, _eta
from services.estimate import pilot as pilots
from services.estimate import plan, rehearse, timing, worlds
from services.estimate.eta import Eta
from services.search.nstar import SampleComplexityStrategy
from services.search.packs import Pack, TrialConfig
from services.search.planners import trial_count
from services.spec import Sweep, load_spec
from services.spec.strategies import spread
from services.sweep_run import Ended, Running, SweepRun, Trials
from vit_core import steps_per_draw

ROOT = Path(__file__).parents[1]

runner = CliRunner()


def first_pilot(spec, cell):
    """The cell's first pilot run of four models, as `vitsweep plan` runs it."""
    return spec.strategy.pilots(spec, cell, 4)[0]


@pytest.fixture
def unit_steps(monkeypatch):
    """Every model-step takes 1 ms and every pilot's model runs to its budget: the budgets alone decide the
    plan, so one world plays the search as the plan's sixteen would (they differ only in how ties are drawn)."""
    monkeypatch.setattr(plan, "rehearse", functools.partial(rehearse.rehearse, draws=1))
    monkeypatch.setattr(timing, "probe", lambda spec, cell, size: timing.Probe(1e-3, 0.0))
    monkeypatch.setattr(timing, "most_probe", lambda spec, cell, size, rate: rate)
    monkeypatch.setattr(
        worlds,
        "pilot",
        lambda spec, cell, run, allowance, blind_s: pilots.Pilot((run.training.max_steps,) * run.models, run.models, 0),
    )


@pytest.mark.parametrize("path", bundled_specs())
def test_every_bundled_spec_has_a_plan_within_its_budgets(path, unit_steps, tmp_path):
    spec = load_spec(path)
    made = plan.make_plan(spec, tmp_path, 2)
    assert [c.label for c in made.cells] == [c.label for c in spec.cells]
    for c in made.cells:
        assert c.packs >= 1 and 0 < c.trainings <= c.trainings_most
        assert 0 < c.model_steps <= c.model_steps_most
        assert c.seconds == pytest.approx(c.model_steps * 1e-3)
    assert sum(c.trainings for c in made.cells) == spec.trainings
    assert made.wall_s(1) >= made.wall_s(2) >= made.wall_s(10_000) == pytest.approx(made.start_s + made.longest_s)
    for slots in (1, 2, 10_000):  # the bound: every cell at its budget, its longest chain of rounds besides
        assert made.most_wall_s(slots) >= made.wall_s(slots)
        assert made.most_wall_s(slots) >= made.start_s + sum(c.model_steps_most for c in made.cells) * 1e-3 / slots


def test_a_grid_counts_its_models_and_step_budgets(unit_steps, tmp_path):
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")  # 4 cells x 2 N x 4 seeds, max_steps 3000, runs settle early
    made = plan.make_plan(spec, tmp_path, 2)
    assert [(c.packs, c.trainings, c.model_steps_most) for c in made.cells] == [(1, 8, 8 * 3000)] * 4
    assert {c.basis for c in made.cells} == {"pilot: 4 of 4 stopped"}
    assert [c.model_steps for c in made.cells] == [8 * 3000] * 4
    fixed = Sweep.of(
        spec.spec.model_copy(update={"training": spec.spec.training.model_copy(update={"protocol": "one_pass"})})
    )
    assert {c.basis for c in plan.make_plan(fixed, tmp_path, 2).cells} == {"budget"}  # no window: every step runs


def test_steps_timed_at_no_cost_a_model_are_still_counted(unit_steps, monkeypatch, tmp_path):
    """On a busy machine a pack of one can time slower than a pack of eight a model (CI, smoke: its
    CNN's model-step came out at 0 s): the plan still counts the steps its models take, not 0."""
    monkeypatch.setattr(timing, "probe", lambda spec, cell, size: timing.Probe(0.0, 0.0, 1e-3))
    made = plan.make_plan(load_spec(ROOT / "sweeps" / "smoke.yaml"), tmp_path, 2)
    assert [(c.model_steps, c.pack_steps) for c in made.cells] == [(8 * 3000, 3000)] * 4
    assert [c.seconds for c in made.cells] == [pytest.approx(3.0)] * 4


def test_a_tuned_cell_counts_its_settings_caps_and_measurement(unit_steps, tmp_path):
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")  # 2 B x 2 lr on 2 selection seeds, 4 seeds, 3 caps
    for c in plan.make_plan(spec, tmp_path, 2).cells:
        assert (c.trainings, c.trainings_most) == (4 * 2 + 4, 4 * 2 * 3 + 4)
        assert c.model_steps_most == c.trainings_most * 8 * 60 // 2  # each up to the sample budget at B = 2


def test_the_bound_counts_an_extended_cells_runs_in_steps_timed_at_the_smallest_batch_it_may_reach(tmp_path):
    """tiny_tuned's grid of B in {2, 8}, extended: B = 1 may be tried, its runs 480 steps of one
    sample where the grid's smallest takes 240 of two. The bound counts them at a step timed at
    B = 1, never below half the cost of one at B = 2 (a step costs a + b·B)."""
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")
    spec = Sweep.of(spec.spec.model_copy(update={"tuning": spec.tuning.model_copy(update={"max_extensions": 1})}))
    cell = spec.cells[0]
    assert spec.strategy.most_steps(spec, cell) == 8 * 60 // 1
    rate = timing.probe(spec, cell, 4)
    most = timing.most_probe(spec, cell, 4, rate)
    assert most.step_s >= rate.step_s / 2 and most.pack_step_s >= rate.pack_step_s / 2 and most.eval_s == rate.eval_s
    unextended = Sweep.of(spec.spec.model_copy(update={"tuning": spec.tuning.model_copy(update={"max_extensions": 0})}))
    assert timing.most_probe(unextended, cell, 4, rate) is rate  # B = 2 is its smallest: nothing more to time
    made = plan.make_plan(spec, tmp_path, 2, pilot_s=0.2)
    assert all(c.most_step_s is not None and c.steps_most == 480 for c in made.cells)


def test_a_one_pass_evaluation_is_its_tries_added_time_over_every_evaluation_it_made(monkeypatch):
    """Each of a try's evaluations, the two at its ends too, costs 3 ms a model here (the steps alone, set
    against, score a test set of one at the ends): the evaluation is timed at its cost, not 11/9 of it,
    on a pack of its own of EVAL_MODELS models at most."""
    spec = load_spec(ROOT / "sweeps" / "sample_complexity.yaml")  # one pass, evaluated at every step at first
    cell = spec.cells[0]
    data, model, training = timing.timed_configs(spec, cell)
    fixed_s, step_s, eval_s, sizes = 0.2, 0.001, 0.003, []

    def train(spec, cell, configs, limit, size, **_):
        sizes.append(size)
        scored = configs[2].n_test > 1  # the steps alone score a test set of one: at no cost here
        evaluations = len(configs[2].evaluation_steps(limit)) if scored else 0
        return fixed_s + step_s * size * limit + eval_s * size * evaluations, None

    monkeypatch.setattr(timing, "train", train)
    for size in (16, 1):
        assert timing._evaluation_s(spec, cell, (data, model, training), size) == pytest.approx(eval_s)
    assert set(sizes) == {timing.EVAL_MODELS, 1}


def test_cheap_one_pass_evaluations_are_timed_in_tries_of_two_seconds_in_all(monkeypatch):
    """Until one try took 4 TIMING_S, stability_checks' CNN evaluations (a fraction of a millisecond)
    doubled their tries to 5,120 steps, 14 s of a 17 s probe; batch_scaling's plan took 54 s."""
    spec = load_spec(ROOT / "sweeps" / "stability_checks.yaml")
    cell = spec.cells[0]
    took = []

    def train(spec, cell, configs, limit, size, **_):
        scored = len(configs[2].evaluation_steps(limit)) if configs[2].n_test > 1 else 0  # as above
        took.append(0.05 + 1e-3 * size * limit + 1e-6 * size * scored)
        return took[-1], None

    monkeypatch.setattr(timing, "train", train)
    assert timing._evaluation_s(spec, cell, timing.timed_configs(spec, cell), 16) == pytest.approx(1e-6)
    assert sum(took[:-2]) < 4 * timing.TIMING_S <= sum(took) < 12 * timing.TIMING_S


def test_an_adaptive_search_is_expected_to_bisect_one_grid_step_to_its_precision(unit_steps, tmp_path):
    """transfer_tuned's plan counted its first round alone (840 trainings; the sweep trained 1,828),
    an expectation labelled an upper bound that its sweep took 2.9x."""
    spec = load_spec(ROOT / "sweeps" / "transfer_tuned.yaml")  # N 8 .. 2,048 in steps of 4x, precision 0.1
    runs = 3 * 4 + 16  # 3 step sizes on 4 selection seeds, then the measurement on 16 seeds: an N* search each
    made = plan.make_plan(spec, tmp_path, 2)
    first = made.cells[0]
    assert first.trainings == runs * 5 and first.basis.startswith("budget")  # logistic loss: none stops early
    # played out: each search its grid, then log2(log 4 / log 1.1) = 3.9 midpoints of the step where its runs
    # begin to succeed; every setting ties, so the smaller edge extends (max_extensions) and those search too
    assert first.model_steps % (9 * 4000) == 0 and first.model_steps >= runs * 9 * 4000
    assert first.later_packs >= runs * 4 // 16  # a later round trains one N of each seed


def test_slots_of_a_cluster_follow_the_per_trial_resources():
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    assert timing.slots_of(spec, 64, 0) == 64
    gpu = Sweep.of(
        spec.spec.model_copy(update={"resources": spec.resources.model_copy(update={"gpus_per_trial": 0.25})})
    )
    assert timing.slots_of(gpu, 64, 2) == 8 and timing.slots_of(gpu, 4, 2) == 4


def test_a_pilot_counts_the_steps_to_stop_and_a_step_is_timed_per_model_kind():
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    for cell in (spec.cells[0], spec.cells[2]):  # the ViT's and the CNN's, each timed on its own
        probe = timing.probe(spec, cell, 8)
        assert probe.step_s >= 0 and probe.pack_step_s >= 0 and probe.pack_step_s + 8 * probe.step_s > 0
        assert probe.pack_s >= timing.TRIAL_S  # a pack's set-up: its test set, models, Ray Tune's own
    tried = pilots.pilot(spec, spec.cells[0], first_pilot(spec, spec.cells[0]), allowance=60)
    assert (tried.seen, tried.cut) == (4, 0) and all(0 < s < 3000 for s in tried.steps)  # settled before max_steps
    assert tried.basis == "pilot: 4 of 4 stopped"


def test_a_pilot_cut_inside_a_run_of_zero_test_error_foresees_where_its_window_confirms(monkeypatch):
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")  # W = 3, 240 steps at its smallest batch
    cell = spec.cells[0]
    whole = pilots.pilot(spec, cell, first_pilot(spec, cell), allowance=60)
    assert whole.seen == 4
    clock = itertools.count()  # a second a call: the pilot is cut at its 12th evaluation or so
    monkeypatch.setattr(pilots.time, "perf_counter", lambda: next(clock))
    cut = pilots.pilot(spec, cell, first_pilot(spec, cell), allowance=12)
    assert cut.seen == 0 and cut.foreseen >= 1 and 0 < cut.cut < 60
    assert any(0.75 * before <= after <= 1.25 * before for before, after in zip(whole.steps, cut.steps))
    assert f"{cut.foreseen} at zero test error" in cut.basis


@pytest.mark.parametrize(
    "settled, streak, steps, basis",
    [  # cut at step 10, budget 240, W = 3; model 2 settled at step 7, model 0 in a zero run since step 5
        (
            [False, False, True, False],
            [5, -1, -1, -1],
            [15, None, 7, None],
            "1 of 4 stopped, 1 at zero test error (stopping at W x its start), 2 cut at step 10 "
            "(guessed between step 30 and their budget)",
        ),
        (
            [False, False, True, False],
            [-1, -1, -1, -1],
            [None, None, 7, None],
            "1 of 4 stopped, 3 cut at step 10 (guessed between step 30 and their budget)",
        ),
    ],
)
def test_a_one_pass_model_cut_before_zero_error_is_guessed_past_w_times_the_cut(
    monkeypatch, settled, streak, steps, basis
):
    """A run of zero test error begun after the cut L confirms its window at W·L at the soonest:
    such a model counts at the mean of a log-uniform law between there and its budget, never at a
    foreseen model's stop (sample_complexity_arms' pilot did so and its plan came out 3.6x under)."""
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")

    def train(spec, cell, configs, limit, size, progress, lr=None, n=None):
        assert progress(10, 3, 0)  # out of time at the first evaluation (one model stopped)
        result = SimpleNamespace(steps=np.array([10, 10, 7, 10]), settled=np.array(settled), success=np.zeros(4, bool))
        extra = {"diverged": np.zeros(4, bool), "streak_start": np.array(streak), "eval_steps": np.array([0, 5, 10])}
        return 1.0, SimpleNamespace(**vars(result), **extra)

    monkeypatch.setattr(pilots, "train", train)
    tried = pilots.pilot(spec, spec.cells[0], first_pilot(spec, spec.cells[0]), allowance=0)
    guess = pilots._log_uniform_mean(30, 240)
    assert tried.steps == tuple(float(s) if s is not None else guess for s in steps)
    assert tried.basis == f"pilot: {basis}" and tried.guessed
    assert pilots._log_uniform_mean(100, 100 * math.e) == pytest.approx(100 * (math.e - 1))


@pytest.mark.parametrize(
    "evaluations, blind_s, cut",
    [  # (models still training, of them at zero test error), a second each; 4 models, allowance 3 s
        ([(4, 0)] * 100, None, 30),  # blind throughout: cut at BLIND x the allowance
        ([(4, 0)] * 100, 12, 12),  # ... or at its share of the plan's time (worlds._Turn)
        ([(4, 0)] * 100, 1, 3),  # ... never before the allowance
        ([(4, 1)] * 100, None, 30),  # one at zero test error, three still guesses: blind as well
        ([(4, 0)] * 6 + [(4, 4)] * 94, None, 7),  # all four at zero test error from the 7th second: cut there
        ([(4, 0)] * 4 + [(3, 0)] * 96, None, 5),  # one stopped in the 5th second: cut there
        ([(3, 0)] * 100, None, 3),  # one stopped from the start: cut at the allowance
    ],
)
def test_a_pilot_that_has_seen_no_model_stop_goes_on_while_some_of_its_models_are_guesses(
    monkeypatch, evaluations, blind_s, cut
):
    """Each guess lies between the cut and a budget up to three decades above: cut at 3 s,
    sample_complexity_wide's ViT pilots put its plan 2.06x above its sweep. Going on only until
    one model reached zero test error, arms' never-confirming cells foresaw their runs short."""
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")  # one pass, W = 3
    clock = itertools.count()
    monkeypatch.setattr(pilots.time, "perf_counter", lambda: next(clock))

    def train(spec, cell, configs, limit, size, progress, lr=None, n=None):
        step = next(i for i, (still, zero) in enumerate(evaluations, start=1) if progress(i, still, zero))
        ran = SimpleNamespace(steps=np.full(size, step), settled=np.zeros(size, bool), diverged=np.zeros(size, bool))
        ran.success = ran.settled
        return 1.0, SimpleNamespace(**vars(ran), streak_start=np.full(size, -1), eval_steps=np.arange(step + 1))

    monkeypatch.setattr(pilots, "train", train)
    run = first_pilot(spec, spec.cells[0])
    assert pilots.BLIND * 3 == 30 and pilots.pilot(spec, spec.cells[0], run, 3, blind_s).cut == cut


@pytest.mark.parametrize("slots", [1, 2])
def test_a_plans_pilots_end_by_its_deadline_however_many_cells_it_has(monkeypatch, slots, tmp_path):
    """Each pilot is cut at its share of the plan's time left as it starts: fig1_grid_one_pass_tuned's
    39 pilots, 3 s each, took 39 s of its 55 s plan. Here every pilot runs to its blind cut, a stand-in
    clock on one process (side_by_side's order, at the width it would run on), 2 s of probes first."""
    spec = load_spec(ROOT / "sweeps" / "fig1_grid_one_pass_tuned.yaml")
    clock, ends, cuts = [0.0], [2.0] * slots, []
    monkeypatch.setattr(worlds.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(timing, "probe", lambda spec, cell, size: timing.Probe(1e-3, 0.0))
    monkeypatch.setattr(timing, "most_probe", lambda spec, cell, size, rate: rate)
    monkeypatch.setattr(worlds, "width", lambda spec, slots, jobs: slots)

    def side_by_side(work, jobs, spec, slots):
        clock[0] = 2.0  # the probes' seconds
        return [work(job) for job in jobs]

    def pilot(spec, cell, run, allowance, blind_s):
        cuts.append((allowance, blind_s))
        ends[min(range(slots), key=ends.__getitem__)] += blind_s
        clock[0] = min(ends)  # the next pilot starts on the process free first
        return pilots.Pilot((run.training.max_steps,) * run.models, run.models, 0)

    monkeypatch.setattr(worlds, "side_by_side", side_by_side)
    monkeypatch.setattr(worlds, "pilot", pilot)
    plan.make_plan(spec, tmp_path, slots, pilot_s=3.0)
    assert len(cuts) == 2 * len(spec.cells)  # two batch sizes a cell
    assert max(ends) == pytest.approx(worlds.PLAN_PILOTS * 3.0)
    assert all(a <= b <= worlds.BLIND * 3.0 for a, b in cuts) and max(b for _, b in cuts) < 3.0
    clock[0] = 1e9  # past the deadline: a pilot still takes its least
    assert worlds._Turn(5, 2, 100.0, 0.3).share() == 0.3


@pytest.mark.parametrize(("step_s", "passes"), [(1e-3, 2), (1e-7, 1)])
def test_pilots_cut_short_that_left_guesses_run_again_where_the_sweep_allows_it(monkeypatch, tmp_path, step_s, passes):
    """fig1_grid_multi_pass_tuned's 20 pilots shared the plan's 24 s, each cut at step 20 of 4,000:
    their guesses put its plan 2.4x over its sweep of ~1,000 s, whose tenth is 94 s. Cells whose
    pilots were cut at their share, short of their allowance, and left guesses are piloted again
    within a SPENT-th of the sweep that plan expects; not where that is no later than the deadline.
    Here a pilot given its allowance (3 s) sees every model stop, one given less guesses them all."""
    spec = load_spec(ROOT / "sweeps" / "fig1_grid_multi_pass_tuned.yaml")
    clock, cuts = [0.0], []
    monkeypatch.setattr(worlds.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(timing, "probe", lambda spec, cell, size: timing.Probe(step_s, 0.0))
    monkeypatch.setattr(timing, "most_probe", lambda spec, cell, size, rate: rate)
    monkeypatch.setattr(plan, "rehearse", functools.partial(rehearse.rehearse, draws=1))

    def pilot(spec, cell, run, allowance, blind_s):
        cuts.append((clock[0], allowance))
        clock[0] += allowance
        seen = run.models if allowance >= 3.0 else 0
        return pilots.Pilot((run.training.max_steps / 4,) * run.models, seen, 0, 0 if seen else 20)

    deadlines, plays, worlds_of, played = [], [], worlds.worlds_of, plan._played
    monkeypatch.setattr(worlds, "pilot", pilot)
    monkeypatch.setattr(worlds, "worlds_of", lambda *a: deadlines.append(a[-1]) or worlds_of(*a))
    monkeypatch.setattr(plan, "_played", lambda *a: plays.append(played(*a)) or plays[-1])
    made = plan.make_plan(spec, tmp_path, 1, pilot_s=3.0)
    cells = len(spec.cells)
    assert len(cuts) == passes * cells and deadlines[0] == worlds.PLAN_PILOTS * 3.0
    assert all(a < 3.0 for _, a in cuts[:cells]) and sum(cuts[cells - 1]) <= deadlines[0]
    assert made.guessed_share == (0.0 if passes == 2 else 1.0)
    if passes == 2:
        assert deadlines[1] == pytest.approx(plays[0].wall_s() / worlds.SPENT) and deadlines[1] > deadlines[0]
        assert all(a == 3.0 for _, a in cuts[cells:]) and sum(cuts[-1]) <= deadlines[1]
    else:
        assert plays[0].wall_s() / worlds.SPENT <= deadlines[0]


def test_cells_that_differ_in_values_alone_share_one_timing():
    """A step computes the same tensors whatever a model's initial scales, fixed diagonal or step
    size's scale: association_sensitivity's 40 cells were timed one by one (its plan 171 s). Its
    logits scaled or not, and a model with or without W_O, are timed apart."""
    spec = load_spec(ROOT / "sweeps" / "association_sensitivity.yaml")  # diag x scaled_logits x a_lr_scale
    assert len({timing.timing_key(spec, c, 8) for c in spec.cells}) == 2
    arms = load_spec(ROOT / "sweeps" / "sample_complexity_arms.yaml")  # {vit, cnn} x alpha* x counts x output_matrix
    assert len({timing.timing_key(arms, c, 8) for c in arms.cells}) == 4


def test_one_shape_at_many_batches_is_timed_at_its_ends_and_costs_the_line_between(monkeypatch):
    """A step costs a + b·B: a spec whose batch grows like 1/alpha* once took its whole plan of 46.9 s
    in probes, one for each alpha*'s batch (the retired batch_scaling.yaml, 13-64). Each model is
    timed at its smallest and largest batch alone; two batches of one shape are each timed."""
    spec = load_spec(ROOT / "sweeps" / "sample_complexity_coupled.yaml")  # B = 8, 16, 32, 64
    jobs = {timing.timing_key(spec, c, 16): (spec, c, 16) for c in spec.cells}
    timed = []

    def step_costs(job):
        batch = timing.timed_configs(job[0], job[1])[2].batch_size
        timed.append((job[1].model, batch))
        rate = timing.Probe(1e-3 * batch, 0.05, 2e-3 + 1e-4 * batch, 0.07, 0.01 * batch)
        return rate, rate

    monkeypatch.setattr(timing, "step_costs", step_costs)
    costs = timing.step_costs_of(spec, jobs, 1)
    assert sorted(timed) == [("cnn", 8), ("cnn", 64), ("vit", 8), ("vit", 64)]
    assert len(costs) == 8
    for (_, batch), (rate, most) in costs.items():
        assert rate == most
        assert dataclasses.astuple(rate) == pytest.approx((1e-3 * batch, 0.05, 2e-3 + 1e-4 * batch, 0.07, 0.01 * batch))
    two = {k: v for k, v in jobs.items() if k[1] in (16, 32)}
    timed.clear()
    timing.step_costs_of(spec, two, 1)
    assert len(timed) == 4


def test_a_multi_pass_pilot_trains_its_models_at_the_ns_its_grid_trains(monkeypatch):
    """Its runs to zero training loss grow with N: at the grid's largest N alone, the pilots of
    fig1_grid_multi_pass's ViT cells counted 2.2-3.6x the model-steps its sweep took, and
    fig1_grid_multi_pass_tuned's 2.1x. A tuned cell's pilot trains each of its step sizes at the N
    grid's two ends; one pass fixes no N."""
    trained = []

    def train(spec, cell, configs, limit, size, progress, lr=None, n=None):
        trained.append((n, lr))
        ran = SimpleNamespace(steps=np.full(size, 3), settled=np.ones(size, bool), diverged=np.zeros(size, bool))
        ran.success = ran.settled
        return 1.0, SimpleNamespace(**vars(ran), streak_start=np.full(size, -1), eval_steps=np.array([0]))

    monkeypatch.setattr(pilots, "train", train)
    for name in ("sweeps/smoke.yaml", "sweeps/sample_complexity_multipass_tuned.yaml", "tests/tiny_tuned.yaml"):
        spec = load_spec(ROOT / name)  # untuned multi-pass (N in {5, 20}), tuned multi-pass, tuned one pass
        pilots.pilot(spec, spec.cells[0], first_pilot(spec, spec.cells[0]), allowance=1)
    lrs = [0.5, 2.0, 8.0] * 2
    assert trained == [([5, 5, 20, 20], None), ([8] * 3 + [256] * 3, lrs), (None, [0.25, 0.25, 1.0, 1.0])]
    assert spread([320, 40, 160, 80], 4) == (40, 80, 160, 320) and spread([40, 80, 160], 2) == (40, 160)


def test_trials_sharing_a_gpu_count_their_work_at_the_pace_timed_side_by_side():
    """Eight trials on one H100 took 4.6x as long a step each as one alone: the plan, timing one
    alone, had expected the main job 3.0x under its sweep there."""
    cell = plan.CellPlan("c", 1, 8, 8, 8000, 8000, 1e-3, "budget", size=8, steps_most=1000)
    alone = plan.SweepPlan("s", [cell] * 8, 3.0, "assumed", 8)
    shared = dataclasses.replace(alone, share=8, sharing=4.0)
    assert alone.wall_s() == 3.0 + 8 * 8.0 / 8 and shared.wall_s() == 3.0 + 4 * 8 * 8.0 / 8
    assert shared.most_wall_s() - 3.0 == pytest.approx(4 * (alone.most_wall_s() - 3.0))
    assert shared.to_dict()["sharing"] == 4.0


def test_a_saved_plan_estimates_any_slots_as_the_plan_itself(tmp_path):
    """`run` reports the saved plan's estimate on its own slots: rebuilt from what `save` kept, not
    recomputed from rounded totals (which differed from the plan's own figure)."""
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    assert plan.load(spec, tmp_path) is None
    cells = [
        plan.CellPlan(f"c{i}", 2, 8, 8, 8001 + i, 8000 * 3, 1.234567e-3, "budget", evals_s=0.3333) for i in range(3)
    ]
    made = plan.SweepPlan("smoke", cells, 3.14159, "assumed", 2, share=2, sharing=1.23456)
    plan.save(made, spec, tmp_path)
    assert plan.load(spec, tmp_path) == made
    assert [plan.load(spec, tmp_path).wall_s(s) for s in (1, 2, 7)] == [made.wall_s(s) for s in (1, 2, 7)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_packs_side_by_side_on_one_gpu_are_timed_in_processes_of_their_own():
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    spec = Sweep.of(
        spec.spec.model_copy(update={"resources": spec.resources.model_copy(update={"gpus_per_trial": 0.25})})
    )
    assert timing.gpu_share(spec, 8) == 4 and timing.gpu_share(spec, 2) == 2
    assert 1.0 <= timing.sharing(spec, spec.cells[0], 8, 4) < 8


def test_a_plan_says_how_much_of_its_expected_work_is_a_guess(monkeypatch, tmp_path):
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    monkeypatch.setattr(timing, "probe", lambda spec, cell, size: timing.Probe(1e-3, 0.0))
    monkeypatch.setattr(timing, "most_probe", lambda spec, cell, size, rate: rate)
    guessed = pilots.Pilot((100.0,) * 4, seen=0, foreseen=0, cut=10)  # cut, none stopped or foreseen
    seen = pilots.Pilot((100.0,) * 4, seen=4, foreseen=0)
    monkeypatch.setattr(
        worlds, "pilot", lambda spec, cell, run, allowance, blind_s: seen if spec.cells.index(cell) % 2 else guessed
    )
    made = plan.make_plan(spec, tmp_path, 2)
    assert [c.guessed for c in made.cells] == [True, False, True, False]
    assert made.guessed_share == pytest.approx(0.5) and made.to_dict()["guessed_share"] == 0.5


def test_a_tuned_one_pass_cell_is_expected_to_take_the_rounds_its_search_would_take(unit_steps, monkeypatch, tmp_path):
    """sample_complexity_arms' plan came out 3.9x under its sweep: it counted the grid's first
    round and the measurement at the pilot's soonest stop, where the search took later caps,
    settings past an edge and seeds that ran on. Played out where every run stops after 100
    samples (tiny_tuned: caps 30, 120, 480; W = 3): the four settings on two seeds under the
    first cap (15 steps at B = 2, 3 at B = 8), all open, again under the second (50 and 13 steps,
    all confirmed), then the measurement of four seeds at the smaller tie (50 steps at B = 2); a
    step at B = 8 counts as four at B = 2."""
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")
    # every pilot model stops after 100 samples, at either batch size piloted (2 and 8)
    monkeypatch.setattr(
        worlds,
        "pilot",
        lambda spec, cell, run, allowance, blind_s: pilots.Pilot(
            (100 / run.training.batch_size,) * run.models, run.models, 0
        ),
    )
    made = plan.make_plan(spec, tmp_path, 2).cells[0]
    first_cap, second_cap, measurement = 4 * 15 + 4 * 3 * 4, 4 * 50 + 4 * 13 * 4, 4 * 50
    assert made.model_steps == first_cap + second_cap + measurement
    assert made.packs + made.later_packs == 2 + 2 + 1  # each round's B = 2 and B = 8 packs, one for the measurement
    assert re.search(r"its search played out in \d+ draws", made.basis)
    extended = Sweep.of(spec.spec.model_copy(update={"tuning": spec.tuning.model_copy(update={"max_extensions": 1})}))
    seen = {i: [rehearse.Seen(2, 1.0, None, 50.0)] * 4 for i in range(len(extended.cells))}
    played = rehearse.rehearse(extended, lambda: extended.strategy.make_planner(extended), seen)
    assert all(min(t.batch_size for t in world if t.cell == 0) == 1 for world in played)  # the tie at B = 2: B = 1
    assert plan.make_plan(extended, tmp_path, 2).cells[0].model_steps > made.model_steps
    # a step at B as steps at B = 8 by their costs: timed at 8 and at 1 (model, pack), on the line
    # between; above 8, or where B = 8's step timed at no cost, by its samples
    steps = timing.batch_steps(8, 1, (timing.Probe(8e-3, 0.0, 4e-3), timing.Probe(1e-3, 0.0, 2e-3)))
    assert steps(1) == (1 / 8, 1 / 2) and steps(8) == (1, 1) and steps(32) == (4, 4)
    assert steps(4) == pytest.approx((1 / 2, (2e-3 + 3 / 7 * 2e-3) / 4e-3))
    steps = timing.batch_steps(8, 1, (timing.Probe(0.0, 0.0, 4e-3), timing.Probe(1e-3, 0.0, 2e-3)))
    assert steps(4) == pytest.approx((1 / 2, (2e-3 + 3 / 7 * 2e-3) / 4e-3))


def test_a_rehearsed_run_stops_where_the_pilot_model_nearest_its_batch_and_step_size_did():
    """The main job's ViT pilot at alpha* = 0.15 saw no model reach zero test error by 10,400
    samples at B = 8, and one stop at 5,120 samples at B = 32: stops drawn from every pilot model
    alike, its plan counted every setting at its budget (0.34 of its sweep). Here only B = 2 at
    eta = 0.25 stops (after 30 samples, under the first cap): the search measures there, after
    one round of caps."""
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")  # B in {2, 8}, eta in {0.25, 1}, caps 30, 120, 480
    never = 10_000.0
    seen = [rehearse.Seen(b, lr, None, 15.0 if (b, lr) == (2, 0.25) else never) for b in (2, 8) for lr in (0.25, 1.0)]
    assert list(rehearse._nearest(seen, 4, 0.25, None)) == [0, 2]  # as near B = 2 as 8 (log scale): a tie
    assert list(rehearse._nearest(seen, 1, 2.0, None)) == [1]
    for world in rehearse.rehearse(
        spec, lambda: spec.strategy.make_planner(spec), dict.fromkeys(range(len(spec.cells)), seen)
    ):
        measured = [t for t in world if t.cell == 0][-1]
        assert measured.batch_size == 2 and measured.steps == (15,) * 4  # 30 samples at B = 2, on 4 seeds


def test_every_search_mode_is_played_out_through_the_round_planner_protocol_alone():
    """An adaptive N* search, multi-pass, where its runs succeed from the middle of its grid's
    widest step: its grid, then the bisection of that step to its precision (smoke: N in {5, 20},
    precision 0.1: log2(log 4 / log 1.1) = 3.9, four midpoints), each seed at every N once."""
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    searched = Sweep.of(spec.spec.model_copy(update={"search": SampleComplexityStrategy(mode="sample_complexity")}))
    seen = {i: [rehearse.Seen(1, 1.0, n, 10.0) for n in (5, 20)] for i in range(len(spec.cells))}
    (world,) = rehearse.rehearse(searched, lambda: searched.strategy.make_planner(searched), seen, draws=1)
    models = [len(t.steps) for t in world if t.cell == 0]
    assert sum(models) == (2 + 4) * spec.seeds and {t.steps for t in world} == {(10,) * m for m in models}
    (grid,) = rehearse.rehearse(spec, lambda: spec.strategy.make_planner(spec), seen, draws=1)
    assert sum(len(t.steps) for t in grid) == spec.trainings  # a grid: its first round is all


def test_a_multi_pass_world_succeeds_from_where_the_pilot_models_did():
    """fig1_grid_multi_pass_tuned's N* is 2, under its grid of 4-256: played out from the middle
    of the grid's widest step, its searches bisected around N = 8 and the large Ns. Its runs
    succeed between the largest N whose seen models failed (at the spec's rate) and the smallest
    from which they all succeeded; half of it where none failed, twice the largest where it failed."""
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")  # N in {5, 20}, success rate 0.5

    def succeeds_from(told: dict[int, list[bool]]) -> float:
        seen = [rehearse.Seen(1, 1.0, n, 10.0, ok) for n, oks in told.items() for ok in oks]
        return rehearse.World(spec, {0: seen}, np.random.default_rng(0)).succeeds_from[0]

    assert succeeds_from({5: [False, False], 20: [True, False]}) == pytest.approx(10.0)
    assert succeeds_from({5: [True], 20: [True]}) == pytest.approx(5 / math.sqrt(2))
    assert succeeds_from({5: [True], 20: [False]}) == 40.0  # failing at the largest: past the grid
    assert succeeds_from({5: [True, False, False], 20: [True]}) == pytest.approx(10.0)
    untold = [rehearse.Seen(1, 1.0, n, 10.0) for n in (5, 20)]
    assert rehearse.World(spec, {0: untold}, None).succeeds_from[0] == rehearse._middle_of_widest_step(spec, 0)


def test_a_trials_own_cost_is_split_into_its_packs_and_its_models(monkeypatch):
    """A multi-pass model scores its training and test sets when it starts and stops: counted per
    pack, fig1_grid_multi_pass_tuned's ViT pack of 32 put 4.2 s on each trial, where its sweep's
    trials of 4 models took 0.7 s in all. Its evaluations between a run's ends are timed apart,
    the steps without them: timed together, its settling models' scoring came out as steps. Tries
    that cost 0.3 s a pack, 0.13 s a model, 1 ms a pack-step, 2 ms a model-step and 10 ms a
    model's evaluation give each back."""
    spec = load_spec(ROOT / "sweeps" / "fig1_grid_multi_pass_tuned.yaml")

    step_sizes, clock = set(), [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])

    def train(spec, cell, configs, limit, size, progress=None, lr=None, n=None):
        step_sizes.add(None if lr is None else tuple(lr))
        graded = configs[2].evaluation_steps(limit)

        def at(step: int) -> float:  # seconds from the try's start to its evaluation at ``step``
            scored = sum(0 < s <= step and s < limit for s in graded)  # its ends: the models' own cost
            return 0.3 + 0.13 * size + step * (1e-3 + 2e-3 * size) + 0.01 * size * scored

        for step in graded:
            clock[0] = at(step)
            if progress is not None:
                progress(step, size, 0)
        return at(limit), SimpleNamespace(steps=np.full(size, limit))

    monkeypatch.setattr(timing, "train", train)
    probe = timing.probe(spec, spec.cells[0], 8)
    assert probe.step_s == pytest.approx(2e-3) and probe.pack_step_s == pytest.approx(1e-3)
    assert probe.model_s == pytest.approx(0.13) and probe.pack_s == pytest.approx(0.3 + timing.TRIAL_S)
    assert probe.eval_s == pytest.approx(0.01)
    unmoved = timing.timed_configs(spec, spec.cells[0])[2].lr * timing.UNMOVED  # no model settles in those tries
    assert step_sizes == {None, (unmoved,) * timing.EVAL_MODELS}


@pytest.mark.parametrize(("eval_s", "scored"), [(0.01, timing.SCORED), (0.2, 2)])
def test_a_multi_pass_evaluation_is_timed_in_about_a_second_of_evaluations(monkeypatch, eval_s, scored):
    """fashion_sparsification's evaluations (0.18 s a model: nine sparsified test sets) took 7.4 s
    of its 16 s probe through SCORED of them; the try now ends at the first evaluation after which
    they took 2 TIMING_S, and its evaluations are still told apart from its steps and its ends."""
    spec = load_spec(ROOT / "sweeps" / "fig1_grid_multi_pass_tuned.yaml")
    cell, clock, rate = spec.cells[0], [0.0], timing.Probe(2e-3, 0.3, 1e-3)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])

    def train(spec, cell, configs, limit, size, progress=None, lr=None, n=None):
        for step in configs[2].evaluation_steps(limit):
            clock[0] += 9.0 * (step == limit) + (step > 0) * (2 * (1e-3 + 2e-3 * size) + eval_s * size)
            if progress(step, size, 0):
                break
        return 0.0, SimpleNamespace(steps=np.full(size, step))

    monkeypatch.setattr(timing, "train", train)
    assert timing._scoring_s(spec, cell, timing.timed_configs(spec, cell), rate) == pytest.approx(eval_s)
    ended = scored == timing.SCORED  # the try ran to its limit, whose evaluation scores whole sets
    assert clock[0] == pytest.approx((scored + ended) * (2 * (1e-3 + 8e-3) + 4 * eval_s) + 9.0 * ended)


def test_a_step_is_timed_apart_from_a_packs_fixed_cost(monkeypatch):
    """linear_fails' linear cells make and score 20,000 training samples a model in each try: a
    slope through one try counted that as steps (22-60 ms a model-step against ~0.2 ms in a run),
    and tries at that N took 6 s of set-up each (a plan of 43 s). Tries that cost 0.03 ms a sample
    plus 0.2 ms a model-step (a clock of its own: timings taken on a busy machine compare at
    random) give back the step from sets of at most TIMED_N and the fixed cost at the largest N."""
    spec = load_spec(ROOT / "sweeps" / "linear_fails.yaml")
    cell = next(c for c in spec.cells if c.model == "linear")  # at N = 20,000 and 2,000
    step_s, tried = 2e-4, []

    def train(spec, cell, configs, limit, size, progress=None, n=None):
        n = n or [max(spec.resolved_cell(cell).n_values)] * size
        tried.append((limit, n[0]))
        steps = np.full(size, limit)
        return 3e-5 * sum(n) + step_s * steps.sum(), SimpleNamespace(steps=steps)

    monkeypatch.setattr(timing, "train", train)
    slope, pack_s = timing._slope(spec, cell, timing.timed_configs(spec, cell), 10)
    assert slope == pytest.approx(step_s) and pack_s == pytest.approx(3e-5 * 20_000 * 10 + timing.TRIAL_S)
    assert len(tried) > 2 and all(n == 2_000 for _, n in tried[:-1]) and tried[-1] == (1, 20_000)


def test_a_one_pass_step_is_timed_over_whole_periods_of_its_samples_draws(monkeypatch):
    """A pack draws its samples CHUNK steps ahead, so its step's time repeats with that period: tries
    10 and 28 steps long, one draw each, made fig1_grid_one_pass' ViT step 0.12 s where runs took 0.18.
    Tries that cost a fixed 1 s, 10 ms a step and 0.5 s a draw give back the step with its share of
    the draws, from two tries, the second no longer than its first try's pace asks."""
    spec = load_spec(ROOT / "sweeps" / "fig1_grid_one_pass.yaml")
    cell = spec.cells[0]
    configs = timing.timed_configs(spec, cell)
    period, tried = steps_per_draw(configs[2].batch_size), []

    def train(spec, cell, configs, limit, size, progress=None, n=None):
        tried.append(limit)
        took = 1.0 + size * (0.01 * limit + 0.5 * math.ceil(limit / period))
        return took, SimpleNamespace(steps=np.full(size, limit))

    monkeypatch.setattr(timing, "train", train)
    slope, _ = timing._slope(spec, cell, configs, 4)
    assert tried == [10, 10 + period] and slope == pytest.approx(0.01 + 0.5 / period)


def test_plan_json_and_max_minutes_refuse_before_anything_starts(tmp_path):
    shown = runner.invoke(app, ["plan", "sweeps/smoke.yaml", "--home", str(tmp_path), "--json", "--cpus", "64"])
    assert shown.exit_code == 0, shown.output
    made = json.loads(shown.stdout)
    assert made["trainings"] == 32 and made["cluster_slots"] == 64
    assert made["cluster_wall_s"] <= made["wall_s"]
    refused = runner.invoke(app, ["run", "sweeps/smoke.yaml", "--home", str(tmp_path), "--max-minutes", "0.01"])
    assert refused.exit_code == 2
    assert re.search(r" expected( \(\d+% of its work a guess\))?, at most ", refused.output)  # its own pilots'
    assert "beyond --max-minutes 0.01" in refused.output
    assert made["wall_s"] <= made["most_wall_s"]
    assert not (tmp_path / "ray").exists()  # nothing started


def test_the_progress_eta_starts_from_the_plan_and_follows_the_rate_as_trials_end():
    assert _eta(10, 0.0, None) is None  # nothing done, never planned: no ETA
    assert _eta(10, 0.0, 100) == 90  # the plan, less the time spent
    assert _eta(10, 0.5, 100) == pytest.approx(0.5 * 90 + 0.5 * 10)  # half done: half the plan, half the rate
    assert _eta(10, 0.5, None) == pytest.approx(10)  # the rate alone
    assert _eta(200, 0.9, 100) == pytest.approx(0.9 * 200 * 0.1 / 0.9)  # past the plan: the rate decides
    assert _eta(10, 1.0, 100) == 0.0


def test_the_eta_plays_the_packs_left_over_the_slots_at_the_pace_of_the_trials_so_far():
    eta = Eta((4.0, 2.0, 3.0, 1.0), slots=2, kinds=("vit", "vit", "vit", "cnn"))
    assert eta.left(Trials(), now=0.0) is None  # no trial reported, no plan: no pace yet
    # the plan's pace (5 s expected on 2 slots: 1 s per unit of cost): 4 | 2, then 3 after 2, and 1 after 4
    assert Eta(eta.costs, 2, expected_s=5.0).left(Trials(), now=0.0) == 5
    # two reported trials on a power law: a pack of cost c takes 2c s; the third (6 s), running since 0,
    # has 4 s left at 2 s; the fourth, a CNN (no CNN has reported: every kind's law, 2 s), goes on the free slot
    trials = Trials(
        2, ended=(Ended(4.0, 8.0, "vit"), Ended(2.0, 4.0, "vit")), running=(Running("vit", 3.0, 0.0, kind="vit"),)
    )
    pace = eta.pace(trials)
    assert pace(3.0, "vit") == pytest.approx(6) and pace(1.0, "cnn") == pytest.approx(2)
    assert eta.left(trials, now=2.0) == pytest.approx(4)
    # packs that take the same time whatever their cost (one-pass models that stop early): their mean; a kind
    # with one cost reported takes every kind's exponent (here none) at its own scale
    flat = Trials(3, ended=(Ended(4.0, 8.0, "vit"), Ended(2.0, 8.0, "vit"), Ended(3.0, 2.0, "cnn")))
    assert eta.pace(flat)(1.0, "vit") == pytest.approx(8) and eta.pace(flat)(9.0, "cnn") == pytest.approx(2)
    # with an expected wall time, once trials report: its rest and the played-out one, weighed by the share
    # of trials done
    planned = Eta(eta.costs, 2, expected_s=20.0, began=0.0, kinds=eta.kinds)
    assert planned.played(flat, now=0.0) == pytest.approx(2)  # the last pack, a CNN's
    assert planned.left(flat, now=6.0) == pytest.approx(0.25 * (20 - 6) + 0.75 * planned.played(flat, now=6.0))
    done = Trials(4, ended=(Ended(4.0, 8.0, "vit"),) * 4)
    assert planned.left(done, now=30.0) == 0  # all done: nothing left


def test_the_eta_knows_the_packs_of_a_grid_and_of_the_main_job_not_of_an_adaptive_search():
    smoke, main = load_spec(ROOT / "sweeps" / "smoke.yaml"), load_spec(ROOT / "sweeps" / "sample_complexity.yaml")
    for sweep in (smoke, main):
        assert len(Eta.of(sweep, 2, None).costs) == trial_count(sweep, 2)  # every pack, one trial each
    assert Eta.of(main, 2, 600.0).prior == pytest.approx(600.0 * 2 / sum(Eta.of(main, 2, None).costs))
    assert Eta.of(load_spec(ROOT / "tests" / "tiny_tuned.yaml"), 2, None) is None  # rounds planned from results


def test_a_progress_line_names_the_trials_in_flight(capsys):
    spec = load_spec(ROOT / "sweeps" / "smoke.yaml")
    with ProgressLines(spec, every=3600) as lines:
        lines.start("smoke-1", 4, 2, None)
        lines.printed = float("-inf")
        lines.advance(Trials(1, 0, 4, 1.0, (Ended(1.0, 1.0),), (Running("vit 0.5", 1.0, lines.began),)))
    _, line = capsys.readouterr().err.strip().splitlines()
    assert re.search(r"ETA \d+:\d\d, .*; running: vit 0\.5 0:0\d$", line), line


def test_a_trial_in_flight_shows_its_step_against_its_cap_once_it_reports_one(capsys):
    told = []
    run = SweepRun(load_spec(ROOT / "sweeps" / "smoke.yaml"), "smoke-1", Path("."), progress=told.append)
    config = TrialConfig(Pack(0, (64, 64), (0, 1)))
    run.started("t_00000", config)
    run.stepped("t_00000", 1200, 16000)
    run.stepped("t_gone", 5, 10)  # a trial that already ended: nothing to show
    assert told[-1].running[0].step == (1200, 16000) and len(told) == 2
    with ProgressLines(run.sweep, every=3600) as lines:
        lines.start("smoke-1", 4, 2, None)
        lines.printed = float("-inf")
        lines.advance(Trials(1, 0, 4, 1.0, (Ended(1.0, 1.0),), told[-1].running))
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(r"; running: \S.* step 1,200/16,000 0:0\d$", line), line


def test_a_trainings_step_reaches_tune_at_most_every_few_seconds(monkeypatch):
    from services.execution import trial  # noqa: PLC0415  (Ray loads on use)

    clock, said = [100.0], []
    monkeypatch.setattr(trial.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(trial.tune, "report", said.append)
    report = trial._stepping(cap=500)
    report(1, 16, 0)  # no time has passed since the trial began
    clock[0] += trial.STEP_EVERY_S
    report(40, 16, 3)
    report(41, 15, 3)  # too soon after the last
    assert said == [{"pack_step": 40, "pack_steps": 500, "models_training": 16, "models_at_zero": 3}]


def test_an_adaptive_sweep_past_its_first_rounds_models_shows_no_eta_rather_than_zero(capsys):
    """transfer_tuned showed "ETA 0:00" for its last 8 minutes: its later rounds' models counted past 100%."""
    spec = load_spec(ROOT / "tests" / "tiny_tuned.yaml")
    with ProgressLines(spec, every=3600) as lines:
        lines.start("tiny-1", None, 2, None)  # trials unknown: tuning plans its rounds as results come in
        lines.advance(Trials(1, 0, spec.trainings // 2, 1.0))
        lines.printed = float("-inf")
        lines.advance(Trials(2, 0, spec.trainings + 5, 2.0))
    began, first, second = capsys.readouterr().err.strip().splitlines()
    assert began.startswith("[tiny-1] 0 trials") and "0:00 elapsed" in began  # a line as the trials begin
    assert "ETA -" not in first and "ETA 0:00" not in second and "ETA -" in second


def test_the_last_progress_line_says_what_follows_the_trials_and_its_timer_stops(capsys):
    """fig1_grid_one_pass's lines said "20/20 trials ... ETA 0:00" for the minute its 320 models took to summarize."""
    spec, now = load_spec(ROOT / "tests" / "tiny_tuned.yaml"), "summarizing its 2 cells and logging them to MLflow"
    with ProgressLines(spec, every=3600) as lines:
        lines.start("tiny-1", 4, 2, None)
        lines.advance(Trials(4, 1, 8, 1.0))
        lines.ended(now)
        lines.ticker.join(timeout=30)
        assert not lines.ticker.is_alive()
    _, trials, line = capsys.readouterr().err.strip().splitlines()  # as they began, as the last ended, then its own
    assert "ETA 0:00" in trials
    assert line == f"[tiny-1] 4/4 trials (1 failed), 8 models trained in 0:00; {now}"
