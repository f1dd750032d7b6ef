"""The results registry: one entry per spec, results/<spec>.json (format 1) with its Markdown beside it
(results/<spec>.md), written by `vitsweep report SWEEP --publish` from a recorded sweep, so that the
numbers a document quotes have one source that says where they were measured: the sweep, the git
commit and machine it ran at, its wall time, the hashes of its spec and of vit_core as its record
holds them, and what it measured (the answer's screen where the spec asks a question, N* per cell
with its CI, the fitted exponents). An entry is current while the spec file of its name and
vit_core hash as they did when it was measured; else stale, and `vitsweep results` says which
changed. The entries are plain values: services.app builds them from a sweep's summary."""

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from services.spec import SpecError, load_spec
from services.store import provenance
from services.store.cache import vit_core_hash
from services.store.files import write_atomic

if TYPE_CHECKING:
    from services.spec import Sweep

FORMAT = 1  # what write gives; read takes this format only
RESULTS = provenance.PROJECT_ROOT / "results"
SPECS = provenance.PROJECT_ROOT / "sweeps"
README = provenance.PROJECT_ROOT / "README.md"
CURRENT = "current"
# a document's reference to an entry: results/NAME.md or results/NAME.json
QUOTED = re.compile(r"\bresults/([A-Za-z0-9][A-Za-z0-9_.-]*?)\.(?:md|json)\b")


class Table(BaseModel):
    title: str
    header: list[str]
    rows: list[list[str]]


class Answer(BaseModel):
    """The answer's screen as the report opens with it: its lines, the N* table and the statements,
    the regime map's table where there is one, the checks' table and what follows it."""

    lines: list[str]
    table: Table | None
    statements: list[str]
    regimes: Table | None = None
    checks: Table | None = None
    notes: list[str] = []


class NStar(BaseModel):
    """A cell's N* (None: not reached in its grid) and its 95% CI."""

    cell: str
    model: str
    values: dict[str, Any]
    n_star: int | None
    known: bool
    ci95: list[int | float | None] | None


class Fit(BaseModel):
    """A fitted exponent (of N* in the family's scaling field) of a group of cells, or a difference of two."""

    group: str
    value: float | None
    ci95: list[float | None] | None


class Entry(BaseModel):
    """A spec's measured results as one recorded sweep gave them, with where they came from."""

    format: int = FORMAT
    spec: str
    sweep_id: str
    commit: str | None
    git_dirty: bool | None
    date: str | None  # the sweep's end, UTC, ISO 8601
    machine: str | None
    machine_recorded: bool  # False: the publisher's word (the sweep's record predates vitsweep.machine)
    wall_s: float | None
    trainings: int | None
    spec_hash: str  # provenance.spec_hash of the spec as the sweep resolved and recorded it
    vit_core_hash: str | None  # as the sweep's record holds it
    criterion: str | None
    success_rate: float | None
    answer: Answer | None
    n_star: list[NStar]
    exponents: list[Fit]
    exponent_differences: list[Fit]


def date_of(ms: int | None) -> str | None:
    """An MLflow time (ms since the epoch) as ISO 8601, UTC, to the second."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def write(entry: Entry, folder: Path = RESULTS) -> tuple[Path, Path]:
    """``entry`` as folder/<spec>.json and folder/<spec>.md (each replacing the spec's entry there)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = folder / f"{entry.spec}.json", folder / f"{entry.spec}.md"
    write_atomic(written[0], entry.model_dump_json(indent=1) + "\n")
    write_atomic(written[1], markdown(entry))
    return written


def read(path: Path) -> Entry:
    """An entry file; ValueError where it is not one of FORMAT."""
    entry = Entry.model_validate_json(path.read_text())
    if entry.format != FORMAT:
        raise ValueError(f"{path}: format {entry.format}; this vitsweep reads format {FORMAT}")
    return entry


def entries(folder: Path = RESULTS) -> list[Entry]:
    """Every entry of the registry, by spec name."""
    return [read(path) for path in sorted(folder.glob("*.json"))]


def measured_wall_s(sweep: "Sweep", slots: int, folder: Path = RESULTS) -> float | None:
    """The wall time this very spec (its hash) took when its entry was measured, scaled from the
    slots of the machine it names (its CPUs over the sweep's CPUs a trial) to ``slots``: a pace for
    the progress line's ETA before a trial reports (None: no entry of this spec, or no wall time)."""
    path = folder / f"{sweep.name}.json"
    try:
        entry = read(path) if path.is_file() else None
    except ValueError:  # another format, or not an entry: no pace from it
        return None
    if entry is None or entry.wall_s is None or entry.spec_hash != provenance.spec_hash(sweep.spec):
        return None
    cpus = provenance.cpus_of(entry.machine or "")
    measured_slots = max(1, int(cpus // sweep.resources.cpus_per_trial)) if cpus else slots
    return entry.wall_s * measured_slots / max(1, slots)


def status(entry: Entry, specs: Path = SPECS) -> str:
    """CURRENT, or "stale: ..." naming what changed since the entry was measured: its spec (the file
    of its name in ``specs``, resolved, hashed as provenance.spec_hash does) and vit_core (this tree's)."""
    path = specs / f"{entry.spec}.yaml"
    if not path.is_file():
        return f"stale: spec gone ({path.name} not in {specs})"
    try:
        now = provenance.spec_hash(load_spec(path).spec)
    except SpecError:
        return "stale: spec changed (it no longer loads)"
    changed = [
        *(["spec changed"] if now != entry.spec_hash else []),
        *(["vit_core changed"] if entry.vit_core_hash != vit_core_hash() else []),
    ]
    return f"stale: {', '.join(changed)}" if changed else CURRENT


def quoted(document: Path = README) -> set[str]:
    """The entries (spec names) a document quotes: those it names as results/NAME.md or .json."""
    return set(QUOTED.findall(document.read_text())) if document.is_file() else set()


class Listed(NamedTuple):
    """An entry as `vitsweep results` lists it; one the document quotes that the registry lacks is
    listed with no sweep and status "missing"."""

    spec: str
    sweep_id: str | None
    commit: str | None
    date: str | None
    status: str
    quoted: bool


def listing(folder: Path = RESULTS, specs: Path = SPECS, document: Path = README) -> list[Listed]:
    """Every entry of the registry in ``folder`` with its status against ``specs`` and this tree's
    vit_core, and whether ``document`` quotes it; then each entry it quotes that is not there."""
    found, named = entries(folder), quoted(document)
    rows = [Listed(e.spec, e.sweep_id, e.commit, e.date, status(e, specs), e.spec in named) for e in found]
    have = {e.spec for e in found}
    return rows + [Listed(name, None, None, None, "missing", True) for name in sorted(named - have)]


def _estimate(value, ci95) -> str:
    if value is None:
        return "not reached"
    shown = f"{value:,}" if isinstance(value, int) else f"{value:.2f}"
    lo, hi = ci95 or (None, None)
    ends = ", ".join("?" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:.2f}" for v in (lo, hi))
    return shown + (f" [{ends}]" if ci95 else "")


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    lines = [f"**{title}**", ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return [*lines, *("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows), ""]


def markdown(entry: Entry) -> str:
    """An entry as a person reads it: where it was measured, then the answer's screen, N* per cell and the fits."""
    commit = (entry.commit or "unknown commit")[:7] + (" (uncommitted changes)" if entry.git_dirty else "")
    machine = entry.machine or "a machine not recorded"
    wall = f"{entry.wall_s / 60:.1f} min" if entry.wall_s is not None else "wall time not recorded"
    ended = entry.date.replace("T", " ")[:16] + " UTC" if entry.date else "at a time not recorded"
    lines = [
        f"# {entry.spec}: measured results",
        "",
        f"Sweep `{entry.sweep_id}` of [`sweeps/{entry.spec}.yaml`](../sweeps/{entry.spec}.yaml), recorded at "
        f"commit {commit}, ended {ended}, on {machine}"
        f"{'' if entry.machine_recorded or not entry.machine else ' (as its publisher said)'}: {wall}"
        f"{f', {entry.trainings:,} trainings' if entry.trainings is not None else ''}. Spec hash `{entry.spec_hash}`, "
        f"vit_core hash `{entry.vit_core_hash}`.",
        "",
        f"Written by `vitsweep report {entry.sweep_id} --publish` (results/{entry.spec}.json holds the same, "
        "format 1); `vitsweep results` says whether the spec or vit_core changed since.",
        "",
    ]
    if answer := entry.answer:
        lines += ["## Answer", "", *answer.lines, ""]
        for table, after in ((answer.table, answer.statements), (answer.regimes, []), (answer.checks, answer.notes)):
            lines += _table(table.title, table.header, table.rows) if table is not None else []
            lines += [*(f"- {line}" for line in after), *([""] if after else [])]
    criterion = f" (success: {entry.criterion})" if entry.criterion else ""
    lines += [f"## N* per cell{criterion}", ""]
    lines += _table("", ["cell", "N* [95% CI]"], [[c.cell, _estimate(c.n_star, c.ci95)] for c in entry.n_star])
    if entry.exponents or entry.exponent_differences:
        lines += ["## Fitted exponents of N*", ""]
        fits = [*entry.exponents, *entry.exponent_differences]
        lines += _table("", ["group", "exponent [95% CI]"], [[f.group, _estimate(f.value, f.ci95)] for f in fits])
    return "\n".join(lines).rstrip() + "\n"
