"""Paper A as a family (Li, Wang, Liu, Chen, ICLR 2023): the shallow ViT of eq. (1) and the CNN of
the same size on token data whose label-relevant tokens are a fraction alpha* of each sample.
Theorem 1: N ~ alpha*^-2 samples suffice for the ViT; Proposition 1: the CNN needs ~ alpha*^-4.
The same models on real images, with token sparsification of every image or of the trained
models' test images: li2023_images."""

import dataclasses
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from vit_core.family import Curve, Family, Premise, Scaling, Theory, reference_rows
from vit_core.fields import ConfigError
from vit_core.image_config import ImageTokenConfig
from vit_core.li2023.configs import (
    CONFUSION_BOUND,
    TOKENS,
    ModelConfig,
    TokenDataConfig,
    check_fits_data,
    sample_premises,
)
from vit_core.li2023.layout import make_patterns
from vit_core.li2023.oracle import oracle_rules
from vit_core.seeding import Stream, numpy_rng
from vit_core.sparsify import image_token_set, sparsified_name

REFERENCE = Path(__file__).parent / "reference"
ORTHONORMAL = 1e-6  # the patterns' largest departure from orthonormality that still counts as orthonormal
SPARSIFY_NAMES = {"noisy": "noisiest"}  # Fig 2(b)'s strategy -> our sparsify value, where they differ


class Li2023(Family):
    name = "li2023"
    description = "li2023: Li et al. ICLR 2023 (Paper A)"
    data = TokenDataConfig
    model = ModelConfig
    scaling = Scaling(
        "alpha_star",
        "alpha*",
        inverse=True,
        axis="1 / alpha* (effective)",
        column="alpha* (effective)",
        rule="alpha_scaling",
        format=".4f",
        shifted=True,  # Theorem 1: N >~ (alpha* - c'(1 - zeta) - c''(sigma + tau))^-2
    )
    theory = {
        "vit": Theory(
            2, "Theorem 1: N ~ alpha*^-2 samples suffice for the ViT, so k <= 2 is consistent with it", "Theorem 1"
        ),
        "cnn": Theory(
            4,
            "Proposition 1: N ~ alpha*^-4 samples suffice for the CNN, a sufficient bound: no k contradicts it, and "
            "k < 4 only says the bound is loose here",
            "Proposition 1",
        ),
    }
    difference_claims = {
        "cnn - vit": "Proposition 1 against Theorem 1: the CNN's sufficient bound is a factor alpha*^-2 larger (a "
        "difference of 2) than the ViT's; two sufficient bounds, so a measured difference cannot contradict it"
    }
    iterations_exponent = 1.0  # T = Theta(1 / (alpha* eta))
    favoured = ("vit", "cnn")
    question = (
        "how many samples N* does a shallow ViT need as the fraction alpha* of label-relevant tokens shrinks, against "
        "a CNN of the same size? (Li et al. 2023: alpha*^-2 suffice for the ViT, Theorem 1; alpha*^-4 for the CNN, "
        "Proposition 1)"
    )
    names = {"vit": "ViT", "cnn": "CNN"}
    reference = {
        "vit": REFERENCE / "li2023_fig1a_vit_success.csv",
        "cnn": REFERENCE / "li2023_fig1b_cnn_success.csv",
    }

    def sample(self, data, n, seed, stream, start):
        from vit_core.li2023.data import sample_tokens  # noqa: PLC0415  (torch loads on use)

        return sample_tokens(data, n, seed, stream, start)

    def sample_on(self, data, n, seed, stream, start, device):
        from vit_core.li2023.data import sample_tokens  # noqa: PLC0415  (torch loads on use)

        return sample_tokens(data, n, seed, stream, start, device)

    def build(self, model, data, seeds, device):
        from vit_core.li2023.models import build_model  # noqa: PLC0415  (torch loads on use)

        return build_model(model, make_patterns(data), seeds, data.n_tokens, device)

    def check(self, data: TokenDataConfig, model: ModelConfig) -> None:
        check_fits_data(model, data.dim, data.n_patterns)

    def premises(
        self, data: TokenDataConfig, model: ModelConfig, batch_size: int, lr: float, n: int, seeds: list[int]
    ) -> list[Premise]:
        """Theorem 1's premises (Proposition 1's CNN shares them: the same data and network less the
        attention), as our sources state them (science.md), every O(.) constant taken as 1, read
        from the data and the models as built: the initial errors sigma (W_V) and delta (W_Q, W_K)
        are measured on the seeds' initialised weights, never taken from the init_error knob."""
        M, alpha = data.n_patterns, data.effective_alpha_star
        width, ratio, batch = M * M * math.log(n), data.confusion / data.alpha_star, M * math.log(M)
        errors = realised_errors(data, model, tuple(seeds))
        initial, shift = max(errors.values()), errors["sigma"] + data.tau
        return [
            Premise("width", model.width >= width, model.width, width, "m >= M^2 log N"),
            Premise(
                "confusion",
                ratio < CONFUSION_BOUND,
                ratio,
                CONFUSION_BOUND,
                "alpha# / alpha* = c < 1 / (2e): confusion tokens well below the label-relevant ones",
            ),
            Premise(
                "patterns",
                (overlap := pattern_overlap(data)) <= ORTHONORMAL,
                overlap,
                ORTHONORMAL,
                "orthonormal patterns: the largest |<mu_i, mu_j> - [i = j]| of the data's patterns",
            ),
            Premise(
                "tokens",
                alpha * data.n_tokens >= TOKENS,
                alpha * data.n_tokens,
                TOKENS,
                f"L large enough: alpha* L >= {TOKENS} label-relevant tokens in an average sample (constant ours)",
            ),
            Premise(
                "initial model",
                initial <= 1 / M,
                initial,
                1 / M,
                "the initial model's error measured on the seeds' weights as built, <= 1/M: the largest "
                "||W mu_j - gain u_j|| over W_V (sigma) and, for the ViT, W_Q and W_K (delta), u_j the nearest "
                "orthonormal directions (vit_core.li2023.models.alignment_error)",
            ),
            Premise(
                "shift",
                shift < alpha,
                shift,
                alpha,
                "the usable alpha*, alpha* - (sigma + tau), is positive: Theorem 1's bound shifts alpha* by terms "
                "in the initial error sigma and the token noise tau (their constant taken as 1; its (1 - zeta) "
                "term is not measured here)",
            ),
            Premise(
                "batch",
                batch_size >= batch,
                batch_size,
                batch,
                "a large batch, B >= M log M (our reading; constant ours)",
            ),
            Premise("step", lr < 1, lr, 1.0, "a small step, eta < 1 (attention mass -> 1 - eta^C needs eta < 1)"),
        ]

    def information_floor(self, data: TokenDataConfig, seeds, n_max, n_test, test_seeds):
        """The nearest class centroid of the mean token (vit_core.li2023.floor)."""
        from vit_core.li2023.floor import plug_in_floor  # noqa: PLC0415  (torch loads on use)

        return plug_in_floor(data, list(seeds), n_max, n_test, list(test_seeds))

    def vote_margins(self, data: TokenDataConfig, n: int, seed: int):
        """Label-relevant minus confusion tokens among those each test sample keeps (vit_core.li2023.data)."""
        from vit_core.li2023.data import vote_counts  # noqa: PLC0415  (torch loads on use)

        relevant, confusion = vote_counts(data, n, seed, Stream.TEST_DATA)
        return relevant - confusion

    def sample_premises(self, data: TokenDataConfig, n: int, seed: int, stream: Stream):
        """The premises on alpha* and alpha# read per sample: its own confusion ratio below 1/(2e), at
        least TOKENS label-relevant tokens, and a vote that no single token decides (margin >= 2)."""
        from vit_core.li2023.data import vote_counts  # noqa: PLC0415  (torch loads on use)

        return sample_premises(*vote_counts(data, n, seed, stream))

    def difficulty(self, data: TokenDataConfig) -> dict[str, float]:
        """The oracle mean-token and single-token rules' error (and the first's margin): vit_core.li2023.oracle."""
        return oracle_rules(data)

    def sample_cost(self, data: TokenDataConfig, model: ModelConfig) -> float:
        """Eq. (1)'s forward pass on one sample (forward_cost)."""
        return forward_cost(data.n_tokens, data.dim, model)

    def scaling_value(self, data: TokenDataConfig) -> float:
        return data.effective_alpha_star

    def attention_reference(self) -> Curve:
        """Fig 2(a): the label-relevant attention mass against the iteration."""
        _, *body = reference_rows(REFERENCE / "li2023_fig2a_attention_mass.csv")
        return Curve("paper (Fig 2a)", np.array([float(r[0]) for r in body]), np.array([float(r[1]) for r in body]))

    def sparsification_reference(self) -> list[tuple[str, str, list[tuple[int, float]]]]:
        """Fig 2(b): per strategy, the test loss against the tokens removed."""
        _, *body = reference_rows(REFERENCE / "li2023_fig2b_sparsification.csv")
        points: dict[str, list[tuple[int, float]]] = {}
        for strategy, removed, loss in body:
            points.setdefault(strategy, []).append((int(removed), float(loss)))
        return [(strategy, SPARSIFY_NAMES.get(strategy, strategy), p) for strategy, p in points.items()]


class Li2023Images(Family):
    """Paper A's ViT and CNN on real images, one patch a token, from a random init (real images
    plant no patterns to align with), and Section 4.3's token sparsification: S^n of every image,
    training and test (``sparsify``), or the trained models' test error after removing k patches of
    each test image by a rule of ImageTokenConfig (``test_sparsify``; the paper's CIFAR-10 claim:
    removing label-irrelevant tokens helps, random removal does not)."""

    name = "li2023_images"
    description = (
        "li2023_images: Paper A's models on real images, with token sparsification of every image or of the test images"
    )
    data = ImageTokenConfig
    model = ModelConfig
    names = Li2023.names
    sparsification_quantity = "test_error"

    def sample(self, data, n, seed, stream, start):
        """The images, each of which keeps S^n by ``sparsify`` (random: drawn from the seed, stream and start)."""
        import torch  # noqa: PLC0415  (torch loads on use)

        from vit_core.images import sample_images  # noqa: PLC0415  (torch loads on use)

        batch = sample_images(data, n, seed, stream, start)
        if not data.sparsify_k:
            return batch  # every patch kept: sample_images' mask
        rng = numpy_rng(seed, Stream.SPARSIFY, int(stream), start)
        keep = image_token_set(data.sparsify, data.sparsify_k, batch.tokens.numpy(), rng)
        return dataclasses.replace(batch, keep=torch.from_numpy(keep))

    def build(self, model, data, seeds, device):
        from vit_core.li2023.models import build_model  # noqa: PLC0415  (torch loads on use)

        no_patterns = np.zeros((0, data.dim))  # only the aligned init reads patterns, and check refuses it
        return build_model(model, no_patterns, seeds, data.n_tokens, device)

    def check(self, data: ImageTokenConfig, model: ModelConfig) -> None:
        """Only a random init: the aligned one embeds the data's patterns, which images do not have."""
        if model.init == "aligned":
            raise ConfigError("init", model.init, "real images plant no patterns to align with: use random")

    def sample_cost(self, data: ImageTokenConfig, model: ModelConfig) -> float:
        """Eq. (1)'s forward pass on one image of L = n_patches tokens (forward_cost)."""
        return forward_cost(data.n_tokens, data.dim, model)

    def test_set_metric_names(self, data: ImageTokenConfig) -> tuple[str, ...]:
        """Per rule and k: the test error and loss after the removal (vit_core.sparsify.sparsified_name)."""
        rules, ks = data.test_sparsify, data.test_sparsify_k
        return tuple(sparsified_name(rule, k, metric) for rule in rules for k in ks for metric in ("error", "loss"))

    def test_set_metrics(self, data: ImageTokenConfig, pack, test, seeds, train):
        """The test error and loss after each rule's removal of each k (training.scoring.sparsified_scores)."""
        if not data.test_sparsify_k:
            return {}
        from vit_core.training.scoring import sparsified_scores  # noqa: PLC0415  (torch loads on use)

        return sparsified_scores(data.test_sparsify, data.test_sparsify_k, pack, test, seeds, train)


def forward_cost(n_tokens: int, dim: int, model: ModelConfig) -> float:
    """Multiply-adds of eq. (1) on one sample: the values' L·d·m; a kind with attention (the ViT)
    adds its query side L·d·d and its attention 2·L²·d (vit_core.li2023.kinds.Kind.attention_cost)."""
    return n_tokens * dim * model.v_rows() + model.declared.attention_cost(n_tokens, dim)


@lru_cache(maxsize=64)
def realised_errors(data: TokenDataConfig, model: ModelConfig, seeds: tuple[int, ...]) -> dict[str, float]:
    """The initial errors (sigma; delta for the ViT) of the models of ``seeds`` as built, the
    largest over the seeds (vit_core.li2023.models.initial_errors): the same for every cell sharing them."""
    from vit_core.li2023.models import initial_errors  # noqa: PLC0415  (torch loads on use)

    return initial_errors(model, make_patterns(data), list(seeds), data.n_tokens)


def pattern_overlap(data: TokenDataConfig) -> float:
    """The largest |<mu_i, mu_j> - [i = j]| over the data's patterns: 0 for orthonormal ones."""
    patterns = make_patterns(data)
    return float(np.abs(patterns @ patterns.T - np.eye(len(patterns))).max())
