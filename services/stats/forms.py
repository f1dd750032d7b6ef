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

from services.analysis import BOOTSTRAP, CI, Estimate, Outcomes, _positive, _round, joint_resamples, statistic_draws

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
    """A group's four fits, the one with the smallest held-out error and the points fitted; that
    form is preferred only where its held-out advantage over the next form has a bootstrap CI
    above 0 (``decided``), else the data leave the form undecided."""

    fits: list[FormFit]
    preferred: str | None  # the smallest held-out error (None: too few cells to hold one out)
    points: list[list[float]] = field(default_factory=list)  # (v, N*) of the cells fitted
    cells: list[str] = field(default_factory=list)
    runner_up: str | None = None  # the form with the next smallest held-out error
    advantage: Estimate | None = None  # the runner-up's held-out error minus the preferred one's, with its CI
    decided: bool = False  # the advantage's CI lies above 0: the data prefer ``preferred``

    @property
    def verdict(self) -> str:
        """The form the data prefer, or "undecided" where the advantage's CI reaches 0."""
        return self.preferred if self.decided and self.preferred else "undecided"


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
    v, with CIs from joint resamples of the cells' seeds, and the held-out advantage of the best
    form over the next in the same resamples; None where fewer than three cells have a defined
    statistic (a shifted form needs more than two)."""
    v_all = np.asarray(v, float)
    forms = [Form(False, None), Form(True, None)]
    if theory is not None:
        forms[1:1] = [Form(False, theory), Form(True, theory)]
    ys = [_positive(statistic(c, None)) for c in cells]
    keep = [i for i, y in enumerate(ys) if y is not None]
    if len({v_all[i] for i in keep}) < 3:
        return None
    x, n = v_all[keep], np.array([ys[i] for i in keep], float)
    points = {f: fit_form(x, n, f, inverse) for f in forms}
    held = {f: held_out_error(x, n, f, inverse) for f in forms}
    # forms that predict alike (a shift fitted at 0 is the power law) tie: the simpler one ranks first, and
    # the advantage is over the next form that predicts otherwise
    ranked = sorted((f for f in forms if held[f] is not None), key=lambda f: (round(held[f], 9), f.parameters))
    ranked = ranked[:1] + [f for f in ranked[1:] if round(held[f], 9) > round(held[ranked[0]], 9)]
    draws: dict[Form, list] = {f: [] for f in forms}
    advantages = []
    for values in statistic_draws(statistic, cells, list(joint_resamples(cells, boot, seed))):
        mine = np.nonzero(np.isfinite(values))[0]
        vb, nb = v_all[mine], values[mine]
        for f in forms:
            if len(set(vb)) >= f.parameters + 1:
                draws[f].append(fit_form(vb, nb, f, inverse)[:3])
        if len(ranked) >= 2 and len(set(vb)) >= 3:
            best, other = (held_out_error(vb, nb, f, inverse) for f in ranked[:2])
            if best is not None and other is not None:
                advantages.append(other - best)
    fits = []
    for f in forms:
        K, c, k, rss = points[f]
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
                held_out=_round(held[f]),
            )
        )
    out = Forms(fits, ranked[0].label if ranked else None, [[float(a), float(b)] for a, b in zip(x, n)])
    if len(ranked) >= 2:
        ci = _round(np.percentile(advantages, CI)) if advantages else None
        out.runner_up = ranked[1].label
        out.advantage = Estimate(_round(held[ranked[1]] - held[ranked[0]]), ci)
        out.decided = ci is not None and ci[0] > 0
    return out
