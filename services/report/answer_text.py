"""A sweep's answer as a person reads it first (services.stats.answer): the question, the primary,
one table (per value of the scaling field: each model's N* with its CI and their ratio), the three
statements, and the checks' agreement claim by claim. `vitsweep run` ends with it and `vitsweep
report` (text, Markdown, HTML) opens with it; the details follow in the report's sections."""

from dataclasses import dataclass

from services.report.views import TableView
from services.stats.base import fmt
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
    Point,
    Statements,
)
from vit_core.family import Family

CRITERION_WORDS = {
    "iterate": "the model after T = N/B steps has zero test error (Theorem 1's iterate)",
    "first_zero": "zero test error reached at N or before",
    "stable": "zero test error from N on, over the stability window",
}


@dataclass(frozen=True)
class Screen:
    """The opening of a report: lines, the N* table, the statements, the checks' table and notes, and
    where the sweep maps regimes (answer.regimes), the regime map's table."""

    lines: list[str]
    table: TableView | None
    statements: list[str]
    checks: TableView | None
    notes: list[str]
    regimes: TableView | None = None

    def blocks(self) -> list[tuple[TableView | None, list[str]]]:
        """(table, the lines after it) in the order a report shows them."""
        return [(self.table, self.statements), (self.regimes, []), (self.checks, self.notes)]


def screen(
    answer: Answer, family: Family, sweep_checks: list[Check] | None = None, missing=(), sweep_id: str = ""
) -> Screen:
    """The answer's opening screen (of sweep ``sweep_id``), with the checks from other sweeps
    (``sweep_checks``) beside those from the same runs, and a row for each named check not read
    (``missing``: (name, why))."""
    p = answer.primary
    tests = "each with its own test set" if answer.test_sets > 1 else "one test set"
    lines = [
        f"Question: {family.question or _generic_question(family, p)}",
        f"Primary (named in the spec before the data): {p.setting}; success: "
        f"{CRITERION_WORDS.get(p.criterion, p.criterion)}; {answer.seeds} seeds, {_seed_span(answer)} ({tests} of "
        f"{answer.n_test:,}); "
        f"N* = the smallest N where the share of seeds succeeding reaches {answer.p:g}.",
    ]
    checks = [*answer.checks, *(sweep_checks or [])]
    return Screen(
        lines,
        _n_star_table(p, family) if p.points else None,
        statement_lines(answer, family),
        _checks_table(answer, checks, list(missing), family) if checks or missing else None,
        [*_verdict(answer, checks), *_grid_ends(p, family), *_compare_line(sweep_checks or [], sweep_id)],
        regime_table(answer, family) if answer.regimes else None,
    )


def _compare_line(checks: list[Check], sweep_id: str) -> list[str]:
    """How to read a check from another sweep side by side with this one, cell by cell."""
    if not checks or not sweep_id:
        return []
    return [f"a check cell by cell: vitsweep compare {sweep_id} {checks[0].source} (and so for each check's sweep)"]


def _seed_span(answer: Answer) -> str:
    """The measurement seeds for people ("0-15"; a replication's "100-115")."""
    last = answer.first_seed + answer.seeds - 1
    return f"{answer.first_seed}-{last}" if answer.seeds > 1 else str(answer.first_seed)


def _generic_question(family: Family, p: Statements) -> str:
    scaling = family.scaling
    return f"how does N* grow with {scaling.symbol} for {' and '.join(map(family.name_of, p.models))}?"


def _n(row) -> str:
    """A model's N* with its CI ("1,280 [1,056, 1,408]"); "> N" above the grid, "<= N" at its first N."""
    if row is None:
        return "-"
    if row.n_star is None:
        return f"> {row.bracket_lo:,}" if row.bracket_lo else "-"
    star = ("" if row.known else "<= ") + f"{row.n_star:,}"
    ends = ", ".join("-" if end is None else f"{end:,}" for end in row.ci95 or [])
    return f"{star} [{ends}]" if ends else star


def _estimate(value, ci95, spec: str) -> str:
    """A value with its CI ("2.15 [1.94, 2.87]"); an open end as inf."""
    ends = ", ".join("inf" if end is None else format(end, spec) for end in ci95 or [])
    return fmt(value, spec) + (f" [{ends}]" if ends else "")


def _value(r: Point) -> str:
    """The scaling value, and the effective one where it differs ("0.05 (0.059)")."""
    if r.effective is None or abs(r.effective - r.value) < 5e-4:
        return f"{r.value:g}"
    return f"{r.value:g} ({r.effective:.3f})"


def _n_star_table(p: Statements, family: Family) -> TableView:
    names = [family.name_of(m) for m in p.models]
    label = family.scaling.name + (" (effective)" if any(r.effective != r.value for r in p.points) else "")
    two = len(p.models) == 2
    rows = [[_value(r), *(_n(r.n_star.get(m)) for m in p.models), *([_ratio_text(r)] if two else [])] for r in p.points]
    header = [label, *(f"{n} N* [95% CI]" for n in names), *([f"{names[1]} / {names[0]} [95% CI]"] if two else [])]
    return TableView(f"N* per {family.scaling.name} ({p.setting}, {p.criterion})", header, rows, [label])


def _ratio_text(r: Point) -> str:
    return "-" if r.ratio is None else _estimate(r.ratio.value, r.ratio.ci95, ".2f")


def statement_lines(answer: Answer, family: Family, p: Statements | None = None) -> list[str]:
    """The three statements of a reading (the primary by default), each with its CI."""
    p = p or answer.primary
    name, scaling = family.name_of, family.scaling
    out = []
    if p.ratios:
        out.append(f"(a) {_ratio_statement(p, family)}")
    ks = "; ".join(f"{name(m)} {_estimate(e.value, e.ci95, '.2f')}" for m, e in p.exponents.items())
    if ks:
        line = f"(b) Exponents k of N* ~ ({scaling.symbol})^k: {ks}"
        if p.difference is not None:
            a, b = (name(m) for m in p.models)
            line += (
                f"; {b} - {a} {_estimate(p.difference.value, p.difference.ci95, '+.2f')}: "
                f"{_zero_words(p.against_zero, answer.margin, a, b)}"
            )
            if answer.excess is not None:
                source = family.theory[p.models[1]].source or "the theory"
                line += f"; {source}'s excess of {answer.excess:+g} {_excess_words(p.against_excess)}"
        out.append(line + ".")
    if p.unfitted:
        out.append(
            f"(b) Not fitted for {', '.join(map(name, p.unfitted))}: fewer than two values of {scaling.name} with N* "
            "known (an N* at an end of the N grid is only bounded; see below)."
        )
    lead = p.models[0]
    if lead in p.exponents and answer.bound is not None:
        e = p.exponents[lead]
        source = family.theory[lead].source or "its theory"
        words = _bound_words(p.bound, answer.bound, source)
        out.append(f"(c) The {name(lead)}'s exponent {_estimate(e.value, e.ci95, '.2f')} {words}")
    return out


def _ratio_statement(p: Statements, family: Family) -> str:
    a, b = (family.name_of(m) for m in p.models)
    decided = {d: [r for r in p.ratios if r.decision == d] for d in (MORE, FEWER, UNDECIDED)}
    values = [r.ratio.value for r in p.ratios if r.ratio.value is not None]
    span = f"ratios {min(values):.2f}-{max(values):.2f}" if values else "no ratio"
    n, at = len(p.ratios), family.scaling.name
    if len(decided[MORE]) == n:
        return f"The {b} needs more samples than the {a} at every {at} measured ({n}): {span}, each CI above 1."
    if len(decided[FEWER]) == n:
        return f"The {b} needs fewer samples than the {a} at every {at} measured ({n}): {span}, each CI below 1."
    parts = [
        f"{word} at {', '.join(f'{r.value:g}' for r in rows)}"
        for word, rows in (
            (f"the {b} needs more than the {a}", decided[MORE]),
            (f"the {b} needs fewer than the {a}", decided[FEWER]),
            ("undecided (the CI holds 1)", decided[UNDECIDED]),
        )
        if rows
    ]
    return "; ".join(parts) + f" ({span})."


def _zero_words(decision: str, margin: float, a: str, b: str) -> str:
    return {
        EQUAL: f"equal within +-{margin:g} (the CI lies inside)",
        LARGER: f"{b}'s larger (the CI lies above 0, not inside +-{margin:g})",
        SMALLER: f"{b}'s smaller (the CI lies below 0, not inside +-{margin:g})",
    }.get(decision, f"undecided (the CI holds 0 and reaches past +-{margin:g})")


def _excess_words(decision: str) -> str:
    return {
        EXCLUDED: "excluded (the CI lies below it)",
        REACHED: "reached (the CI lies above it)",
    }.get(decision, "undecided (the CI holds it)")


def _bound_words(decision: str, bound: float, source: str) -> str:
    if decision == BELOW:
        return (
            f"lies below {source}'s {bound:g}: consistent with it (a sufficient bound: a smaller exponent does not "
            "contradict it)."
        )
    if decision == ABOVE:
        return f"lies above {source}'s {bound:g}: more samples than its bound's rate, where its premises hold."
    return f"is undecided against {source}'s {bound:g} (the CI holds it)."


CLAIM_WORDS = {  # a claim's column in the checks' table, by what the primary decided
    "difference against 0": "(b) {b} - {a} vs 0",
    "difference against excess": "(b) vs {excess:+g}",
    "bound": "(c) {a} vs {bound:g}",
}


def _checks_table(answer: Answer, checks: list[Check], missing: list[tuple[str, str]], family: Family) -> TableView:
    """Per check: where it comes from and, per claim of the primary, its agreement; (a) summed over
    the values of the scaling field ("7 of 7 agree"); a named check not read, a row saying why."""
    p = answer.primary
    a, b = (family.name_of(m) for m in (p.models + p.models)[:2])
    decisions = p.decisions()
    claims = [c for c in CLAIM_WORDS if c in decisions]
    first = f"(a) {b} / {a}: {_short(_ratio_majority(p))}" if p.ratios else None
    header = ["check", "from", *([first] if first else [])]
    header += [
        CLAIM_WORDS[c].format(a=a, b=b, excess=answer.excess or 0, bound=answer.bound or 0)
        + f": {_short(decisions[c])}"
        for c in claims
    ]
    rows = []
    for check in checks:
        row = [check.statements.name, check.source]
        if first:
            row.append(_ratio_agreement(check))
        row += [check.agreement.get(c, NOT_MEASURED) for c in claims]
        if check.inside_ci:
            row[1] += f" ({check.inside_ci[0]} of {check.inside_ci[1]} N* in the primary's CIs)"
        rows.append(row)
    rows += [[name, why, *["-"] * (len(header) - 2)] for name, why in missing]
    return TableView(
        "checks: each reads the three statements again; its agreement with the primary", header, rows, ["check", "from"]
    )


def _short(decision: str) -> str:
    return {MORE: "more", FEWER: "fewer", EQUAL: "equal", EXCLUDED: "excluded", REACHED: "reached"}.get(
        decision, decision
    )


def _ratio_majority(p: Statements) -> str:
    decisions = [r.decision for r in p.ratios]
    return max(set(decisions), key=decisions.count) if decisions else UNDECIDED


def _ratio_agreement(check: Check) -> str:
    """(a)'s agreement over the scaling values: "7 of 7 agree", with the undecided and differing ones."""
    mine = {k: v for k, v in check.agreement.items() if k.startswith("ratio at ")}
    if not mine:
        return "-"
    counts = {
        w: [k.removeprefix("ratio at ") for k, v in mine.items() if v == w]
        for w in (AGREES, UNDECIDED, DIFFERS, NOT_MEASURED)
    }
    text = f"{len(counts[AGREES])} of {len(mine)} agree"
    for word in (UNDECIDED, DIFFERS, NOT_MEASURED):
        if counts[word]:
            text += f"; {word} at {', '.join(counts[word])}"
    return text


def _verdict(answer: Answer, checks: list[Check]) -> list[str]:
    """Claim by claim, which checks agree: one line naming the claims every check agrees on, then
    one per claim some check leaves undecided or decides otherwise."""
    if not checks:
        return []
    p = answer.primary
    claims = {"(a)": [k for k in p.decisions() if k.startswith("ratio at ")]} if p.ratios else {}
    claims |= {
        label: [c]
        for c, label in (
            ("difference against 0", "(b) vs 0"),
            ("difference against excess", f"(b) vs {answer.excess or 0:+g}"),
            ("bound", "(c)"),
        )
        if c in p.decisions()
    }
    clean, lines = [], []
    for label, keys in claims.items():
        split = {}
        for check in checks:
            words = {check.agreement.get(k, NOT_MEASURED) for k in keys}
            worst = next((w for w in (DIFFERS, UNDECIDED, NOT_MEASURED) if w in words), AGREES)
            split.setdefault(worst, []).append(check.statements.name)
        if set(split) == {AGREES}:
            clean.append(label)
        else:
            lines.append(f"verdict, {label}: " + "; ".join(f"{w}: {', '.join(names)}" for w, names in split.items()))
    head = (
        f"verdict: every check agrees on {', '.join(clean)}" if clean else "verdict: no claim is agreed by every check"
    )
    return [head, *lines]


def _grid_ends(p: Statements, family: Family) -> list[str]:
    """The primary's cells whose N* sits at an end of the N grid, and what to change."""
    rows = [(f"{family.name_of(m)} at {r.value:g}", row) for r in p.points for m, row in r.n_star.items() if row]
    above = [name for name, row in rows if row.n_star is None]
    return grid_end_lines(above, [name for name, row in rows if row.n_star is not None and not row.known])


def grid_end_lines(above: list[str], below: list[str]) -> list[str]:
    """A line for the cells whose N* lies above the largest N evaluated, and one for those at the
    first: each only bounded there (left out of the fits), and what to change to place it."""
    lines = []
    if above:
        lines.append(
            f"N* above the largest N evaluated, only bounded: {', '.join(above)}; to place it, extend the grid "
            "(one pass: training.max_steps, or its scaling rule's power; multi-pass: n_train, or search.mode: "
            "sample_complexity)"
        )
    if below:
        lines.append(
            f"N* at the first N evaluated, only bounded: {', '.join(below)}; to place it, evaluate earlier (one "
            "pass: a smaller training.batch_size or eval_every; multi-pass: smaller n_train)"
        )
    return lines


def readings_table(answer: Answer, family: Family) -> TableView:
    """The three statements under the primary and under each check from the same runs, one row each."""
    p = answer.primary
    name = family.name_of
    a, b = (name(m) for m in (p.models + p.models)[:2])
    header = ["reading", "setting", "criterion"]
    header += [f"(a) {b} / {a}"] if p.ratios else []
    header += [f"(b) k {name(m)}" for m in p.models]
    header += [f"(b) {b} - {a}", "vs 0", f"vs {answer.excess:+g}" if answer.excess is not None else "vs excess"]
    header += [f"(c) {a} vs {answer.bound:g}" if answer.bound is not None else "(c)"]
    rows = []
    for s in [p, *(c.statements for c in answer.checks)]:
        row = [s.name, s.setting, s.criterion]
        if p.ratios:
            row.append(_ratio_summary(s))
        row += [_estimate(e.value, e.ci95, ".2f") if (e := s.exponents.get(m)) else "-" for m in p.models]
        d = s.difference
        row += [_estimate(d.value, d.ci95, "+.2f") if d else "-", s.against_zero, s.against_excess, s.bound]
        rows.append(row)
    return TableView(
        "the three statements under the primary and each check from the same runs",
        header,
        rows,
        ["reading", "setting", "criterion"],
    )


def _ratio_summary(s: Statements) -> str:
    """(a) of one reading in a cell: how many values decide each way, and the ratios' range."""
    counts = {d: sum(r.decision == d for r in s.ratios) for d in (MORE, FEWER, UNDECIDED)}
    values = [r.ratio.value for r in s.ratios if r.ratio.value is not None]
    parts = [f"{k} of {len(s.ratios)} {d}" for d, k in counts.items() if k]
    return ", ".join(parts) + (f" ({min(values):.2f}-{max(values):.2f})" if values else "")


def regime_table(answer: Answer, family: Family) -> TableView:
    """The regime map as a table: per regime its premises, the ratio at the smallest value of the
    scaling field, each model's exponent, their difference against 0 and the excess, the favoured
    model's against its bound."""
    p = answer.primary
    name = family.name_of
    a, b = (name(m) for m in (p.models + p.models)[:2])
    axes = list(answer.regimes[0].values)
    low = min((point.value for point in p.points), default=None)
    header = [*axes, "premises", f"(a) {b} / {a} at {family.scaling.name} = {fmt(low, 'g')}"]
    excess = "vs excess" if answer.excess is None else f"vs {answer.excess:+g}"
    header += [f"k {name(m)}" for m in p.models] + [f"(b) {b} - {a}", "vs 0", excess, f"(c) {a}"]
    rows = []
    for regime in answer.regimes:
        s = regime.statements
        at = next((point for point in s.points if point.value == low), None)
        premises = "met" if not regime.violated else "fail: " + ", ".join(regime.violated)
        row = [*(str(regime.values[x]) for x in axes), premises, _ratio_text(at) if at else "-"]
        row += [_estimate(e.value, e.ci95, ".2f") if (e := s.exponents.get(m)) else "-" for m in p.models]
        d = s.difference
        row += [_estimate(d.value, d.ci95, "+.2f") if d else "-", s.against_zero, s.against_excess, s.bound]
        rows.append(row)
    return TableView("regime map: the three statements in each regime", header, rows, [*axes, "premises"])
