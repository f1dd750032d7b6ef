"""Paper A as a family (Li, Wang, Liu, Chen, ICLR 2023): the shallow ViT of eq. (1) and the CNN of
the same size on token data whose label-relevant tokens are a fraction alpha* of each sample.
Theorem 1: N ~ alpha*^-2 samples suffice for the ViT; Proposition 1: the CNN needs ~ alpha*^-4."""

from pathlib import Path

import numpy as np

from vit_core.configs import ModelConfig, TokenDataConfig, check_fits_data
from vit_core.family import Curve, Family, Scaling, Theory, reference_rows

REFERENCE = Path(__file__).parent / "reference"
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
        "cnn": Theory(4, "Proposition 1: the CNN needs ~ alpha*^-4, so k >= 4 would agree with it"),
    }
    difference_claims = {"cnn - vit": "Proposition 1: the CNN needs a factor alpha*^-2 more, a difference of 2"}
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
        from vit_core.data import make_patterns
        from vit_core.models import build_model

        return build_model(model, make_patterns(data), seeds, device)

    def check(self, data: TokenDataConfig, model: ModelConfig) -> None:
        check_fits_data(model, data.dim, data.n_patterns)

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
