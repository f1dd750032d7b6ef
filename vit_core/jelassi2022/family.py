"""Paper B as two families (Jelassi, Sander, Li, NeurIPS 2022): positional attention (model T) and
a vanilla-attention variant, on spatially structured synthetic data (``jelassi2022``) or on real
images cut into patches (``jelassi2022_images``)."""

import csv
from functools import cache
from pathlib import Path

import numpy as np

from vit_core.family import Family, Premise
from vit_core.image_config import ImageDataConfig
from vit_core.jelassi2022.configs import (
    PositionalConfig,
    SpatialDataConfig,
    bayes_error,
    check_positional_fits,
    set_matrix,
)

REFERENCE = Path(__file__).parent / "reference" / "jelassi2022_results.csv"  # the paper's values, read off its figures
TEST_ERRORS = {  # data labels -> (experiment, quantity) rows of the reference, named
    "threshold": {
        ("fig4_synthetic", "test_error_plateau"): "paper Fig 4: plateau",
        ("fig4_synthetic", "test_error_final_near_1e4_steps"): "paper Fig 4: near 10^4 steps",
    },
    "cnn": {("fig2_gaussian_cnn_labels", "test_error_final"): "paper Fig 2: final"},
}


class _PositionalModels(Family):
    """What both of Paper B's families share: its models, their checks and their cost."""

    model = PositionalConfig

    def build(self, model, data, seeds, device):
        """Paper B's attention, pre-trained first where it transfers (Thm 5.1), or Thm 3.1's linear models."""
        from vit_core.jelassi2022.linear import build_linear  # noqa: PLC0415  (torch loads on use)
        from vit_core.jelassi2022.positional import build_positional  # noqa: PLC0415  (torch loads on use)
        from vit_core.jelassi2022.pretrain import pretrained_attention  # noqa: PLC0415  (torch loads on use)

        if model.kind == "linear":
            return build_linear(model, data, seeds, device)
        attention = pretrained_attention(model, data, seeds, device) if model.transfer else None
        return build_positional(model, data, seeds, device, attention)

    def check(self, data: SpatialDataConfig | ImageDataConfig, model: PositionalConfig) -> None:
        check_positional_fits(model, data)

    def sample_cost(self, data: SpatialDataConfig | ImageDataConfig, model: PositionalConfig) -> float:
        """Each head's attention over D patches (D²·d) and the values (D·d·m, m = heads for value vectors);
        a linear model's D·d."""
        if model.kind == "linear":
            return data.n_patches * data.dim
        return model.heads * data.n_patches**2 * data.dim + data.n_patches * data.dim * max(model.heads, model.width)


class Jelassi2022(_PositionalModels):
    name = "jelassi2022"
    description = "jelassi2022: Jelassi et al. NeurIPS 2022 (Paper B)"
    data = SpatialDataConfig

    def sample(self, data, n, seed, stream, start):
        from vit_core.jelassi2022.spatial import sample_patches  # noqa: PLC0415  (torch loads on use)

        return sample_patches(data, n, seed, stream, start)

    def bayes_error(self, data: SpatialDataConfig) -> float:
        return bayes_error(data)

    def premises(
        self, data: SpatialDataConfig, model: PositionalConfig, batch_size: int, lr: float, n: int, seeds: list[int]
    ) -> list[Premise]:
        """Theorem 3.1's one premise a finite cell can be checked on (linear models): its scales
        (q = poly(C)/D) put more spurious +-w* patches in a sample, (D - C) q on average, than the
        signal set's C. Its other scales (d = poly(D), C = polylog(d)) are asymptotic."""
        if model.kind != "linear":
            return []
        spurious = (data.n_patches - data.set_size) * data.q
        statement = "(D - C) q > C: more spurious +-w* patches a sample than the signal set's (q = poly(C)/D)"
        return [Premise("spurious patches", spurious > data.set_size, spurious, data.set_size, statement)]

    def true_sets(self, data: SpatialDataConfig) -> np.ndarray:
        return set_matrix(data)

    def test_error_reference(self, data: SpatialDataConfig) -> dict[str, float]:
        """Fig 4's test errors (threshold labels), or Fig 2's negative control (cnn labels)."""
        wanted = TEST_ERRORS[data.labels]
        return {
            wanted[r["experiment"], r["quantity"]]: float(r["value"])
            for r in _paper_values()
            if (r["experiment"], r["quantity"]) in wanted
        }


class Jelassi2022Images(_PositionalModels):
    """Paper B's models on real images cut into patches: no true sets, feature or Bayes error to report."""

    name = "jelassi2022_images"
    description = "jelassi2022_images: Paper B's models on real images"
    data = ImageDataConfig

    def sample(self, data, n, seed, stream, start):
        from vit_core.images import sample_images  # noqa: PLC0415  (torch loads on use)

        return sample_images(data, n, seed, stream, start)


@cache
def _paper_values() -> list[dict[str, str]]:
    """The rows of the paper's values (its settings are quoted, so csv reads them)."""
    with REFERENCE.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))
