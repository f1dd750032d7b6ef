"""The verdict: what a sweep's answer is only where every success criterion (services.analysis.CRITERIA)
and every setting it measured (the other axes: Paper A's two readings of alpha*, counts binomial and
fixed) agree, each read with its CI; elsewhere "depends", with every value.

Three claims per sweep: whose N* exponent is larger (each pair of models: the paired difference of
exponents), which model needs more samples (the paired ratio of N*, per value of the scaling field), and which
functional form the data prefer per model (decided only where the held-out advantage's CI lies
above 0). A claim holds where every condition is decided the same way; an undecided condition (a
CI that covers 0, or 1 for a ratio) or two that disagree make it depend. No I/O, no fitting: it
reads the summary's fits."""

from services.analysis import Estimate
from services.stats.rows import CriterionFits, Finding, Summary

UNDECIDED = 0


def verdict(summary: Summary) -> list[Finding]:
    """The verdict's findings of a summary whose cells define the three criteria (one pass); [] else."""
    if not summary.criteria:
        return []
    field = summary.scaling.field if summary.scaling else None
    return [*_exponent_findings(summary.criteria), *_ratio_findings(summary.criteria, field), *_form_findings(summary)]


def condition(criterion: str, setting: str) -> str:
    """A condition's name: the criterion, then the setting it was read at ("stable counts=fixed")."""
    return criterion if setting in ("", "all") else f"{criterion} {setting}"


def _sign(estimate: Estimate, null: float) -> int | None:
    """+1 where the CI lies above ``null``, -1 below, 0 where it covers it, None where not estimated."""
    if estimate.ci95 is None:
        return None if estimate.value is None else UNDECIDED
    lo, hi = (float("inf") if end is None else end for end in estimate.ci95)
    return 1 if lo > null else (-1 if hi < null else UNDECIDED)


def _finding(claim: str, signs: dict[str, int | None], values: dict[str, str], words: dict[int, str]) -> Finding:
    """A claim decided by the sign of each condition: it holds where every condition has one and the
    same decided sign; else it depends, with the conditions grouped by what each says."""
    decided = {s for s in signs.values()}
    if len(decided) == 1 and (sign := decided.pop()) not in (None, UNDECIDED):
        return Finding(claim, True, f"{words[sign]} under every criterion and setting measured", values)
    groups: dict[str, list[str]] = {}
    for name, sign in signs.items():
        groups.setdefault(words.get(sign, "not estimated"), []).append(name)
    parts = "; ".join(f"{what}: {', '.join(names)}" for what, names in groups.items())
    return Finding(claim, False, f"depends on the criterion or setting ({parts})", values)


def _exponent_findings(criteria: dict[str, CriterionFits]) -> list[Finding]:
    """Per pair of models: is the later model's N* exponent larger than the earlier one's?"""
    pairs: dict[str, dict[str, Estimate]] = {}
    for criterion, fits in criteria.items():
        for name, d in fits.exponent_difference.items():
            pairs.setdefault(d.pair, {})[condition(criterion, name[len(d.pair) :].strip())] = d
    out = []
    for pair, estimates in pairs.items():
        b, a = pair.split(" - ")
        words = {
            1: f"{b}'s N* exponent is larger than {a}'s",
            -1: f"{b}'s N* exponent is smaller than {a}'s",
            UNDECIDED: "undecided (the CI covers 0)",
        }
        signs = {name: _sign(d, 0.0) for name, d in estimates.items()}
        values = {name: _estimate_text(d, "+.2f") for name, d in estimates.items()}
        out.append(_finding(f"exponent {pair}", signs, values, words))
    return out


def _ratio_findings(criteria: dict[str, CriterionFits], field: str | None) -> list[Finding]:
    """Per pair of models and value of the scaling ``field`` (Paper A: alpha*): does the later model
    need more samples than the earlier one, under every criterion and the other axes' values?"""
    claims: dict[tuple[str, str], dict[str, Estimate]] = {}
    for criterion, fits in criteria.items():
        for pair, by_setting in fits.n_star_ratio.items():
            for setting, ratio in by_setting.items():
                words = setting.split()
                at = next((w for w in words if field and w.startswith(f"{field}=")), "")
                rest = " ".join(w for w in words if w != at)
                claims.setdefault((pair, at), {})[condition(criterion, rest)] = ratio
    out = []
    for (pair, at), estimates in claims.items():
        b, a = pair.split(" / ")
        words = {1: f"{b} needs more samples than {a}", -1: f"{b} needs fewer samples than {a}"}
        words[UNDECIDED] = "undecided (the CI covers 1)"
        signs = {name: _sign(r, 1.0) for name, r in estimates.items()}
        values = {name: _estimate_text(r, ".2f") for name, r in estimates.items()}
        out.append(_finding(f"N* ratio {pair}" + (f" at {at}" if at else ""), signs, values, words))
    return out


def _form_findings(summary: Summary) -> list[Finding]:
    """Per model: the form its N* prefers, where every criterion and setting decides the same one."""
    models: dict[str, dict[str, object]] = {}
    for criterion, fits in summary.criteria.items():
        for group, forms in fits.forms.items():
            model, _, rest = group.partition(" ")
            models.setdefault(model, {})[condition(criterion, rest)] = forms
    out = []
    for model, by_condition in models.items():
        chosen = {name: forms.verdict for name, forms in by_condition.items()}
        values = {name: _form_text(forms) for name, forms in by_condition.items()}
        kinds = set(chosen.values())
        if len(kinds) == 1 and (form := kinds.pop()) != "undecided":
            statement = f"{model}'s N* prefers {form} under every criterion and setting measured"
            out.append(Finding(f"form {model}", True, statement, values))
            continue
        groups: dict[str, list[str]] = {}
        for name, form in chosen.items():
            groups.setdefault(form, []).append(name)
        parts = "; ".join(f"{form}: {', '.join(names)}" for form, names in groups.items())
        out.append(Finding(f"form {model}", False, f"depends on the criterion or setting ({parts})", values))
    return out


def _estimate_text(estimate: Estimate, spec: str) -> str:
    """A value with its CI ("+0.41 [+0.12, +0.70]"); an open CI end (infinite) as inf."""
    value = "-" if estimate.value is None else format(estimate.value, spec)
    if estimate.ci95 is None:
        return value
    lo, hi = ("inf" if end is None else format(end, spec) for end in estimate.ci95)
    return f"{value} [{lo}, {hi}]"


def _form_text(forms) -> str:
    """A group's form verdict with the held-out advantage it rests on."""
    if forms.advantage is None:
        return f"{forms.verdict} (too few cells to compare held-out errors)"
    lead = forms.preferred if forms.decided else f"undecided: {forms.preferred}"
    return f"{lead} over {forms.runner_up} by {_estimate_text(forms.advantage, '.3f')} in held-out log N*"
