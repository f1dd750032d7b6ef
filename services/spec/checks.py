"""A spec read from YAML and checked: one problem per field, each naming the field, the value and
what is allowed. Parsing checks types, unknown keys and ranges; ``check_sweep`` then builds the
configs of every cell so that vit_core's own checks (alpha# < alpha*, orthonormal patterns need
d >= M, ...) run before anything starts. A spec without problems is resolved once (Sweep): what
every layer past this one receives."""

import difflib
import json
import re
from pathlib import Path
from typing import get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from services.spec.base import Problem, SpecError
from services.spec.schema import DEFAULT_FAMILY, FAMILIES, SweepSpec, spec_from_dict
from services.spec.strategies import _search_mode, search_strategies
from services.spec.sweep import Sweep
from vit_core.fields import ConfigError


def _unknown_key(model: type[BaseModel], loc: tuple) -> str:
    """What to say of a key ``loc`` that ``model`` (the spec's class) has no field for: the field it
    most likely meant, and the keys its section allows."""
    section: object = model
    for part in loc[:-1]:
        if _is_model(section):
            field = section.model_fields.get(part)
            section = _section_of(field.annotation) if field else None
        elif get_origin(section) is dict:  # per_model.vit: the key names a model, the value is a section
            section = _section_of(get_args(section)[1])
        if section is None:
            return "not a field here"
    if not _is_model(section):
        return "not a field here"
    allowed = list(section.model_fields)
    meant = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    guess = f"did you mean {meant[0]}? " if meant else ""
    return f"not a field of {'.'.join(map(str, loc[:-1])) or 'a spec'}: {guess}allowed: {', '.join(allowed)}"


def _section_of(annotation) -> object | None:
    """The section class (a model, or a dict of them) an annotation holds, Optional and Annotated unwrapped."""
    if _is_model(annotation) or get_origin(annotation) is dict:
        return annotation
    return next((found for t in get_args(annotation) if (found := _section_of(t)) is not None), None)


def _is_model(annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _pydantic_problems(error: ValidationError, spec_class: type[BaseModel]) -> list[Problem]:
    problems, named = [], search_strategies()
    for e in error.errors(include_url=False):
        loc = e["loc"]
        if loc[:1] == ("search",) and len(loc) > 1 and loc[1] in named:  # the union's tag, not a field
            loc = (loc[0], *loc[2:])
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "search_mode":  # a strategy the union has no class for
            path, e = f"{path}.mode", e | {"input": _search_mode(e["input"])}
        if loc[:1] == ("search",) and e["type"] == "extra_forbidden":
            owners = [name for name, cls in named.items() if loc[-1] in cls.model_fields]
            message = f"only used with search.mode={' or '.join(owners)}" if owners else message
        elif e["type"] == "extra_forbidden":
            message = _unknown_key(spec_class, loc)
        problems.append(Problem(path, e.get("input") if e["type"] != "missing" else None, message))
    return problems


def check_sweep(spec: SweepSpec) -> list[Problem]:
    """What a single field cannot say: axes set twice, the sweep's size, and vit_core's own
    checks on every cell, each problem named by where its value came from."""
    return _checked(spec)[0]


def _checked(spec: SweepSpec) -> tuple[list[Problem], Sweep | None]:
    """check_sweep's problems, and the sweep resolved where its cells resolve (its strategy's checks read it)."""
    problems = [
        Problem(f"axes.{axis}", values, f"also set in {spec.section_of(axis)}.{axis}: keep one")
        for axis, values in spec.swept.items()
        if axis in getattr(spec, spec.section_of(axis)).model_fields_set
    ]
    problems += [
        Problem(f"{field}.{m}", m, f"not one of the sweep's models ({', '.join(spec.models)})")
        for field, by_model in [("per_model", spec.per_model), *_rule_section(spec)]
        for m in by_model
        if m not in spec.models
    ]
    problems += _primary_problems(spec)
    cells = _cell_problems(spec)
    if cells:  # the checks below build every cell's configs
        return problems + cells, None
    problems += [
        Problem("n_train", None, "required: multi_pass cells train at each of these N (one_pass cells need none)")
        for model in spec.models
        if spec.n_train_of(model) is None and not all(spec.resolve(c).one_pass for c in spec.cells if c.model == model)
    ][:1]
    if problems:
        return problems, None
    own = [m for m, grid in spec.per_model.items() if getattr(grid, "tuning", None)]
    if spec.tuning is None:
        problems += [Problem(f"per_model.{m}.tuning", None, "needs a sweep tuning section beside it") for m in own]
    sweep = Sweep.of(spec)
    problems += sweep.strategy.problems(sweep) + _pack_problems(sweep)
    if sweep.max_trainings_bound > spec.max_trainings:
        problems.append(
            Problem(
                "max_trainings",
                spec.max_trainings,
                f"the sweep can train {sweep.max_trainings_bound} models; raise max_trainings or shrink the axes",
            )
        )
    return problems, sweep


def _primary_problems(spec: SweepSpec) -> list[Problem]:
    """answer.primary and answer.regimes: each an axis the sweep varies (not the family's scaling field), each
    primary value one of its."""
    scaling = spec.FAMILY.scaling.field if spec.FAMILY.scaling else None
    axes = {axis: values for axis, values in spec.swept.items() if axis != scaling}
    problems = []
    for axis, value in spec.answer.primary.items():
        if axis not in axes:
            allowed = ", ".join(axes) or "none: the sweep varies no axis but its scaling field"
            problems.append(
                Problem(f"answer.primary.{axis}", value, f"not a swept axis; those the answer reads: {allowed}")
            )
        elif value not in axes[axis]:
            problems.append(Problem(f"answer.primary.{axis}", value, f"one of axes.{axis}: {axes[axis]}"))
    for i, axis in enumerate(spec.answer.regimes):
        if axis not in axes:
            allowed = ", ".join(axes) or "none: the sweep varies no axis but its scaling field"
            problems.append(Problem(f"answer.regimes[{i}]", axis, f"not a swept axis; those a map can read: {allowed}"))
    return problems


def _rule_section(spec: SweepSpec) -> list[tuple[str, dict]]:
    """[(the family's scaling rule section, its rules by model)], or [] where it has none."""
    return [(spec.FAMILY.scaling.rule, spec.scaling_rules)] if spec.scaling_rules else []


def _pack_problems(sweep: Sweep) -> list[Problem]:
    """An outside family's packs against the contract (vit_core.packed), one model of each kind
    built on the CPU: refused here in a line, not deep in a run. vitsweep's own families are
    tested, and building theirs would load torch for every ``validate``."""
    if type(sweep.family).__module__.partition(".")[0] == "vit_core":
        return []
    from vit_core.training import build  # noqa: PLC0415  (torch loads on use)

    problems = []
    for model in sweep.models:
        data, cfg, _ = sweep.resolved_cell(next(c for c in sweep.cells if c.model == model)).configs
        try:
            build(cfg, data, [0], "cpu")
        except Exception as error:  # a family's own code: whatever it raises, said in one line
            problems.append(Problem("family", sweep.family.name, f"building one {model} model: {error}"))
    return problems


def _cell_problems(spec: SweepSpec) -> list[Problem]:
    problems: dict[str, Problem] = {}
    for cell in spec.cells:
        try:
            spec.resolve(cell)
        except ConfigError as error:
            if error.field in cell.values:
                own = spec.per_model.get(cell.model)
                where = (
                    f"per_model.{cell.model}.axes"
                    if own and own.axes and error.field in own.axes.model_fields_set
                    else "axes"
                )
                path = f"{where}.{error.field}[{spec.axes_of(cell.model)[error.field].index(error.value)}]"
            else:
                section = spec.section_of(error.field)
                path = f"{section}.{error.field}" + (f" (with model {cell.model})" if section == "model" else "")
            problems.setdefault(path, Problem(path, error.value, error.allowed))
    return list(problems.values())


def parse_spec(text: str, source: str = "<spec>") -> Sweep:
    """A checked spec from YAML text, resolved (Sweep), or SpecError with every problem found."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise SpecError(source, [Problem("", where, f"not valid YAML: {getattr(error, 'problem', error)}")]) from None
    if not isinstance(raw, dict):
        raise SpecError(source, [Problem("", raw, "a spec is a YAML mapping of fields (name, models, n_train, ...)")])
    family = raw.get("family", DEFAULT_FAMILY)
    if family not in FAMILIES:
        installed = ", ".join(FAMILIES)
        raise SpecError(source, [Problem("family", family, f"one of the installed families: {installed}")])
    try:
        spec = spec_from_dict(raw, strict=True)
    except ValidationError as error:
        problems = _pydantic_problems(error, FAMILIES[family]) + _problems_beside(raw, error)
        raise SpecError(source, problems) from None
    problems, sweep = _checked(spec)
    if problems:
        raise SpecError(source, problems)
    return sweep


def _problems_beside(raw: dict, error: ValidationError) -> list[Problem]:
    """The checks across fields (check_sweep) of the spec without the fields Pydantic refused,
    so that one pass reports a type error and a range error together; nothing where the rest
    does not make a spec (a required field was among those refused)."""
    rest = json.loads(json.dumps(raw, default=str))
    for e in error.errors(include_url=False):
        parent, keys = rest, [k for k in e["loc"] if not isinstance(k, int)]
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and keys:
            parent.pop(keys[-1], None)
    try:
        return check_sweep(spec_from_dict(rest, strict=True))
    except ValidationError:
        return []


def load_spec(path: str | Path, seed_start: int | None = None) -> Sweep:
    """Read, check and resolve a spec file, with the command line's ``seed_start`` where given (SpecError
    on any problem, including a missing file and a seed_start the schema refuses)."""
    source = str(path) if seed_start is None else f"{path} with --seed-start {seed_start}"
    return parse_spec(spec_text(path, seed_start), source)


def spec_text(path: str | Path, seed_start: int | None = None) -> str:
    """A spec file's text as a sweep keeps it (spec.yaml, MLflow's copy), so that `vitsweep sync` and a
    resume read again the spec it ran: a spec that ``extends`` another written out whole (the other's
    fields, its own replacing them), and ``seed_start: N`` written into it where the command line gives one
    (its line replaced, or one added)."""
    text = _extended(Path(path), _read(path), ())
    if seed_start is None:
        return text
    line = f"seed_start: {seed_start}  # vitsweep --seed-start"
    own = re.compile(r"^seed_start:.*$", re.MULTILINE)
    return own.sub(line, text, count=1) if own.search(text) else f"{text.rstrip()}\n{line}\n"


EXTENDS = "extends"  # a spec's key naming the spec file (relative to its own folder) whose fields it starts from


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(str(path), [Problem("", str(path), f"cannot read the file: {error}")]) from None


def _extended(path: Path, text: str, seen: tuple[Path, ...]) -> str:
    """``text`` where it extends no spec; else the spec it extends (itself resolved the same way) with
    this one's fields merged in, mappings key by key, any other value replacing, as YAML."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # parse_spec says where
    if not isinstance(raw, dict) or EXTENDS not in raw:
        return text
    base = path.parent / str(raw.pop(EXTENDS))
    if base.resolve() in seen or base.resolve() == path.resolve():
        raise SpecError(str(path), [Problem(EXTENDS, str(base), "a spec cannot extend itself, even through others")])
    if not base.is_file():
        raise SpecError(str(path), [Problem(EXTENDS, str(base), "no such spec file (a path relative to this spec)")])
    merged = _merged(yaml.safe_load(_extended(base, _read(base), (*seen, path.resolve()))), raw)
    return f"# {path.name} extending {base.name}, written out whole\n" + yaml.safe_dump(merged, sort_keys=False)


def _merged(base: dict, own: dict) -> dict:
    """``base`` with ``own``'s values, as JSON Merge Patch (RFC 7386) merges: a mapping in both merged key
    by key, a null removing the key (data: {tau: null} where tau becomes an axis), any other value replaced."""
    out = dict(base)
    for key, value in own.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
