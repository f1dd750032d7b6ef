"""N* in the theorem's own form beside the pure power law, with bootstrap CIs over seeds and the
form the data prefer.

Theorem 1 does not bound N by a power of 1/alpha*: its usable fraction is alpha* less terms in
the initial error and the token noise, N >~ (alpha* - c)^-2 (science.md). So each group of cells
is fitted four ways on log N*, v the family's scaling value (Paper A: alpha*, effective):
- power, k free:    N* = K v^-k            (the exponent every report gives)
- power, k fixed:   N* = K v^-k0           (k0 the theory's exponent for the model)
- shifted, k fixed: N* = K (v - c)^-k0     (0 <= c < the smallest v)
- shifted, k free:  N* = K (v - c)^-k
(v^+k for a family whose variable is not inverted). The shift c is found on a grid dense near
its upper end; K and k in closed form at each c. Which form the data prefer is decided on values
of v held out: each cell left out in turn, its log N* predicted by the form fitted to the rest;
the smallest root-mean-square error wins. Pure numpy, like services.analysis.
"""

from dataclasses import dataclass, field

import numpy as np

from services.analysis import BOOTSTRAP, CI, Estimate, Outcomes, _positive, _round, joint_resamples

GRID = 1 - np.geomspace(1, 1e-3, 160)  # c as a share of the smallest v: 0 ... 0.999, dense near the top


@dataclass(frozen=True)
class Form:
    """One functional form: shifted or not, k fixed at a value or free."""

    shifted: bool
    k: float | None  # None: fitted

    @property
    def label(self) -> str:
        return f"{'shifted' if self.shifted else 'power'}, k {'free' if self.k is None else f'= {self.k:g}'}"

    @property
    def key(self) -> str:
        """The label as a metric name's part: "shifted_k2", "power_kfree"."""
        return f"{'shifted' if self.shifted else 'power'}_k{'free' if self.k is None else f'{self.k:g}'}"

    @property
    def parameters(self) -> int:
        return 1 + self.shifted + (self.k is None)


@dataclass
class FormFit:
    """One form fitted to a group's cells: K, c (0 for a power law) and k with their bootstrap
    95% CIs, the in-sample and held-out root-mean-square error of log N*."""

    form: str
    key: str
    K: Estimate
    c: Estimate
    k: Estimate
    rms: float | None
    held_out: float | None  # None: too few cells to leave one out (parameters + 1), or one left out below the shift


@dataclass
class Forms:
    """A group's four fits, the one the data prefer (smallest held-out error) and the points fitted."""

    fits: list[FormFit]
    preferred: str | None
    points: list[list[float]] = field(default_factory=list)  # (v, N*) of the cells fitted
    cells: list[str] = field(default_factory=list)


def fit_form(v: np.ndarray, n: np.ndarray, form: Form, inverse: bool = True) -> tuple[float, float, float, float]:
    """(K, c, k, residual sum of squares of log N) of ``form`` by least squares on log N, over
    the grid of c (c = 0 alone where not shifted)."""
    v, log_n, sign = np.asarray(v, float), np.log(np.asarray(n, float)), -1.0 if inverse else 1.0
    shifts = GRID * v.min() if form.shifted else np.zeros(1)
    log_u = np.log(v[None, :] - shifts[:, None])  # (shifts, cells)
    if form.k is None:
        centred = log_u - log_u.mean(1, keepdims=True)
        slope = (centred * (log_n - log_n.mean())).sum(1) / np.maximum((centred**2).sum(1), 1e-300)
        k = sign * slope
    else:
        k = np.full(len(shifts), form.k)
    log_k = (log_n[None, :] - sign * k[:, None] * log_u).mean(1)
    rss = ((log_n[None, :] - log_k[:, None] - sign * k[:, None] * log_u) ** 2).sum(1)
    best = int(np.argmin(rss))
    return float(np.exp(log_k[best])), float(shifts[best]), float(k[best]), float(rss[best])


def held_out_error(v: np.ndarray, n: np.ndarray, form: Form, inverse: bool = True) -> float | None:
    """Root-mean-square error of log N* at each cell left out in turn, predicted by the form
    fitted to the others; None where fewer cells than the form's parameters + 1, or where a cell
    left out lies at or below the shift fitted to the others (the form predicts no finite N there)."""
    if len(v) < form.parameters + 1:
        return None
    errors = []
    for i in range(len(v)):
        rest = np.arange(len(v)) != i
        K, c, k, _ = fit_form(v[rest], n[rest], form, inverse)
        if v[i] <= c:
            return None
        predicted = np.log(K) + (-k if inverse else k) * np.log(v[i] - c)
        errors.append(predicted - np.log(n[i]))
    return float(np.sqrt(np.mean(np.square(errors))))


def fit_forms(
    v: list[float],
    cells: list[Outcomes],
    statistic,
    theory: float | None,
    inverse: bool = True,
    boot: int = BOOTSTRAP,
    seed: int = 0,
) -> Forms | None:
    """The four forms (two where the theory names no exponent) fitted to statistic(cell) against
    v, with CIs from joint resamples of the cells' seeds; None where fewer than three cells have
    a defined statistic (a shifted form needs more than two)."""
    v_all = np.asarray(v, float)
    forms = [Form(False, None), Form(True, None)]
    if theory is not None:
        forms[1:1] = [Form(False, theory), Form(True, theory)]
    ys = [_positive(statistic(c, None)) for c in cells]
    keep = [i for i, y in enumerate(ys) if y is not None]
    if len({v_all[i] for i in keep}) < 3:
        return None
    x, n = v_all[keep], np.array([ys[i] for i in keep], float)
    draws = {f: [] for f in forms}
    for columns in joint_resamples(cells, boot, seed):
        values = [_positive(statistic(c, cols)) for c, cols in zip(cells, columns)]
        mine = [i for i, y in enumerate(values) if y is not None]
        for f in forms:
            if len({v_all[i] for i in mine}) >= f.parameters + 1:
                draws[f].append(fit_form(v_all[mine], np.array([values[i] for i in mine], float), f, inverse)[:3])
    fits = []
    for f in forms:
        K, c, k, rss = fit_form(x, n, f, inverse)
        spread = np.array(draws[f]) if draws[f] else None
        fits.append(
            FormFit(
                f.label,
                f.key,
                *(
                    Estimate(_round(value), _round(np.percentile(spread[:, j], CI)) if spread is not None else None)
                    for j, value in enumerate((K, c, k))
                ),
                rms=_round(np.sqrt(rss / len(x))),
                held_out=_round(held_out_error(x, n, f, inverse)),
            )
        )
    judged = [fit for fit in fits if fit.held_out is not None]
    preferred = min(judged, key=lambda fit: fit.held_out).form if judged else None
    return Forms(fits, preferred, [[float(a), float(b)] for a, b in zip(x, n)])
