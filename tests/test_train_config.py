"""TrainConfig's one budget rule: the sample budget, the same budget at another batch size, and
the steps a model of N samples trains (vit_core.train_config)."""

import pytest

from vit_core.fields import ConfigError
from vit_core.train_config import TrainConfig


def test_a_batch_size_keeps_the_sample_budget_rounding_the_steps_down():
    train = TrainConfig(batch_size=16, max_steps=100, lr=0.3)
    assert train.sample_budget == 1600
    wider = train.at_batch(48)
    assert (wider.batch_size, wider.max_steps, wider.lr) == (48, 33, 0.3)  # 1600 // 48
    assert train.at_batch(16) == train
    with pytest.raises(ConfigError):
        train.at_batch(3200)  # no step left


def test_one_pass_trains_n_over_b_steps_at_most_max_steps_and_multi_pass_max_steps():
    one_pass = TrainConfig(batch_size=10, max_steps=50, protocol="one_pass")
    assert [one_pass.steps_for(n) for n in (10, 99, 500, 10_000)] == [1, 9, 50, 50]
    assert TrainConfig(batch_size=10, max_steps=50).steps_for(10) == 50
