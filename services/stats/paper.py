"""A paper's own N* and exponents, from the success tables its family ships (Family.reference: Paper
A's Fig 1, read off the authors' slides, +-0.05), so that every report draws them beside ours."""

from functools import cache

import numpy as np

from services.analysis import loglog_slope, stable_n_star
from vit_core.family import Family, reference_rows


@cache
def success_table(family: Family, model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paper's success rates for ``model`` (Fig 1 for Paper A): (the scaling field's values, N
    ascending, success[N, value]). The table's columns are x^exponent, the model's theory exponent."""
    power = family.theory[model].exponent * (-1 if family.scaling.inverse else 1)
    header, *body = reference_rows(family.reference[model])
    columns = np.array([float(c) for c in header[1:]])
    body = sorted(body, key=lambda r: int(r[0]))
    ns = np.array([int(r[0]) for r in body])
    return columns ** (1 / power), ns, np.array([[float(v) for v in r[1:]] for r in body])


def columns(family: Family, model: str, p: float) -> list[tuple[float, int | None, tuple[int, int]]]:
    """(the scaling field's value, stable N* or None where the column's largest N misses p, the
    table's smallest and largest N) for every column of the paper's table."""
    values, ns, table = success_table(family, model)
    return [(float(a), stable_n_star(ns, table[:, j], p), (int(ns[0]), int(ns[-1]))) for j, a in enumerate(values)]


def n_star(family: Family, model: str, p: float) -> list[tuple[float, int]]:
    """(the scaling field's value, stable N*) for every column of the paper's table whose largest N reaches p."""
    return [(a, s) for a, s, _ in columns(family, model, p) if s is not None]


def exponent(family: Family, model: str, p: float) -> float | None:
    """Log-log slope of the paper's N* against the family's x."""
    points = n_star(family, model, p)
    if len(points) < 2:
        return None
    x = np.array([family.scaling.x(a) for a, _ in points])
    return loglog_slope(x, np.array([s for _, s in points], dtype=float))[0]
