"""Paper A as a family (Li, Wang, Liu, Chen, ICLR 2023): the shallow ViT of eq. (1) and the CNN of
the same size on token data whose label-relevant tokens are a fraction alpha* of each sample.
Theorem 1: N ~ alpha*^-2 samples suffice for the ViT; Proposition 1: the CNN needs ~ alpha*^-4."""

import math
from pathlib import Path

import numpy as np

from vit_core.configs import ModelConfig, TokenDataConfig, check_fits_data
from vit_core.family import Curve, Family, Premise, Scaling, Theory, reference_rows

REFERENCE = Path(__file__).parent / "reference"
CONFUSION_BOUND = 1 / (2 * math.e)  # Theorem 1: alpha* >= alpha# / c with c < 1/(2e)
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
    )
    theory = {
        "vit": Theory(2, "Theorem 1: N ~ alpha*^-2 samples suffice for the ViT, so k <= 2 is consistent with it"),
        "cnn": Theory(
            4,
            "Proposition 1: N ~ alpha*^-4 samples suffice for the CNN, a sufficient bound: no k contradicts it, and "
            "k < 4 only says the bound is loose here",
        ),
    }
    difference_claims = {
        "cnn - vit": "Proposition 1 against Theorem 1: the CNN's sufficient bound is a factor alpha*^-2 larger (a "
        "difference of 2) than the ViT's; two sufficient bounds, so a measured difference cannot contradict it"
    }
    iterations_exponent = 1.0  # T = Theta(1 / (alpha* eta))
    favoured = ("vit", "cnn")
    names = {"vit": "ViT", "cnn": "CNN"}
    reference = {
        "vit": REFERENCE / "li2023_fig1a_vit_success.csv",
        "cnn": REFERENCE / "li2023_fig1b_cnn_success.csv",
    }

    def sample(self, data, n, seed, stream, start):
        from vit_core.data import sample_tokens

        return sample_tokens(data, n, seed, stream, start)

    def sample_on(self, data, n, seed, stream, start, device):
        from vit_core.data import sample_tokens

        return sample_tokens(data, n, seed, stream, start, device)

    def build(self, model, data, seeds, device):
        from vit_core.layout import make_patterns
        from vit_core.models import build_model

        return build_model(model, make_patterns(data), seeds, data.n_tokens, device)

    def check(self, data: TokenDataConfig, model: ModelConfig) -> None:
        check_fits_data(model, data.dim, data.n_patterns)

    def premises(self, data: TokenDataConfig, model: ModelConfig, batch_size: int, lr: float, n: int) -> list[Premise]:
        """Theorem 1's premises (Proposition 1's CNN shares them: the same data and network less the
        attention), as our sources state them (science.md), every O(.) constant taken as 1."""
        M = data.n_patterns
        width, ratio, batch = M * M * math.log(n), data.confusion / data.alpha_star, M * math.log(M)
        init_error = model.init_error if model.init == "aligned" else math.inf
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
                "noise",
                data.tau < data.alpha_star,
                data.tau,
                data.alpha_star,
                "tau < alpha*: the usable alpha* shrinks by a term of order tau (constant ours)",
            ),
            Premise(
                "initial model",
                init_error <= 1 / M,
                init_error,
                1 / M,
                "an initial model aligned with the patterns, error <= 1/M (init=aligned, init_error)",
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

    def difficulty(self, data: TokenDataConfig) -> dict[str, float]:
        """The oracle mean-token and single-token rules' error (and the first's margin): vit_core.oracle."""
        from vit_core.oracle import oracle_rules

        return oracle_rules(data)

    def sample_cost(self, data: TokenDataConfig, model: ModelConfig) -> float:
        """The values' L·d·m; a ViT adds its query side L·d·d and its attention 2·L²·d."""
        L, d = data.n_tokens, data.dim
        values = L * d * model.v_rows()
        return values + (L * d * d + 2 * L * L * d if model.kind == "vit" else 0)

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
