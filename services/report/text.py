"""A sweep's summary as text: the per-cell table, one line per finding, Markdown and HTML, and the
report folder that holds them with the figures."""

import json
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path
from typing import ClassVar

from services.plotting import SAVE
from services.report.answer_text import CRITERION_WORDS, Screen, grid_end_lines, readings_table
from services.report.fits import fit_lines, fit_table, form_table, other_criteria
from services.report.views import TableView
from services.search.selection import SMALLEST_BATCH
from services.stats import statistics
from services.stats.base import fmt
from services.stats.rows import Summary, error_bound
from vit_core.outcomes import OUTCOMES


def table_rows(summary: "Summary") -> list[list[str]]:
    """The per-cell table: cell, the scaling field's effective value (where the family has one), N*
    with bracket and CI, T, trainings."""
    rows = []
    for r in summary.cells:
        if r.failed or not r.rates:
            star, bracket = "FAILED" if r.failed else "-", "-"
        elif r.n_star is None:  # even the largest N missed p (with a window: no stable N under cap / W)
            star, bracket = "-", f"> {r.n_star_above:.0f}"
        else:  # "<= N": the smallest N tried already reached p
            star, bracket = (
                ("" if r.n_star_known else "<= ") + str(r.n_star),
                f"({r.bracket_lo or 0}, {r.n_star}]",
            )
        counted = (
            list(r.outcomes.values())[-1:] if r.protocol == "one_pass" else r.outcomes.values()
        )  # one pass: at its budget N
        totals = [sum(counts[name] for counts in counted) for name in OUTCOMES]
        rows.append(
            [
                r.label + (" (FLAGGED)" if r.flagged else ""),
                *([fmt(r.alpha_effective, summary.scaling.format)] if summary.scaling else []),
                star,
                bracket,
                fmt(r.n_star_ci95),
                *[_criterion_cell(r, c) for c in other_criteria(summary)],
                _floor_cell(r.floor),
                "yes" if r.monotone else ("no" if r.monotone is False else "-"),
                fmt(r.steps_to_zero, ".0f"),
                fmt(r.t_star, ".0f"),
                f"{r.batch_size}, {r.lr:g}" + (" (tuned)" if r.tuning else ""),
                str(r.trainings),
                "/".join(map(str, totals)),
            ]
        )
    return rows


def table_header(summary: "Summary") -> list[str]:
    """The per-cell table's columns; the second is the family's scaling field (Paper A: alpha*), where
    it has one; N* under each criterion other than the headline's after the headline's CI (one pass)."""
    scaling = summary.scaling
    criteria = [f"{c} N* [95% CI]" for c in other_criteria(summary)]
    return ["cell", *([scaling.value_label] if scaling else []), *TABLE_HEADER[:3], *criteria, *TABLE_HEADER[3:]]


def _criterion_cell(row, criterion: str) -> str:
    """A cell's N* under one criterion with its CI ("1,160 [1,056, 1,400]"), "> N" where not reached."""
    c = row.criteria.get(criterion)
    if c is None or not row.rates:
        return "-"
    star = f"> {max(row.rates)}" if c.n_star is None else ("" if c.known else "<= ") + str(c.n_star)
    return f"{star} {fmt(c.ci95)}"


TABLE_HEADER = [  # after the cell and its scaling value
    "N*",
    "bracket",
    "N* 95% CI",
    "plug-in N*",
    "monotone",
    "T (steps to 0)",
    "T* = N*/B",
    "B, eta",
    "trainings",
    "outcomes s/fc/f/nc/d",
]
OUTCOMES_LEGEND = (
    "outcomes: s succeeded, fc failed-converged, f failed (one pass), nc not-converged, d diverged; "
    "over every N (one pass: at the cell's largest N)"
)


def _floor_cell(floor) -> str:
    """The plug-in rule's N in the table: its N*, or above the largest N tried, or - (none known)."""
    if floor is None:
        return "-"
    return f"> {floor.n_max}" if floor.n_star is None else str(floor.n_star)


def _floor_lines(summary: "Summary") -> list[str]:
    """Per cell: samples against steps, the plug-in rule's floor beside SGD's N* and T* = N*/B."""
    lines = []
    for r in summary.cells:
        if r.floor is None or not r.rates:
            continue
        steps = f" = T* {r.t_star:.0f} steps of B = {r.batch_size}" if r.t_star is not None else ""
        lines.append(
            f"samples against steps, {r.label}: a plug-in rule (nearest class centroid of the mean token) keeps zero "
            f"test error from N = {_floor_cell(r.floor)} {fmt(r.floor.ci95)} on the same seeds' samples; SGD's "
            f"N* {fmt(r.n_star)}{steps}"
            + (
                f"; {r.floor.both_labels} of {r.floor.seeds} seeds' first N* samples hold both labels"
                if r.floor.both_labels is not None
                else ""
            )
        )
    return lines


def _sample_lines(summary: "Summary") -> list[str]:
    """Per setting (the models share its data): how many of a test set's samples sit at each vote
    margin (the near ties, margin 1, decide a model's zero test error), and the share of training
    and test samples that meet each premise on their own, where the theory states it on averages."""
    seen: dict[str, list[str]] = {}
    for r in summary.cells:
        m = r.samples
        if m is None or r.setting in seen:
            continue
        sets = f"{m.test_sets} sets of {m.n_test:,} (each seed's own)" if m.test_sets > 1 else f"one of {m.n_test:,}"
        counts = ", ".join(f"{margin}: {count:,.1f}" for margin, count in m.margins.items())
        shares = [
            f"{what}: " + ", ".join(f"{name} {share:.1%}" for name, share in met.items())
            for what, met in (
                (f"training (each seed's first {m.train_samples:,})", m.train_share),
                ("test", m.test_share),
            )
        ]
        seen[r.setting] = [
            f"test set vote margins, {r.setting}: {sets}; samples per set at margin {counts} (means; smallest "
            f"{m.smallest}" + ("; at margin 1 one token decides the label)" if m.smallest <= 1 else ")")
        ] * (m.smallest < len(m.margins))  # only where some sample sits below the last bin
        if any(share < 1 for met in (m.train_share, m.test_share) for share in met.values()):
            seen[r.setting].append(
                f"per-sample premises, {r.setting}: the share of samples meeting each on its own: " + "; ".join(shares)
            )
    return [line for lines in seen.values() for line in lines]


def _kept_lines(summary: "Summary") -> list[str]:
    """Per one-pass cell where some seeds reached zero test error and lost it: how many, and what
    tells the causes apart (services.stats.rows.LostRow)."""
    lines = []
    for r in summary.cells:
        if r.lost is None:
            continue
        lost, mass = r.lost, ""
        if lost.mass_at_first_zero is not None:
            end = fmt(lost.mass_at_end, ".3f")
            mass = f"; attention mass {lost.mass_at_first_zero:.3f} at the first zero, {end} at the end"
        lines.append(
            f"reached, not kept, {r.label}: {lost.seeds} of {len(r.per_seed['seeds'])} seeds had zero test error "
            f"at some N and no stable N by their cap (failures of the stable N*): after the first zero the test "
            f"error was above 0 at {lost.nonzero_share:.0%} of their evaluations, at most {lost.worst_error:.3f} "
            f"(medians){mass}; {lost.ended_at_zero} ended at zero error (a zero run the cap cut before its window "
            "closed)"
        )
    return lines


def _premise_lines(summary: "Summary") -> list[str]:
    """Per cell whose family states premises: those the cell violates, with their numbers."""
    lines = []
    for row in summary.cells:
        if row.violated:
            broken = "; ".join(
                f"{p.name}: {p.statement}, here {p.value:.4g} against {p.bound:.4g}" for p in row.violated
            )
            lines.append(f"premises violated, {row.label}: {broken}")
        elif row.premises:
            values = ", ".join(f"{p.name} {p.value:.4g} ({p.bound:.4g})" for p in row.premises)
            lines.append(f"premises, {row.label}: all {len(row.premises)} met, each value (its bound): {values}")
    return lines


def _difficulty_lines(summary: "Summary") -> list[str]:
    """Per distinct data difficulty: the oracle rules' numbers, so an easy regime shows as one."""
    seen: dict[str, list[str]] = {}
    for row in summary.cells:
        if row.difficulty:
            key = ", ".join(f"{name} {value:.4g}" for name, value in row.difficulty.items())
            seen.setdefault(key, []).append(row.label)
    return [f"difficulty ({', '.join(labels)}): {key}" for key, labels in seen.items()]


def _tuning_lines(summary: "Summary") -> list[str]:
    """Per tuned cell: the setting chosen, on which seeds, and what N* the selection saw."""
    lines = []
    for r in summary.cells:
        t = r.tuning
        if t is None:
            continue
        lines.append(
            f"tuned, {r.label}: B = {t.chosen['batch_size']}, eta = {t.chosen['lr']:g}, chosen on seeds "
            f"{span(t.selection_seeds)} among {len(t.selection)} settings (its N* there {fmt(t.selection_n_star)});"
            + (f" N* measured on seeds {span(t.measurement_seeds)}" if t.measurement_seeds else " N* not measured")
            + (f"; {SMALLEST_BATCH}" if SMALLEST_BATCH in t.at_edge else "")
            + (f"; AT THE EDGE of the space: {', '.join(edge)}" if (edge := _open_edges(t.at_edge)) else "")
        )
    return lines


def _open_edges(notes: list[str]) -> list[str]:
    """The edges a search could have gone past (B = 1 is the smallest batch there is)."""
    return [note for note in notes if note != SMALLEST_BATCH]


def _seed_lines(summary: "Summary") -> list[str]:
    """Which seeds N* was measured on (a replication's: from its seed_start), where any model was."""
    return [f"measurement seeds: {span(summary.seeds)} ({len(summary.seeds)})"] if summary.seeds else []


def span(seeds: list[int]) -> str:
    """Seeds for people: "100-103" where they run on without a gap, else the list."""
    return f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 1 else fmt(seeds)


def _grid_end_lines(summary: "Summary") -> list[str]:
    """The cells whose N* sits at an end of their N grid (only bounded there), and what to change."""
    above = [r.label for r in summary.cells if r.rates and not r.failed and r.n_star is None]
    return grid_end_lines(above, [r.label for r in summary.cells if r.n_star is not None and not r.n_star_known])


def _window_lines(summary: "Summary") -> list[str]:
    """One line for the stability window and the test set's bound, when all cells share them."""
    lines = []
    windows = [r.window for r in summary.cells if r.window]
    if windows:
        censored, runs = sum(w.censored for w in windows), sum(w.runs for w in windows)
        checked = min((w.checked for w in windows if w.checked), default=None)
        lines.append(
            f"stability window: each measured run followed to {windows[0].stability_window:g}x its own stable N "
            f"(checked to >= {fmt(checked, '.2f')}x); {censored} of {runs} runs stopped by their cap before it closed "
            "(censored: counted as failures)"
        )
    tests = sorted({r.n_test for r in summary.cells})
    if summary.cells:
        bounds = ", ".join(f"{n:,} samples: error <= {error_bound(n):.2%}" for n in tests)
        lines.append(
            f"success = zero errors on the test set; at 95% that bounds a model's error ({bounds}; rule of three: 3/n)"
        )
    return lines


def notes(summary: "Summary") -> list[str]:
    """One line per finding below the table: fits against theory and the paper, premises, tuning,
    then every registered statistic's (services.stats: the adaptive search's savings, attention
    concentration, test error and patch association, sparsification effects)."""
    lines = [
        *fit_lines(summary),
        *_floor_lines(summary),
        *_sample_lines(summary),
        *_kept_lines(summary),
        *_premise_lines(summary),
        *_difficulty_lines(summary),
        *_grid_end_lines(summary),
        *_window_lines(summary),
        *_seed_lines(summary),
        *_tuning_lines(summary),
        OUTCOMES_LEGEND,
    ]
    flagged = [r.label for r in summary.cells if r.flagged]
    if flagged:
        lines.append(
            f"FLAGGED (more than {summary.max_not_converged:.0%} of an N's models not converged or diverged; left "
            "out of the fits; "
            f"raise training.max_steps or search.max_steps_cap): {', '.join(flagged)}"
        )
    for unit in statistics():
        lines += unit.lines(summary)
    return lines


@dataclass(frozen=True)
class ReportView:
    """What a report shows of a summary, as text: its tables (the per-cell one first, then the fits
    and the forms), its notes, the Markdown heading and the figures' names. A sweep's record holds
    it (``to_dict``), so `report` prints a recorded sweep and writes its Markdown and HTML without
    recomputing them."""

    FORMAT: ClassVar[int] = 3  # what ``to_dict`` writes; from_dict reads this format only (2: a verdict in its notes)

    sweep_id: str
    heading: str  # the Markdown's line under the sweep id
    tables: list[TableView]
    notes: list[str]
    figures: list[str]  # the figures' file names, in the order the HTML shows them

    def to_dict(self) -> dict:
        return {"format": self.FORMAT} | asdict(self)

    @classmethod
    def from_dict(cls, document: dict) -> "ReportView | None":
        """The view a record holds; None where it was written in another format."""
        if document.get("format") != cls.FORMAT:
            return None
        fields = {k: v for k, v in document.items() if k != "format"}
        return cls(**fields | {"tables": [TableView(**t) for t in fields["tables"]]})


def view(summary: "Summary", figures: tuple[str, ...] | list[str] = ()) -> ReportView:
    """The report of a summary as text (the tables' cells and the notes rendered once), beside its
    ``figures`` (file names): the answer's readings first, where it has one."""
    title = f"{summary.sweep_id}: N* = smallest N from which the success rate stays >= {summary.success_rate}"
    title += f" (success: {summary.criterion})" if summary.criteria else ""
    heading = f"N*: the smallest N from which the success rate stays >= {summary.success_rate}"
    heading += f" (success: {CRITERION_WORDS[summary.criterion]})." if summary.criteria else "."
    tables = [TableView(title, table_header(summary), table_rows(summary), ["cell"])]
    if summary.answer is not None:
        tables.append(readings_table(summary.answer, summary.experiment))
    left = ["criterion", "group", "form"]
    for name, (header, rows) in (("N* fits", fit_table(summary)), ("N* in the theorem's form", form_table(summary))):
        if rows:
            tables.append(TableView(name, header, rows, [h for h in header if h in left or h.startswith("form")]))
    return ReportView(summary.sweep_id, heading, tables, notes(summary), list(figures))


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _screen_markdown(screen: Screen | None) -> list[str]:
    """The answer's screen as Markdown: its lines, the N* table, the statements, the checks."""
    if screen is None:
        return []
    lines = [*screen.lines, ""]
    for table, after in screen.blocks():
        if table is not None:
            lines += [f"**{table.title}**", "", *_markdown_table(table.header, table.rows), ""]
        lines += [*(f"- {line}" for line in after), ""]
    return [*lines, "## Details", ""]


def markdown(report: ReportView, screen: Screen | None = None) -> str:
    """The answer's screen, then the tables (the per-cell one under the heading, each other under its
    title) and the notes as Markdown."""
    first, *others = report.tables
    lines = [f"# {report.sweep_id}", "", *_screen_markdown(screen), report.heading, ""]
    lines += _markdown_table(first.header, first.rows)
    for table in others:
        lines += ["", f"**{table.title}**", "", *_markdown_table(table.header, table.rows)]
    return "\n".join([*lines, "", *[f"- {line}" for line in report.notes]]) + "\n"


def summary_json(document: dict) -> str:
    """A summary's JSON (Summary.to_dict) as its report folder and its record hold it."""
    return json.dumps(document, indent=1)


def write(
    folder: Path, report: ReportView, document: dict, figs: dict | None = None, screen: Screen | None = None
) -> Path:
    """summary.md, summary.html and summary.json (``document``: Summary.to_dict) in ``folder``, the
    answer's ``screen`` opening the first two, with ``figs`` (name -> matplotlib figure) drawn there;
    None: the report's figures lie there already."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, fig in (figs or {}).items():
        fig.savefig(folder / name, **SAVE)
    (folder / "summary.md").write_text(markdown(report, screen))
    (folder / "summary.json").write_text(summary_json(document))
    (folder / "summary.html").write_text(html(report, screen))
    return folder


def _html_table(header: list[str], rows: list[list[str]], title: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    caption = f"<caption>{escape(title)}</caption>" if title else ""
    return f"<table border=1>{caption}<tr>{head}</tr>{body}</table>"


def _screen_html(screen: Screen | None, figures: list[str]) -> str:
    """The answer's screen as HTML, the headline figure (answer.png) beside it where there is one."""
    if screen is None:
        return ""
    out = "".join(f"<p>{escape(line)}</p>" for line in screen.lines)
    for table, after in screen.blocks():
        if table is not None:
            out += _html_table(table.header, table.rows, table.title)
        out += "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in after) + "</ul>"
    for name, alt in (
        (ANSWER_FIGURE, "N* against the scaling variable, both models"),
        (REGIME_MAP_FIGURE, "the regime map"),
    ):
        if name in figures:
            out += f'<p><img src="{name}" alt="{alt}"></p>'
    return out + "<h2>Details</h2>"


ANSWER_FIGURE = "answer.png"  # the headline figure (services.report.figures): first in the HTML and in MLflow
REGIME_MAP_FIGURE = "answer_regime_map.png"  # a regime map's figure, beside the headline one


def html(report: ReportView, screen: Screen | None = None) -> str:
    """The report as one HTML page: the answer's screen first, then the tables, the notes and the
    figures (files beside it)."""
    first, *others = report.tables
    tables = _html_table(first.header, first.rows)
    tables += "".join(f"<h2>{escape(t.title)}</h2>{_html_table(t.header, t.rows)}" for t in others)
    notes = "".join(f"<li>{escape(line)}</li>" for line in report.notes)
    shown = [name for name in report.figures if not (screen and name in (ANSWER_FIGURE, REGIME_MAP_FIGURE))]
    pictures = "".join(f'<p><img src="{escape(name)}" alt="{escape(name)}"></p>' for name in shown)
    return (
        "<!doctype html><meta "
        f"charset=utf-8><title>{escape(report.sweep_id)}</title><h1>{escape(report.sweep_id)}</h1>"
        f"{_screen_html(screen, report.figures)}{tables}<ul>{notes}</ul>{pictures}"
    )
