"""A sweep's answer: three statements read at its primary (a setting and a success criterion the
spec names before the data), each from a 95% CI, and the same statements under every check read
from the same runs (each other success criterion at the primary setting, each other setting at the
primary criterion), with each check's agreement, claim by claim:

(a) the later model's N* over the favoured one's (Paper A: the CNN's over the ViT's) at every value
    of the scaling field, paired over seeds: more, fewer, or undecided (the CI holds 1);
(b) each model's exponent of N* in x and their difference, read against 0 with the spec's
    equivalence margin (equal within it, larger, smaller, or undecided) and against the theory's
    excess (Paper A: Proposition 1's +2 over Theorem 1's; excluded, reached, or undecided);
(c) the favoured model's exponent against its theorem's bound (below, above, or undecided): a
    sufficient bound, which a smaller exponent does not contradict.

A check from another sweep (a bundled spec of ``answer.checks``) is read the same way from its
recorded summary (``Answer.from_dict``, ``agreement``). No I/O: it reads the summary's fits.
"""

from services.analysis import Estimate
from services.spec.schema import AnswerSpec
from services.stats.rows import (
    ABOVE,
    AGREES,
    BELOW,
    DIFFERS,
    EQUAL,
    EXCLUDED,
    FEWER,
    LARGER,
    MORE,
    NOT_MEASURED,
    REACHED,
    SMALLER,
    UNDECIDED,
    Answer,
    Check,
    CriterionFits,
    Point,
    Regime,
    Statements,
    Summary,
)


def answer(summary: Summary, spec: AnswerSpec) -> Answer | None:
    """The answer of a summary whose sweep varies its family's scaling field, read at the spec's
    primary setting (axis -> value; an axis left out at its first value) and the summary's
    criterion, with every check from the same runs; None where nothing was fitted along the
    scaling field."""
    if not summary.exponent and not summary.criteria:
        return None
    family, field_name = summary.experiment, summary.scaling.field
    readings = summary.criteria or {
        summary.criterion: CriterionFits(
            summary.exponent, summary.exponent_difference, summary.forms, summary.n_star_ratio
        )
    }
    settings = list(dict.fromkeys(_setting(r.values, field_name) for r in summary.cells))
    first, margin = _primary_setting(summary, spec.primary, field_name), spec.margin
    if first not in settings:  # a sweep so far (the live record's) that has not measured its primary yet
        return None
    models = _models(summary.models, family.favoured)
    excess = _excess(family.theory, models)
    bound = family.theory[models[0]].exponent if models[0] in family.theory else None

    def read(name: str, setting: str, criterion: str) -> Statements:
        return _statements(summary, readings[criterion], name, setting, criterion, models, (margin, excess, bound))

    main = read("primary", first, summary.criterion)
    others = [read(c, first, c) for c in readings if c != summary.criterion]
    split = {s: _split(s, spec.regimes) for s in settings}  # (its regime's values, the rest) per setting
    others += [read(s, s, summary.criterion) for s in settings if s != first and split[s][0] == split[first][0]]
    rows = [r for r in summary.cells if _setting(r.values, field_name) == first]
    regimes = [
        Regime(split[s][0], read(s, s, summary.criterion), _violated(summary, s))
        for s in settings
        if spec.regimes and split[s][1] == split[first][1]
    ]
    return Answer(
        main,
        margin,
        excess,
        bound,
        [Check(s, "same runs", agreement(main, s)) for s in others],
        summary.success_rate,
        len(summary.seeds),
        min(summary.seeds, default=0),
        rows[0].n_test,
        rows[0].samples.test_sets if rows[0].samples else 1,
        list(spec.checks),
        regimes,
    )


def _split(setting: str, regimes: list[str]) -> tuple[dict[str, str], str]:
    """A setting ("tau=0.1 counts=premised") as the values of its regime axes and the text of the rest."""
    pairs = [word.split("=", 1) for word in setting.split() if "=" in word]
    return {k: v for k, v in pairs if k in regimes}, " ".join(f"{k}={v}" for k, v in pairs if k not in regimes)


def _violated(summary: Summary, setting: str) -> list[str]:
    """The premises some cell of ``setting`` violates, each named once."""
    field_name = summary.scaling.field
    rows = [r for r in summary.cells if _setting(r.values, field_name) == setting]
    return list(dict.fromkeys(p.name for r in rows for p in r.violated))


def agreement(primary: Statements, other: Statements) -> dict[str, str]:
    """Claim by claim of the primary: agrees, differs, undecided (either leaves it so), or not measured."""
    theirs = other.decisions()
    out = {}
    for claim, mine in primary.decisions().items():
        if claim not in theirs:
            out[claim] = NOT_MEASURED
        elif UNDECIDED in (mine, theirs[claim]):
            out[claim] = AGREES if mine == theirs[claim] else UNDECIDED
        else:
            out[claim] = AGREES if mine == theirs[claim] else DIFFERS
    return out


def _setting(values: dict, field_name: str) -> str:
    """A cell's setting without the scaling field ("counts=fixed"; "all" where no other axis)."""
    return " ".join(f"{k}={v}" for k, v in values.items() if k != field_name) or "all"


def _primary_setting(summary: Summary, primary: dict, field_name: str) -> str:
    """The setting of the first cell (spec order: each axis at its first value) with ``primary``'s values."""
    values = {k: v for k, v in summary.cells[0].values.items() if k != field_name} | primary
    return _setting(values, field_name)


def _models(models: list[str], favoured: tuple[str, str] | None) -> list[str]:
    """[the family's favoured model, the one it beats] where the sweep has both; else its first two."""
    if favoured and all(m in models for m in favoured):
        return list(favoured)
    return list(models[:2])


def _excess(theory: dict, models: list[str]) -> float | None:
    """The theory's claimed exponent of the other model less the favoured one's (Paper A: 4 - 2)."""
    if len(models) < 2 or not all(m in theory for m in models):
        return None
    return theory[models[1]].exponent - theory[models[0]].exponent


def _group(model: str, setting: str) -> str:
    return model if setting == "all" else f"{model} {setting}"


def _statements(
    summary: Summary, fits: CriterionFits, name: str, setting: str, criterion: str, models: list[str], against: tuple
) -> Statements:
    """The three statements of one reading, from the summary's fits under ``criterion`` at ``setting``."""
    margin, excess, bound = against
    out = Statements(name, setting, criterion, models)
    fitted = {m: fits.exponent.get(_group(m, setting)) for m in models}
    out.exponents = {m: Estimate(fit.value, fit.ci95) for m, fit in fitted.items() if fit and fit.value is not None}
    out.unfitted = [m for m, fit in fitted.items() if fit is None or fit.value is None]
    if models[0] in out.exponents:
        out.bound = _against(out.exponents[models[0]], bound, BELOW, ABOVE) if bound is not None else UNDECIDED
    out.points = _points(summary, fits, setting, criterion, models)
    if len(models) == 2:
        out.difference = _difference(fits, setting, models)
    if out.difference is not None:
        out.against_zero = _against_zero(out.difference, margin)
        out.against_excess = _against(out.difference, excess, EXCLUDED, REACHED) if excess is not None else UNDECIDED
    return out


def _points(summary: Summary, fits: CriterionFits, setting: str, criterion: str, models: list[str]) -> list[Point]:
    """Each value of the scaling field the first model measured at ``setting``: N* per model and,
    where two models measured it, (a)."""
    field_name = summary.scaling.field
    rows = {
        (r.model, r.values[field_name]): r
        for r in summary.cells
        if field_name in r.values and _setting(r.values, field_name) == setting and r.criteria
    }
    out = []
    for value in dict.fromkeys(v for m, v in rows if m == models[0]):
        mine = {m: rows[m, value] for m in models if (m, value) in rows}
        point = Point(value, mine[models[0]].alpha_effective, {m: r.criteria.get(criterion) for m, r in mine.items()})
        if len(mine) == 2:
            point.ratio = _ratio(fits.n_star_ratio, *models, mine[models[0]].setting)
            point.decision = _against(point.ratio, 1.0, FEWER, MORE) if point.ratio else UNDECIDED
        out.append(point)
    return out


def _ratio(ratios: dict, a: str, b: str, key: str) -> Estimate | None:
    """b's N* over a's at a cell setting ``key``, whichever order the summary paired them in."""
    if key in ratios.get(f"{b} / {a}", {}):
        return ratios[f"{b} / {a}"][key]
    if key in ratios.get(f"{a} / {b}", {}):
        r = ratios[f"{a} / {b}"][key]
        inverse = [None if end is None else (1 / end if end else None) for end in reversed(r.ci95 or [])]
        return Estimate(1 / r.value if r.value else None, inverse or None)
    return None


def _difference(fits: CriterionFits, setting: str, models: list[str]) -> Estimate | None:
    """b's exponent minus a's at ``setting``, whichever order the summary took them in."""
    a, b = models
    rest = "" if setting == "all" else f" {setting}"
    if (d := fits.exponent_difference.get(f"{b} - {a}{rest}")) is not None and d.value is not None:
        return Estimate(d.value, d.ci95)
    if (d := fits.exponent_difference.get(f"{a} - {b}{rest}")) is not None and d.value is not None:
        return Estimate(-d.value, [-end for end in reversed(d.ci95)] if d.ci95 else None)
    return None


def _ends(estimate: Estimate) -> tuple[float, float] | None:
    """A CI's ends, an open end (None) infinite; None without a CI."""
    if estimate.ci95 is None:
        return None
    lo, hi = estimate.ci95
    return (float("-inf") if lo is None else lo), (float("inf") if hi is None else hi)


def _against(estimate: Estimate, value: float, below: str, above: str) -> str:
    """``below`` where the CI lies below ``value``, ``above`` where above, else undecided."""
    ends = _ends(estimate)
    if ends is None:
        return UNDECIDED
    return below if ends[1] < value else (above if ends[0] > value else UNDECIDED)


def _against_zero(difference: Estimate, margin: float) -> str:
    """Equal where the CI lies inside (-margin, margin); else larger or smaller where it excludes 0."""
    ends = _ends(difference)
    if ends is None:
        return UNDECIDED
    if -margin < ends[0] and ends[1] < margin:
        return EQUAL
    return _against(difference, 0.0, SMALLER, LARGER)


def sweep_check(primary: Answer, cells: list[dict], other: dict, source: str, name: str) -> Check:
    """A check read from another sweep's recorded summary (Summary.to_dict, ``other``): its own
    primary statements named ``name``, their agreement with ``primary``'s, and how many of its N*
    lie inside the primary's CIs, over the cells both measured at one (B, eta) (``cells``: the
    primary sweep's, as Summary.to_dict holds them)."""
    theirs = Statements.from_dict(other["answer"]["primary"])
    theirs.name = name
    mine = {row["label"]: row for row in cells}
    inside = compared = 0
    for row in other["cells"]:
        here = mine.get(row["label"])
        if here is None or (here["batch_size"], here["lr"]) != (row["batch_size"], row["lr"]):
            continue
        star = (row["criteria"].get(theirs.criterion) or {}).get("n_star")
        ci = (here["criteria"].get(primary.primary.criterion) or {}).get("ci95")
        if star is None or not ci:
            continue
        lo, hi = (float("-inf") if ci[0] is None else ci[0]), (float("inf") if ci[1] is None else ci[1])
        compared += 1
        inside += lo <= star <= hi
    return Check(theirs, source, agreement(primary.primary, theirs), [inside, compared] if compared else None)
