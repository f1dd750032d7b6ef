"""The report's fits as text: per fit the exponent with its CI against the theory's claim (only
where every cell meets the theory's premises), the differences and local slopes, the theorem's forms
and the one the data prefer, and every criterion's fits as one table."""

from services.stats.base import fmt
from services.stats.rows import CriterionFits, Summary


def fit_lines(summary: "Summary") -> list[str]:
    lines, x = [], summary.scaling.symbol if summary.scaling else "x"
    t_theory = summary.theory["iterations_exponent"]  # the family's claim for T, if any
    for key, title, theory in (
        ("exponent", f"N* ({summary.criterion}) ~ ({x})^k", summary.theory["exponent"]),
        ("iterations_exponent", f"T ~ ({x})^k", t_theory),
        ("t_star_exponent", f"T* = N*/B ~ ({x})^k", t_theory),
        ("lr_exponent", "T ~ (1/eta)^k", t_theory),
    ):
        unfitted = [group for group, fit in getattr(summary, key).items() if fit.value is None]
        if unfitted:
            lines.append(
                f"{title}: not fitted for {', '.join(unfitted)}: fewer than two cells with a known, positive value"
            )
        for group, fit in getattr(summary, key).items():
            if key == "t_star_exponent" and _one_batch(summary, fit):
                continue  # T* = N*/B at one B restates N*'s exponent
            if fit.value is not None:
                lines.append(
                    f"{title}, {group}: k = {fit.value:.2f}, 95% CI {fmt(fit.ci95, '.2f')}"
                    + _against_theory(summary, _theory(theory, group), fit.cells)
                )
        if key == "exponent":
            lines += _difference_lines(summary) + _local_lines(summary)
    fitted = any(fit.value is not None for fit in summary.exponent.values())
    for model, ref in summary.paper.items():
        if ref["exponent"] is not None and fitted:
            values = [a for a, _ in ref["n_star"]]
            lines.append(
                f"the paper's own Fig 1, {model}: its N* at p = {summary.success_rate} over {summary.scaling.name} "
                f"{min(values):.2f}-{max(values):.2f} only has a log-log slope of {ref['exponent']:.2f} (a line with "
                "a large offset over a narrow range: drawn beside ours, not a measurement to compare one to one)"
            )
    return lines


def fit_table(summary: "Summary") -> tuple[list[str], list[list[str]]]:
    """The N* fits as one table (header, rows): per criterion, the headline's first, each group's
    exponent k with its CI and the form the data prefer (or "undecided", with the held-out advantage
    it rests on), then each paired difference of exponents."""
    criteria = summary.criteria or {
        summary.criterion: CriterionFits(summary.exponent, summary.exponent_difference, summary.forms)
    }
    rows = []
    for criterion in sorted(criteria, key=lambda c: c != summary.criterion):
        fits = criteria[criterion]
        for group, fit in fits.exponent.items():
            forms = fits.forms.get(group)
            form = "-" if forms is None else _preference(forms).removeprefix("the data prefer: ")
            rows.append([criterion, group, f"{fmt(fit.value, '.2f')} {fmt(fit.ci95, '.2f')}", form])
        for name, d in fits.exponent_difference.items():
            rows.append([criterion, name, f"{fmt(d.value, '+.2f')} {fmt(d.ci95, '+.2f')}", "-"])
    x = summary.scaling.symbol if summary.scaling else "x"
    return ["criterion", "group", f"k of N* ~ ({x})^k, or a difference of k [95% CI]", "form"], rows


def form_table(summary: "Summary") -> tuple[list[str], list[list[str]]]:
    """The theorem's forms fitted to N* (services.stats.forms) as one table (header, rows): per
    criterion, the headline's first, per group each form's k and c with their CIs, its log-rms and
    its held-out error (of log N* at each value held out in turn); which form the data prefer is
    the fits table's."""
    criteria = {summary.criterion: summary.forms} | {c: summary.criteria[c].forms for c in other_criteria(summary)}
    rows = [
        [criterion, group, f.form]
        + [f"{fmt(f.k.value, '.2f')} {fmt(f.k.ci95, '.2f')}", f"{fmt(f.c.value, '.3f')} {fmt(f.c.ci95, '.3f')}"]
        + [fmt(f.rms, ".3f"), fmt(f.held_out, ".3f")]
        for criterion, groups in criteria.items()
        for group, forms in groups.items()
        for f in forms.fits
    ]
    name = summary.scaling.name if summary.scaling else "x"
    header = ["criterion", "group", f"form: N* = K ({name} - c)^-k", "k [95% CI]", "c [95% CI]", "log-rms", "held out"]
    return header, rows


def _preference(forms) -> str:
    """Which form the data prefer: only where the held-out advantage's CI lies above 0."""
    if forms.preferred is None:
        return "the data prefer: - (too few cells to hold one out)"
    if forms.advantage is None:
        return f"the smallest held-out error: {forms.preferred} (one form judged)"
    advantage = f"{forms.advantage.value:.3f} {fmt(forms.advantage.ci95, '.3f')}"
    if forms.decided:
        return f"the data prefer: {forms.preferred} (held out better than {forms.runner_up} by {advantage})"
    return f"undecided: {forms.preferred} leads {forms.runner_up} by {advantage}, a CI that reaches 0"


def _one_batch(summary: "Summary", fit: dict) -> bool:
    """Whether every cell of a fit trained at one batch size."""
    return len({r.batch_size for r in summary.cells if r.label in fit.cells}) <= 1


def _theory(theory, group: str) -> str:
    """What a fitted exponent can be compared with: a model's claim (its family's theory), T's 1, or nothing."""
    if isinstance(theory, dict):
        bound = theory.get(group.split()[0])
        return f" ({bound})" if bound else ""
    return "" if theory is None else f" (theory: {theory:g})"


def _against_theory(summary: "Summary", words: str, cells: list[str]) -> str:
    """The claim (``words``) a fit is compared with, only where every cell it uses meets the theory's
    premises; elsewhere which premises fail, in how many of those cells."""
    failing: dict[str, int] = {}
    for row in summary.cells:
        if row.label in cells:
            for premise in row.violated:
                failing[premise.name] = failing.get(premise.name, 0) + 1
    if not words or not failing:
        return words
    broken = ", ".join(f"{name} in {count} of {len(cells)} cells" for name, count in failing.items())
    return f" (not compared with the theory: its premises fail here: {broken})"


def _difference_lines(summary: "Summary") -> list[str]:
    claims = summary.experiment.difference_claims
    lines = []
    for name, d in summary.exponent_difference.items():
        claim = claims.get(d.pair)
        lines.append(
            f"N* exponent difference, {name}: {fmt(d.value, '+.2f')}, 95% CI {fmt(d.ci95, '+.2f')} (paired "
            "bootstrap: the cells' shared seeds resampled together)"
            + _against_theory(summary, f" ({claim})" if claim else "", d.cells)
        )
    return lines


def _local_lines(summary: "Summary") -> list[str]:
    lines = []
    for group, slopes in summary.local_exponent.items():
        name = summary.scaling.name
        parts = [f"{s.between[0]:g}->{s.between[1]:g}: {fmt(s.value, '.2f')} {fmt(s.ci95, '.2f')}" for s in slopes]
        lines.append(f"local exponent of N* between neighbouring {name}, {group}: " + "; ".join(parts))
    return lines


def other_criteria(summary: "Summary") -> list[str]:
    """The success criteria the summary gives beside its headline's (one pass: two; multi-pass: none)."""
    return [c for c in summary.criteria if c != summary.criterion]
