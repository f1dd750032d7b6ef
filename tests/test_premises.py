"""Paper A's theorem premises as checks on a cell: each one met or not, with its numbers."""

import math

from vit_core.configs import ModelConfig, TokenDataConfig
from vit_core.li2023 import Li2023

DATA = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.3, tau=0.1)


def _by_name(premises):
    return {p.name: p for p in premises}


def test_a_cell_inside_the_theorem_meets_every_premise():
    premises = _by_name(Li2023().premises(DATA, ModelConfig(width=512), batch_size=32, lr=0.5, n=100))
    assert all(p.met for p in premises.values()), [p for p in premises.values() if not p.met]
    width = premises["width"]
    assert width.value == 512 and width.bound == 100 * math.log(100)  # m >= M^2 log N = 460.5


def test_the_main_jobs_old_cell_violates_width_batch_step_and_noise():
    data = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.05, tau=0.3)
    premises = _by_name(Li2023().premises(data, ModelConfig(width=32), batch_size=1, lr=1024, n=200))
    assert {name for name, p in premises.items() if not p.met} == {"width", "noise", "batch", "step"}
    assert premises["confusion"].met and premises["confusion"].value == data.confusion / data.alpha_star


def test_confusion_at_the_edge_and_a_random_init_fail():
    data = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.3, tau=0.1, confusion_ratio=0.2)
    premises = _by_name(Li2023().premises(data, ModelConfig(width=512, init="random"), 32, 0.5, 100))
    assert not premises["confusion"].met  # 0.2 > 1/(2e) = 0.184
    assert not premises["initial model"].met
