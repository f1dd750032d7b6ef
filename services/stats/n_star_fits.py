"""N* fitted along the family's scaling field, under every success criterion (one pass) and the
headline one: per group the exponent, each later model's exponent minus each earlier one's, the
theorem's shifted form beside the power law, and the paired N* ratio of two models."""

from dataclasses import replace
from functools import partial
from typing import Any

from services.analysis import CRITERIA, Difference, Fit, paired_slope_difference
from services.ratios import paired_n_star_ratio
from services.results import CellResult
from services.spec import Sweep
from services.stats import fitting
from services.stats.base import Statistic
from services.stats.forms import Forms, fit_forms
from services.stats.rows import CriterionFits


def _model_pairs(sweep: Sweep, groups: dict[str, str]) -> list[tuple[str, str]]:
    """Each (earlier, later) pair of the sweep's models (spec order) among ``groups``' models."""
    models = [m for m in sweep.models if m in groups]
    return [(a, b) for i, a in enumerate(models) for b in models[i + 1 :]]


def _by_rest(names) -> dict[str, dict[str, str]]:
    """Names of the form "model rest" (a group or a cell's label) by their rest, then by model."""
    out: dict[str, dict[str, str]] = {}
    for name in names:
        model, _, rest = name.partition(" ")
        out.setdefault(rest, {})[model] = name
    return out


def _differences(sweep: Sweep, inputs: dict[str, tuple], exponent: dict[str, Fit], statistic) -> dict[str, Difference]:
    """Each later model's N* exponent minus each earlier one's (spec order: "cnn - vit"), per value
    of the other axes, with a paired bootstrap CI: their cells share seeds, resampled together."""
    out = {}
    for rest, groups in _by_rest(inputs).items():
        for a, b in _model_pairs(sweep, groups):
            ga, gb = groups[a], groups[b]
            estimate = paired_slope_difference(inputs[ga], inputs[gb], statistic)
            name = f"{b} - {a}" + (f" {rest}" if rest else "")
            cells = exponent[ga].cells + exponent[gb].cells
            out[name] = Difference(estimate.value, estimate.ci95, pair=f"{b} - {a}", cells=cells)
    return out


def _forms(sweep: Sweep, cells: list[CellResult], flagged: set[str], statistic) -> dict[str, Forms]:
    """Per group of cells differing only in the scaling field: the statistic fitted in the theory's
    shifted form and as a power law (services.stats.forms), k fixed at the model's claimed exponent and free."""
    scaling, out = sweep.family.scaling, {}
    for name, members in fitting.groups(cells, flagged, scaling.field).items():
        values = [sweep.family.scaling_value(sweep.resolved_cell(c.cell).data) for c in members]
        theory = sweep.family.theory.get(members[0].cell.model)
        forms = fit_forms(
            values, [c.outcomes() for c in members], statistic, theory and theory.exponent, scaling.inverse
        )
        if forms is not None:
            out[name] = replace(forms, cells=[c.cell.label for c in members])
    return out


def _ratios(sweep: Sweep, cells: list[CellResult], criterion: str) -> dict[str, dict]:
    """Per pair of models ("cnn / vit") and setting both measured: the later model's N* over the
    earlier one's under ``criterion``, with a paired bootstrap CI (they share seeds)."""
    by_label = {c.cell.label: c for c in cells if c.measured() and not c.failures}
    out: dict[str, dict] = {}
    for rest, labels in _by_rest(by_label).items():
        for a, b in _model_pairs(sweep, labels):
            oa, ob = by_label[labels[a]].outcomes(), by_label[labels[b]].outcomes()
            if (defined := oa.as_defined(criterion)) == ob.as_defined(criterion):  # multi-pass: the stable one
                ratio = paired_n_star_ratio(oa, ob, sweep.success_rate, defined)
                out.setdefault(f"{b} / {a}", {})[rest or "all"] = ratio
    return out


def criterion_fits(sweep: Sweep, cells: list[CellResult], flagged: set[str], criterion: str) -> CriterionFits:
    """N* under one criterion fitted along the scaling field: exponents, differences, forms, ratios."""
    axis, statistic = sweep.family.scaling.field, fitting.NStar(sweep.success_rate, criterion)
    exponent = fitting.fits(cells, flagged, axis, partial(fitting.x, sweep), statistic)
    inputs = fitting.fit_inputs(sweep, cells, flagged)
    return CriterionFits(
        exponent,
        _differences(sweep, inputs, exponent, statistic),
        _forms(sweep, cells, flagged, statistic) if sweep.family.scaling.shifted else {},
        _ratios(sweep, cells, criterion),
    )


class NStarFits(Statistic):
    """The N* exponent, its differences between models and its forms, under the headline criterion
    (the summary's exponent, exponent_difference, forms) and, one pass, under each criterion
    (criteria); where the sweep varies its family's scaling field."""

    name, order = "exponent", 0

    def empty(self) -> dict[str, Any]:
        return {"exponent": {}, "exponent_difference": {}, "forms": {}, "n_star_ratio": {}, "criteria": {}}

    def applies(self, sweep: Sweep) -> bool:
        return fitting.scaled(sweep)

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict[str, Any]:
        flagged, one_pass = fitting.flagged(sweep, cells), fitting.one_pass(sweep, cells)
        criteria = {c: criterion_fits(sweep, one_pass, flagged, c) for c in CRITERIA} if one_pass else {}
        headline = (
            criteria[sweep.criterion]
            if len(one_pass) == len(cells)
            else criterion_fits(sweep, cells, flagged, sweep.criterion)
        )
        return {
            "exponent": headline.exponent,
            "exponent_difference": headline.exponent_difference,
            "forms": headline.forms,
            "n_star_ratio": headline.n_star_ratio,
            "criteria": criteria,
        }


STATISTIC = NStarFits()
