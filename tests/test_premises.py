"""Paper A's theorem premises as checks on a cell, read from the data and the models as built (each
one met or not, with its numbers); the realised initial error and the information floor they and
the report rest on."""

import math

import numpy as np
import torch

from vit_core.li2023.configs import ModelConfig, TokenDataConfig
from vit_core.li2023.family import Li2023
from vit_core.li2023.floor import both_labels_from, nearest_centroid_zero_error, plug_in_floor
from vit_core.li2023.layout import make_patterns
from vit_core.li2023.models import alignment_error, initial_errors

DATA = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.3, tau=0.1)
SEEDS = list(range(4))


def _by_name(premises):
    return {p.name: p for p in premises}


def test_a_cell_inside_the_theorem_meets_every_premise():
    model = ModelConfig(width=512, value_dim=16, init_error=0.02)
    premises = _by_name(Li2023().premises(DATA, model, batch_size=32, lr=0.5, n=100, seeds=SEEDS))
    assert all(p.met for p in premises.values()), [p for p in premises.values() if not p.met]
    width = premises["width"]
    assert width.value == 512 and width.bound == 100 * math.log(100)  # m >= M^2 log N = 460.5
    shift = premises["shift"]  # sigma + tau against alpha*: the usable alpha* is what is left
    assert shift.bound == DATA.effective_alpha_star and 0.1 < shift.value < 0.1 + 0.05


def test_the_main_jobs_old_cell_violates_width_batch_step_and_the_shift():
    data = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.05, tau=0.3)
    premises = _by_name(Li2023().premises(data, ModelConfig(width=32), batch_size=1, lr=1024, n=200, seeds=SEEDS))
    assert {name for name, p in premises.items() if not p.met} == {"width", "shift", "batch", "step"}
    assert premises["confusion"].met and premises["confusion"].value == data.confusion / data.alpha_star


def test_confusion_at_the_edge_and_a_random_init_fail():
    data = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.3, tau=0.1, confusion_ratio=0.2)
    premises = _by_name(Li2023().premises(data, ModelConfig(width=512, init="random"), 32, 0.5, 100, SEEDS))
    assert not premises["confusion"].met  # 0.2 > 1/(2e) = 0.184
    assert not premises["initial model"].met and premises["initial model"].value > 0.5  # W_Q, W_K disagree


def test_the_initial_model_premise_fails_on_the_realised_weights_where_the_knob_passes():
    """init_error = 0.1 = 1/M reads as met, but at m = 1,024 without value_dim W_V is 1,024 x 40 and
    its error matrix, 0.1 times a Gaussian over sqrt(40), sends each pattern ~0.5 away: measured on
    the weights, the premise fails (and so does the shift, sigma + tau against alpha*)."""
    model = ModelConfig(width=1024, init_error=0.1)
    assert model.init_error <= 1 / DATA.n_patterns
    premises = _by_name(Li2023().premises(DATA, model, 32, 0.5, 100, SEEDS))
    assert not premises["initial model"].met and premises["initial model"].value > 0.12
    narrow = _by_name(
        Li2023().premises(DATA, ModelConfig(width=1024, value_dim=16, init_error=0.1), 32, 0.5, 100, SEEDS)
    )
    assert premises["initial model"].value > narrow["initial model"].value


def test_gaussian_patterns_and_too_few_tokens_fail_their_premises():
    data = TokenDataConfig(n_tokens=20, dim=40, n_patterns=10, alpha_star=0.15, tau=0.01, patterns="gaussian")
    premises = _by_name(Li2023().premises(data, ModelConfig(width=512, init_error=0.01), 32, 0.5, 100, SEEDS))
    assert not premises["patterns"].met and premises["patterns"].value > 0.01
    assert not premises["tokens"].met and premises["tokens"].value < 4


def test_the_realised_initial_error_of_a_hand_built_model_is_its_error():
    """W = gain U P^T + eps U D P^T sends pattern j to (gain + eps d_j) u_j: the nearest orthonormal
    directions are the u_j, and the error is eps max |d_j|. W_Q and W_K whose directions differ by a
    rotation by theta in planes of pattern pairs share the halfway directions: each is 2 sin(theta/4)
    from them."""
    patterns = torch.from_numpy(make_patterns(DATA))  # (M, d): P^T
    M = patterns.shape[0]
    U = torch.linalg.qr(torch.randn(16, M, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))[0]
    D = torch.linspace(-1, 2, M, dtype=torch.float64)
    W = 1.5 * U @ patterns + 0.01 * U @ torch.diag(D) @ patterns
    assert abs(alignment_error([W.unsqueeze(0)], patterns, 1.5).item() - 0.02) < 1e-12
    assert alignment_error([(1.5 * U @ patterns).unsqueeze(0)], patterns, 1.5).item() < 1e-12
    theta = math.pi / 2
    plane = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]], dtype=torch.float64)
    rotation = torch.block_diag(*[plane] * (M // 2))
    W_Q, W_K = (U @ patterns).unsqueeze(0), (U @ rotation @ patterns).unsqueeze(0)
    assert abs(alignment_error([W_Q, W_K], patterns, 1.0).item() - 2 * math.sin(theta / 4)) < 1e-9


def test_the_initial_errors_of_built_models_follow_the_init_error_and_the_rows():
    errors = initial_errors(ModelConfig(width=64, value_dim=16, init_error=0.02), make_patterns(DATA), SEEDS, 120)
    assert set(errors) == {"sigma", "delta"} and max(errors.values()) < 0.04
    cnn = initial_errors(
        ModelConfig(kind="cnn", width=64, value_dim=16, init_error=0.0), make_patterns(DATA), SEEDS, 120
    )
    assert set(cnn) == {"sigma"} and cnn["sigma"] < 1e-6


def test_the_nearest_centroid_floor_on_a_hand_case():
    """Features on a line: +1 at x > 0. The first sample (label +1) alone predicts +1 for all: wrong on
    the -1 test sample; with one of each label the midpoint 0.5 separates the test samples; a third
    sample pulls the -1 centroid to -4 and the midpoint to -1, which errs on the test sample at -0.5."""
    train = (np.array([[1.0], [0.0], [-8.0]]), np.array([1.0, -1.0, -1.0]))
    test = (np.array([[2.0], [-0.5]]), np.array([1.0, -1.0]))
    assert nearest_centroid_zero_error(train, test).tolist() == [False, True, False]


def test_the_plug_in_floor_needs_both_labels_and_falls_with_alpha_star():
    easy = TokenDataConfig(n_tokens=120, dim=8, n_patterns=4, tau=0.02, alpha_star=0.4, counts="binomial")
    hard = TokenDataConfig(n_tokens=120, dim=8, n_patterns=4, tau=0.02, alpha_star=0.1, counts="binomial")
    floor = plug_in_floor(easy, SEEDS, 64, 200, [7] * len(SEEDS))
    table = floor.zero_error
    assert table.shape == (64, len(SEEDS)) and table[0].sum() == 0  # one sample: one label seen, half wrong
    assert table[-1].all()
    assert plug_in_floor(hard, SEEDS, 64, 200, [7] * len(SEEDS)).zero_error[:8].sum() < table[:8].sum()
    for column, first in zip(table.T, floor.both_labels_from):  # no zero error before both labels are seen
        assert first >= 2 and not column[: first - 1].any()
    assert both_labels_from(np.array([1.0, 1.0, -1.0])) == 3 and both_labels_from(np.array([-1.0, -1.0])) == 0
