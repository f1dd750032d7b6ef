"""The values Li et al. (ICLR 2023) show in Figs 1-2, read off the authors' slides (+-0.05), and
Jelassi et al.'s (NeurIPS 2022) test errors in Figs 2 and 4, shipped in ``vit_core/reference/`` so
that every report draws them beside the measured ones."""

import csv
from functools import cache
from pathlib import Path

import numpy as np

import vit_core
from services.analysis import loglog_slope, stable_n_star
from vit_core.family import Family

REFERENCE = Path(vit_core.__file__).parent / "reference"


def _rows(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()
    return [line.split(",") for line in lines if line and not line.startswith("#")]


@cache
def success_table(family: Family, model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paper's success rates for ``model`` (Fig 1 for Paper A): (the scaling field's values, N
    ascending, success[N, value]). The table's columns are x^exponent, the model's theory exponent."""
    power = family.theory[model].exponent * (-1 if family.scaling.inverse else 1)
    header, *body = _rows(family.reference[model])
    columns = np.array([float(c) for c in header[1:]])
    body = sorted(body, key=lambda r: int(r[0]))
    ns = np.array([int(r[0]) for r in body])
    return columns ** (1 / power), ns, np.array([[float(v) for v in r[1:]] for r in body])


def n_star(family: Family, model: str, p: float) -> list[tuple[float, int]]:
    """(the scaling field's value, stable N*) for every column of the paper's table whose largest N reaches p."""
    values, ns, table = success_table(family, model)
    stars = [(float(a), stable_n_star(ns, table[:, j], p)) for j, a in enumerate(values)]
    return [(a, s) for a, s in stars if s is not None]


def exponent(family: Family, model: str, p: float) -> float | None:
    """Log-log slope of the paper's N* against the family's x."""
    points = n_star(family, model, p)
    if len(points) < 2:
        return None
    x = np.array([family.scaling.x(a) for a, _ in points])
    return loglog_slope(x, np.array([s for _, s in points], dtype=float))[0]


def attention_mass() -> tuple[np.ndarray, np.ndarray]:
    """Fig 2(a): (iteration, label-relevant attention mass)."""
    _, *body = _rows(REFERENCE / "li2023_fig2a_attention_mass.csv")
    return np.array([float(r[0]) for r in body]), np.array([float(r[1]) for r in body])


SPARSIFY_NAMES = {"noisy": "noisiest"}  # Fig 2(b)'s strategy -> our sparsify value, where they differ


def sparsification() -> dict[str, list[tuple[int, float]]]:
    """Fig 2(b): strategy -> [(tokens removed, test loss)]."""
    _, *body = _rows(REFERENCE / "li2023_fig2b_sparsification.csv")
    out: dict[str, list[tuple[int, float]]] = {}
    for strategy, removed, loss in body:
        out.setdefault(strategy, []).append((int(removed), float(loss)))
    return out


TEST_ERRORS = {  # Paper B: data labels -> (experiment, quantity) rows of the reference, named
    "threshold": {
        ("fig4_synthetic", "test_error_plateau"): "paper Fig 4: plateau",
        ("fig4_synthetic", "test_error_final_near_1e4_steps"): "paper Fig 4: near 10^4 steps",
    },
    "cnn": {("fig2_gaussian_cnn_labels", "test_error_final"): "paper Fig 2: final"},
}


def test_errors(labels: str) -> dict[str, float]:
    """Paper B's test errors for data labelled by ``labels`` (threshold: Fig 4; cnn: Fig 2's
    negative control): name -> error."""
    with (REFERENCE / "jelassi2022_results.csv").open() as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    wanted = TEST_ERRORS[labels]
    return {
        wanted[r["experiment"], r["quantity"]]: float(r["value"])
        for r in rows
        if (r["experiment"], r["quantity"]) in wanted
    }
