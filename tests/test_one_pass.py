"""The one-pass protocol in vit_core: fresh samples every step, never reused, and the N-curve one run gives."""

import dataclasses

import numpy as np
import pytest
import torch

from vit_core import (
    ConfigError,
    ImageDataConfig,
    ModelConfig,
    SpatialDataConfig,
    TokenDataConfig,
    TrainConfig,
    train_pack,
)
from vit_core.li2023.models import PackedModel
from vit_core.outcomes import summarize_by_n
from vit_core.seeding import Stream
from vit_core.tokens import BLOCK
from vit_core.training import batches as train
from vit_core.training.batches import FreshBatches, sample
from vit_core.training.loop import _Training

SMALL = TokenDataConfig(dim=12, n_patterns=8, n_tokens=24, alpha_star=0.3)
ONE_PASS = TrainConfig(
    protocol="one_pass", batch_size=8, max_steps=60, eval_every=5, eval_ratio=1.3, n_test=200, eval_subset=50
)


@pytest.mark.parametrize("data", [SMALL, SpatialDataConfig()], ids=["tokens", "patches"])
def test_a_stream_read_from_any_start_gives_the_same_samples(data):
    whole = sample(data, 200, 7)
    part = sample(data, 70, 7, start=100)
    assert torch.equal(whole.tokens[100:170], part.tokens) and torch.equal(whole.labels[100:170], part.labels)


def test_one_pass_reads_each_sample_of_the_seed_stream_once_in_order():
    """Step t of every model reads samples [t B, (t + 1) B) of its own stream: no index twice,
    none skipped, the same samples whatever the pack (its seeds) and across the chunk borders."""
    B, steps, seeds = 8, 2 * FreshBatches.CHUNK + 5, [3, 11]
    batches = FreshBatches(SMALL, seeds, B, "cpu")
    starts, drawn = [], []
    for _ in range(steps):
        starts.append(batches.consumed)
        drawn.append(batches.batch())
    assert starts == [t * B for t in range(steps)]  # contiguous, disjoint ranges: nothing reused
    stream = [sample(SMALL, steps * B, seed) for seed in seeds]
    for t, (tokens, labels, keep) in enumerate(drawn):
        for k in range(len(seeds)):
            assert torch.equal(tokens[k], stream[k].tokens[t * B : (t + 1) * B])
            assert torch.equal(labels[k], stream[k].labels[t * B : (t + 1) * B])
        assert keep is None
    alone = FreshBatches(SMALL, [11], B, "cpu")
    for t in range(steps):
        assert torch.equal(alone.batch()[0][0], drawn[t][0][1])


def test_the_n_curve_of_one_run_equals_separate_runs_stopped_at_each_n():
    """The record at N = B t of one long run is what a run given only N samples ends with."""
    long = train_pack(SMALL, ModelConfig(), ONE_PASS, [ONE_PASS.batch_size * ONE_PASS.max_steps] * 2, [0, 1])
    curve = {(r["seed"], r["n_train"]): r for r in long.records()}
    for step in ONE_PASS.evaluation_steps(ONE_PASS.max_steps)[1::3]:
        n = ONE_PASS.batch_size * step
        short = train_pack(SMALL, ModelConfig(), ONE_PASS, [n, n], [0, 1])
        assert short.steps.tolist() == [step, step]
        for k, seed in enumerate((0, 1)):
            assert short.final["test_error"][k] == pytest.approx(curve[seed, n]["test_error"], abs=1e-6)
            assert short.final["test_loss"][k] == pytest.approx(curve[seed, n]["test_loss"], abs=1e-5)


def test_success_at_n_means_zero_test_error_from_n_on_and_the_first_and_stable_n_per_seed():
    result = train_pack(SMALL, ModelConfig(), ONE_PASS, [480] * 4, [0, 1, 2, 3])
    for k in range(4):
        records = result.model_records(k)
        errors = np.array([r["test_error"] for r in records])
        for i, r in enumerate(records):
            assert r["success"] == bool((errors[i:] == 0).all())
            assert r["outcome"] == ("succeeded" if r["success"] else "failed")
        stable = [r["n_train"] for r in records if r["success"]]
        assert records[0]["n_stable"] == (stable[0] if stable else -1)
        first = [r["n_train"] for r in records if r["test_error"] == 0]
        if result.iterations_to_zero[k] != 0:  # zero error at step 0 comes before any record
            assert records[0]["n_first_zero"] == (first[0] if first else -1)
        assert records[0]["n_stable"] == -1 or records[0]["n_first_zero"] <= records[0]["n_stable"]
    rows = summarize_by_n(result.records())
    assert [r["n"] for r in rows] == [8 * s for s in ONE_PASS.evaluation_steps(60)[1:]]
    rates = [r["success_rate"] for r in rows]
    assert rates == sorted(rates)  # stable success can only rise with N


def test_evaluation_grid_is_linear_then_geometric_and_ends_at_the_budget():
    steps = ONE_PASS.evaluation_steps(200)
    assert steps[:5] == [0, 5, 10, 15, 20] and steps[-1] == 200
    gaps = np.diff(steps[:-1])
    assert (gaps >= 5).all()
    late = np.array(steps[6:-1])
    assert np.all(late[1:] / late[:-1] <= 1.3 + 1 / late[:-1])  # at most the ratio, up to rounding
    multi = dataclasses.replace(ONE_PASS, protocol="multi_pass")
    assert multi.evaluation_steps(23) == [0, 5, 10, 15, 20, 23]
    with pytest.raises(ConfigError, match="eval_ratio"):
        TrainConfig(eval_ratio=1.0)


def test_a_censored_model_never_reaches_stable_success_within_its_budget():
    """Two steps cannot teach a model anything: every record fails and n_stable says never."""
    short = dataclasses.replace(ONE_PASS, max_steps=2, eval_every=1)
    result = train_pack(SMALL, ModelConfig(kind="cnn"), short, [16, 16], [0, 1], lr=[1e-4, 1e-4])
    assert all(r["outcome"] == "failed" and r["n_stable"] == -1 for r in result.records())


def test_diverged_one_pass_models_count_as_diverged_at_every_n():
    result = train_pack(SMALL, ModelConfig(), ONE_PASS, [480, 480], [0, 1], lr=[0.5, 1e35])
    assert {r["outcome"] for r in result.model_records(1)} == {"diverged"}
    assert result.model_records(0)[-1]["outcome"] in ("succeeded", "failed")


def test_one_pass_needs_a_whole_batch_of_samples():
    with pytest.raises(ValueError, match="one batch"):
        train_pack(SMALL, ModelConfig(), ONE_PASS, [4], [0])


def test_one_pass_on_a_finite_image_pool_stops_at_its_end():
    digits = ImageDataConfig()
    with pytest.raises(ValueError, match="images"):
        sample(digits, 10, 0, Stream.TRAIN_DATA, start=10_000)


WINDOW = dataclasses.replace(ONE_PASS, max_steps=400, stability_window=3.0)


def _zero_run_start(records: list[dict]) -> int:
    """The first N of the run of zero test error that ends a model's records (-1: none)."""
    zero = [r["test_error"] == 0 for r in records]
    if not zero[-1]:
        return -1
    i = len(zero) - 1 - zero[::-1].index(False) if False in zero else -1
    return records[i + 1]["n_train"]


def test_a_window_follows_each_model_to_w_times_its_stable_n_then_stops():
    """Each model runs on until its zero test error has held from its stable N to W times it, then
    leaves the pack: its records are a prefix of an unwindowed run's, whatever its budget was."""
    windowed = train_pack(SMALL, ModelConfig(), WINDOW, [8 * 400] * 3, [0, 1, 2])
    free = train_pack(SMALL, ModelConfig(), dataclasses.replace(WINDOW, stability_window=0.0), [8 * 400] * 3, [0, 1, 2])
    for k in range(3):
        mine, long = windowed.model_records(k), free.model_records(k)
        assert [r["test_error"] for r in mine] == pytest.approx([r["test_error"] for r in long[: len(mine)]])
        n_stable = mine[0]["n_stable"]
        assert n_stable > 0 and not mine[0]["censored"] and n_stable == _zero_run_start(mine)
        last = mine[-1]["n_train"]
        assert last >= 3 * n_stable  # followed over the whole window ...
        assert len(mine) < len(long)  # ... and no further: the cap was never needed
        for i in range(1, len(mine)):  # at no earlier evaluation was its window already closed
            start = _zero_run_start(mine[:i])
            assert start < 0 or mine[i - 1]["n_train"] < 3 * start
        assert [r["success"] for r in mine] == [r["n_train"] >= n_stable for r in mine]


def test_a_model_whose_window_does_not_fit_under_its_cap_is_censored():
    """A model stopped by the cap before its window closes has no stable N: every N fails, and it
    says so; with the cap above W times that N the same model is confirmed."""
    confirmed = train_pack(SMALL, ModelConfig(), WINDOW, [8 * 400], [0]).model_records(0)
    n_stable = confirmed[0]["n_stable"]
    cap = (3 * n_stable) // 8 - 2  # ends inside the window
    assert cap * 8 > n_stable
    capped = train_pack(SMALL, ModelConfig(), dataclasses.replace(WINDOW, max_steps=cap), [8 * cap], [0])
    records = capped.model_records(0)
    assert records[-1]["n_train"] == 8 * cap and _zero_run_start(records) == n_stable
    assert all(r["censored"] and r["n_stable"] == -1 and not r["success"] for r in records)


def test_the_window_is_zero_or_above_one():
    with pytest.raises(ConfigError, match="stability_window"):
        TrainConfig(stability_window=1.0)
    off = train_pack(SMALL, ModelConfig(), ONE_PASS, [80], [0]).records()[0]
    assert "censored" not in off  # records as before


@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_fresh_batches_make_each_block_of_the_stream_once(monkeypatch, batch_size):
    """Chunks are whole blocks: the samplers are asked for consecutive, disjoint, block-aligned
    ranges of the stream, whatever B (at B = 1 each block used to be made twice)."""
    asked = []
    real = train.sample

    def spy(data, n, seed, stream=Stream.TRAIN_DATA, start=0, device="cpu"):
        asked.append((start, n))
        return real(data, n, seed, stream, start, device)

    monkeypatch.setattr(train, "sample", spy)
    batches = FreshBatches(SMALL, [0], batch_size, "cpu")
    drawn = [batches.batch()[0][0] for _ in range(100)]
    assert all(start % BLOCK == 0 and n % BLOCK == 0 for start, n in asked)
    assert [start for start, _ in asked] == list(np.cumsum([0] + [n for _, n in asked[:-1]]))
    whole = real(SMALL, 100 * batch_size, 0)
    assert torch.equal(torch.cat(drawn), whole.tokens)  # the same samples, in order


def test_a_model_that_did_not_move_since_its_last_scoring_is_not_scored_again(monkeypatch):
    """On the hinge loss, a model whose mini-batches since its last evaluation all had zero loss
    got zero gradients, so its test metrics are kept, not recomputed: the records are those of
    scoring every model at every evaluation, for fewer samples scored."""
    train = dataclasses.replace(ONE_PASS, batch_size=1, max_steps=400, eval_every=1, eval_ratio=1.1, stability_window=4)
    scored = []
    head = PackedModel.head
    monkeypatch.setattr(
        PackedModel, "head", lambda self, H, keep, shape: scored.append(self.K * shape[0]) or head(self, H, keep, shape)
    )

    def run() -> tuple[list[dict], int]:
        scored.clear()
        result = train_pack(SMALL, ModelConfig(), train, [400] * 4, [0, 1, 2, 3], [1.0] * 4)
        return result.records(), sum(scored)

    kept, fewer = run()
    test_metrics = _Training.test_metrics

    def every_model_moved(self, decisive, exact):
        self.moved[:] = True
        return test_metrics(self, decisive, exact)

    monkeypatch.setattr(_Training, "test_metrics", every_model_moved)
    scored_always, every = run()
    np.testing.assert_equal(kept, scored_always)  # NaN (errors by margin not counted) counts as equal
    assert fewer < 0.9 * every, (fewer, every)  # 17% fewer here
