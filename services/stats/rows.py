"""What a sweep's summary holds: a row per cell (its N*, bracket, CI, T, tuning, window, premises)
and the fits, with the registered statistics' entries beside them (services.stats). No I/O."""

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from services.analysis import Difference, Estimate, Fit, LocalSlope
from services.stats.forms import Forms
from vit_core.family import Family, Premise, Scaling, families

CONFIDENCE = 0.95


def error_bound(n_test: int) -> float:
    """The one-sided 95% upper bound on a model's error rate when it makes 0 errors on n_test
    independent test samples: 1 - 0.05^(1/n), about 3/n (the rule of three)."""
    return 1 - (1 - CONFIDENCE) ** (1 / n_test)


@dataclass
class TuningRow:
    """A tuned cell: the setting chosen on the selection seeds, each setting's N* there, whether
    the choice sits at an edge of what was tried, and which seeds chose and which measured."""

    chosen: dict[str, float]  # batch_size, lr of the setting N* was measured at
    selection: list[dict]  # per setting tried: batch_size, lr, n_star (None: not known; then n_star_above, the
    # bound its runs' cap gives: N* > cap / W), seeds, without_stable
    at_edge: list[str]  # edges of the values tried the chosen setting sits at ([]: inside)
    selection_seeds: list[int]
    measurement_seeds: list[int]

    @property
    def selection_n_star(self) -> int | None:
        """The chosen setting's N* on the selection seeds."""
        chosen = (self.chosen["batch_size"], self.chosen["lr"])
        return next((s["n_star"] for s in self.selection if (s["batch_size"], s["lr"]) == chosen), None)


@dataclass
class WindowRow:
    """The stability window a one-pass cell's measured runs were checked over."""

    stability_window: float  # W: each run followed to W times its own stable N
    cap: int  # the runs' cap, in samples (B x their step budget)
    checked: float | None  # the smallest (last N evaluated / stable N) over the runs confirmed (>= W)
    censored: int  # runs stopped by the cap before their window closed: no stable N
    runs: int


@dataclass
class FloorRow:
    """The plug-in rule's N on a cell's data (Family.information_floor; one rule's count, an upper
    bound on what the data need, not a floor): the N from which a
    plug-in rule fitted on the seeds' first N training samples keeps zero test error on a share p
    of them, with its bootstrap CI, and the largest N tried."""

    n_star: int | None  # None: not reached by n_max
    ci95: list[int | None]
    n_max: int
    both_labels: int | None = None  # seeds whose first N* samples (the cell's SGD N*) hold both labels
    seeds: int = 0


@dataclass
class SamplesRow:
    """A cell's samples one by one, where the theory speaks of averages: its test sets' vote margins
    (Family.vote_margins: how many of a test set's samples sit at margin 1, 2, 3, 4 and above, the
    mean over its test sets, one shared or each seed's own; near ties decide zero test error) and
    the share of its training and test samples meeting each per-sample premise
    (Family.sample_premises; training: each seed's first ``train_samples``)."""

    test_sets: int
    n_test: int
    margins: dict[str, float]  # "1" .. "4", ">=5" -> mean samples per test set
    smallest: int  # the smallest margin of any test set
    train_samples: int
    train_share: dict[str, float] = field(default_factory=dict)  # premise -> share of training samples meeting it
    test_share: dict[str, float] = field(default_factory=dict)  # premise -> share of test samples meeting it


@dataclass
class LostRow:
    """One-pass seeds that reached zero test error and did not keep it (no stable N by their cap),
    with what tells the causes apart: the test error after their first zero (a few samples flipping
    under SGD's noise, or a collapse), the attention mass then and at the end (the ViT's), and how
    many end at zero error, a zero run the cap cut before its window closed."""

    seeds: int  # seeds lost
    worst_error: float  # the median over them of the largest test error after their first zero
    nonzero_share: float  # the median share of their evaluations after the first zero with an error
    ended_at_zero: int  # of them, those whose last evaluation had zero error (the window, not the error)
    mass_at_first_zero: float | None  # median attention mass at the first zero (None: no attention)
    mass_at_end: float | None


@dataclass
class CriterionRow:
    """A cell's N* under one success criterion (services.analysis.CRITERIA), with its bootstrap CI
    over seeds and the largest N below it that misses p."""

    n_star: int | None  # None: not reached by the largest N (or the cell failed)
    known: bool  # False where N* is only bounded (reached at the smallest N tried)
    ci95: list[int | None]
    bracket_lo: int | None


@dataclass
class CriterionFits:
    """The fits of N* under one success criterion: its exponent per group, each later model's
    exponent minus each earlier one's, the theorem's forms, and per setting the paired ratio of
    two models' N* (pair "cnn / vit" -> setting -> ratio with its CI)."""

    exponent: dict[str, Fit] = field(default_factory=dict)
    exponent_difference: dict[str, Difference] = field(default_factory=dict)
    forms: dict[str, Forms] = field(default_factory=dict)
    n_star_ratio: dict[str, dict[str, Estimate]] = field(default_factory=dict)


# The answer (services.stats.answer computes it): what each statement decides, read from a 95% CI
MORE, FEWER, UNDECIDED = "more", "fewer", "undecided"  # (a)
EQUAL, LARGER, SMALLER = "equal", "larger", "smaller"  # (b) against 0
EXCLUDED, REACHED = "excluded", "reached"  # (b) against the theory's excess
BELOW, ABOVE = "below", "above"  # (c)
AGREES, DIFFERS, NOT_MEASURED = "agrees", "differs", "not measured"  # a check's claim against the primary's


@dataclass
class Point:
    """One value of the scaling field at a reading: each model's N* under its criterion
    (CriterionRow: value, CI, whether it is known) and, for two models, statement (a): the other
    model's N* over the favoured one's, paired over their shared seeds (None: not both measured)."""

    value: float  # the scaling field's value as the spec gives it (Paper A: alpha*)
    effective: float | None  # the value its samples have (Paper A: alpha*_eff)
    n_star: dict[str, CriterionRow | None]  # None: the model's cell does not define the criterion (multi-pass)
    ratio: Estimate | None = None
    decision: str = UNDECIDED


@dataclass
class Statements:
    """The three statements under one reading of a sweep: a setting (the axis values other than the
    scaling field, "all" where there are none) and a success criterion."""

    name: str  # "primary", or what the check changes ("counts=fixed", "first_zero")
    setting: str
    criterion: str
    models: list[str]  # [the favoured model, the other] (Paper A: [vit, cnn]); one where the sweep has one
    points: list[Point] = field(default_factory=list)  # N* per value of the scaling field, with (a)
    exponents: dict[str, Estimate] = field(default_factory=dict)  # (b) model -> k of N* ~ x^k
    difference: Estimate | None = None  # (b) the other's k minus the favoured one's
    against_zero: str = UNDECIDED  # (b) equal (within the margin), larger, smaller, undecided
    against_excess: str = UNDECIDED  # (b) excluded, reached, undecided
    bound: str = UNDECIDED  # (c) the favoured model's k: below, above, undecided
    unfitted: list[str] = field(default_factory=list)  # models whose exponent has no value (< 2 cells with N* known)

    @property
    def ratios(self) -> list[Point]:
        """The points with statement (a): both models measured there."""
        return [p for p in self.points if p.ratio is not None]

    def decisions(self) -> dict[str, str]:
        """Each claim this reading decides (or leaves undecided), by a name shared across readings
        and sweeps: "ratio at 0.05", "difference against 0", "difference against excess", "bound"."""
        out = {f"ratio at {r.value:g}": r.decision for r in self.ratios}
        if self.difference is not None:
            out |= {"difference against 0": self.against_zero, "difference against excess": self.against_excess}
        return out | ({"bound": self.bound} if self.models[0] in self.exponents else {})

    @classmethod
    def from_dict(cls, raw: dict) -> "Statements":
        points = [
            Point(
                r["value"],
                r["effective"],
                {m: None if row is None else CriterionRow(**row) for m, row in r["n_star"].items()},
                None if r["ratio"] is None else Estimate(**r["ratio"]),
                r["decision"],
            )
            for r in raw["points"]
        ]
        exponents = {m: Estimate(e["value"], e["ci95"]) for m, e in raw["exponents"].items()}
        difference = None if raw["difference"] is None else Estimate(**raw["difference"])
        rest = {f.name: raw[f.name] for f in fields(cls) if f.name not in ("points", "exponents", "difference")}
        return cls(**rest, points=points, exponents=exponents, difference=difference)


@dataclass
class Check:
    """One check of the primary: its statements, where they come from ("same runs", or a check
    sweep's id) and, claim by claim, whether it agrees (the same decision), differs (another
    decided one), is undecided where the primary decided, or did not measure the claim. A check
    sweep of the same cells also gives how many of its N* lie inside the primary's CIs."""

    statements: Statements
    source: str
    agreement: dict[str, str]
    inside_ci: list[int] | None = None  # [cells whose N* lies inside the primary's 95% CI, cells compared]

    @classmethod
    def from_dict(cls, raw: dict) -> "Check":
        return cls(Statements.from_dict(raw["statements"]), raw["source"], raw["agreement"], raw.get("inside_ci"))


@dataclass
class Regime:
    """One data regime of a regime map (answer.regimes): its axis values, the three statements read
    there (the primary's criterion, the other axes at the primary's values) and the theory's premises
    that some cell of it violates (none: every premise met in every cell)."""

    values: dict[str, Any]
    statements: Statements
    violated: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items())

    @classmethod
    def from_dict(cls, raw: dict) -> "Regime":
        return cls(raw["values"], Statements.from_dict(raw["statements"]), raw["violated"])


@dataclass
class Answer:
    """A sweep's three statements at its primary, their checks from the same runs, and what they are
    read against: the equivalence margin, the theory's excess of the other model's exponent over the
    favoured one's and the favoured model's bound (None where the family's theory gives none)."""

    primary: Statements
    margin: float
    excess: float | None
    bound: float | None
    checks: list[Check] = field(default_factory=list)
    p: float = 0.5  # N* is where the share of seeds succeeding reaches p
    seeds: int = 0  # measurement seeds
    first_seed: int = 0  # the first of them (a replication's: its seed_start)
    n_test: int = 0  # test samples a model is scored on
    test_sets: int = 1  # test sets (one per seed, or one shared)
    named_checks: list[str] = field(default_factory=list)  # the specs whose sweeps check it (answer.checks)
    regimes: list[Regime] = field(default_factory=list)  # the regime map (answer.regimes), the primary's among them

    @classmethod
    def from_dict(cls, raw: dict) -> "Answer":
        """An answer as a sweep's recorded summary holds it (Summary.to_dict); a field it was recorded
        without (first_seed, in an older summary) takes its default."""
        rest = {
            f.name: raw[f.name] for f in fields(cls) if f.name in raw and f.name not in ("primary", "checks", "regimes")
        }
        return cls(
            Statements.from_dict(raw["primary"]),
            checks=[Check.from_dict(c) for c in raw["checks"]],
            regimes=[Regime.from_dict(r) for r in raw.get("regimes", [])],
            **rest,
        )


@dataclass
class CellRow:
    """One cell in the summary: its setting, N* (bracket, CI, whether it is known), the success
    rate and outcome counts per N, T and T*, and whether too many of its models did not converge."""

    label: str
    model: str
    values: dict[str, Any]
    alpha_effective: float | None  # the family's scaling value the samples really have (Paper A: alpha*)
    lr: float
    trainings: int  # models trained (one pass: runs, each evaluated at every N)
    failed: bool  # a pack of the cell failed: N* is not given
    n_star: int | None = None  # at threshold p; None: not reached (or the cell failed)
    n_star_known: bool = False  # False where N* is only bounded (reached at the smallest N tried)
    bracket_lo: int | None = None  # N* lies in (bracket_lo, n_star]
    n_star_ci95: list[int | None] | None = None
    monotone: bool | None = None  # no N below the bracket already reached p
    steps_to_zero: float | None = None  # T at the largest N
    rates: dict[int, float] = field(default_factory=dict)  # N -> success rate (NaN: no model counted)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)  # N -> outcome class -> models
    not_converged_share: float | None = None  # the largest share of an N's models not converged or diverged
    flagged: bool = False  # that share is above max_not_converged: left out of the fits
    protocol: str = "multi_pass"
    batch_size: int = 16
    t_star: float | None = None  # one pass: N*/B
    per_seed: dict | None = None  # one pass: each seed's first and stable N
    criterion: str = "stable"  # the success criterion of n_star (the sweep's, one pass; multi-pass: stable)
    criteria: dict[str, CriterionRow] = field(default_factory=dict)  # N* under every criterion the cell defines
    n_test: int = 1000  # test samples: zero errors on them bound the error by error_bound(n_test) at 95%
    tuning: TuningRow | None = None
    window: WindowRow | None = None
    premises: list[Premise] = field(default_factory=list)  # the theory's premises checked on the cell
    difficulty: dict[str, float] = field(default_factory=dict)  # oracle rules on the cell's data (family's names)
    floor: FloorRow | None = None  # the plug-in rule's N on the same seeds' samples (None: the family has none)
    samples: SamplesRow | None = None  # vote margins and per-sample premises (None: the data have no vote)
    lost: LostRow | None = None  # one pass: seeds that reached zero test error and did not keep it (None: none)

    @property
    def n_star_above(self) -> float | None:
        """The bound a cell without N* puts on it: a one-pass stable N needs W times itself under the
        cap, so cap / W where a window was checked, else the largest N evaluated; None where N* is known."""
        if self.n_star is not None or not self.bracket_lo:
            return None
        return self.window.cap / self.window.stability_window if self.window else float(self.bracket_lo)

    @property
    def setting(self) -> str:
        """The axis values alone ("alpha_star=0.1"): what the models of one setting share (its data)."""
        return " ".join(f"{k}={v}" for k, v in self.values.items()) or "all"

    @property
    def violated(self) -> list[Premise]:
        return [p for p in self.premises if not p.met]


def at_n(label: str, n: int) -> str:
    """The label of a cell's entry at one of its several N ("vanilla teacher=shared N=400")."""
    return f"{label} N={n}"


@dataclass
class Summary:
    """Everything a sweep's report shows (``to_dict``: the same, JSON-ready). Fits map a group of
    cells (the model and its other axis values) to an analysis.Fit."""

    sweep_id: str
    name: str
    models: list[str]
    success_rate: float  # the threshold p of N* (the spec's success_rate)
    max_not_converged: float
    cells: list[CellRow]
    exponent: dict[str, Fit]  # N* ~ x^k, x the family's scaling variable (Paper A: 1/alpha*)
    iterations_exponent: dict[str, Fit]  # T ~ x^k
    t_star_exponent: dict[str, Fit]  # one pass: T* = N*/B ~ x^k
    forms: dict[str, Forms]  # N* in the theorem's form beside the power law (a family whose Scaling is shifted)
    local_exponent: dict[str, list[LocalSlope]]  # group -> N*'s slope between neighbouring values, with CIs
    exponent_difference: dict[str, Difference]  # "cnn - vit" (per other axis values), paired bootstrap CI
    n_star_ratio: dict[str, dict[str, Estimate]]  # "cnn / vit" -> cell setting -> N* ratio, paired bootstrap CI
    lr_exponent: dict[str, Fit]  # T ~ (1/eta)^k
    theory: dict[str, Any]
    paper: dict[str, dict]  # model -> the paper's own exponent and N* (Fig 1)
    stats: dict[str, Any]  # every registered statistic's entries (services.stats.statistics), by name
    n_star: dict[str, int | None]  # cell label -> N*
    protocol: str | dict[str, str]  # the sweep's training protocol, or each cell's
    family: str  # the experiment family (vit_core.family): its theory's words and its variable x
    error_bound: dict[str, float] = field(default_factory=dict)  # test samples -> the 95% error bound of 0 errors
    criterion: str = "stable"  # the headline N*'s success criterion (one pass: the spec's)
    criteria: dict[str, CriterionFits] = field(default_factory=dict)  # one pass: the fits under every criterion
    answer: Answer | None = None  # the three statements at the primary, and their checks from the same runs
    seeds: list[int] = field(default_factory=list)  # the measurement seeds the cells' models trained with

    @property
    def experiment(self) -> Family:
        """The installed family the sweep belongs to: its theory's words and its variable x."""
        return families()[self.family]

    @property
    def scaling(self) -> "Scaling | None":
        return self.experiment.scaling

    def to_dict(self) -> dict:
        """JSON-ready, the one JSON of a sweep (``report --json``; ``run --json`` adds the run's own
        facts): the statistics' entries at the top level; a local slope names its two values by the
        scaling field ({"alpha_star": [a, b], ...}), a difference of exponents gives its value and
        CI (its pair and cells are the report's)."""
        out = {}
        for name, value in asdict(self).items():
            out |= value if name == "stats" else {name: value}
        out["exponent_difference"] = {
            name: {"value": d.value, "ci95": d.ci95} for name, d in self.exponent_difference.items()
        }
        out["local_exponent"] = {
            group: [{self.scaling.field: s.between, "value": s.value, "ci95": s.ci95} for s in slopes]
            for group, slopes in self.local_exponent.items()
        }
        return out
