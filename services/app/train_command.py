"""``vitsweep train``: one pack trained without Ray, every (N, seed) pair of one model kind at
once, on vit_core.li2023.configs' token data and model configs (the default family's). Its flags are
made from the fields of the config dataclasses, so their defaults and help texts live in one
place; the scaling field it reports is the data's family's (Family.scaling)."""

import dataclasses
import inspect
import json
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.app.printing import show_table
from vit_core.family import family_of
from vit_core.fields import ConfigError
from vit_core.li2023.configs import ModelConfig, TokenDataConfig, check_fits_data
from vit_core.train_config import TrainConfig

CONFIGS = {"Data": TokenDataConfig, "Model": ModelConfig, "Training": TrainConfig}


FLAG_NAMES = {"kind": "--model"}  # a friendlier flag than the field's own name


def _keyword(name: str, annotation: Any, option: Any) -> inspect.Parameter:
    """A keyword parameter of a command whose signature is built, not written (train)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)


def _flag(field: dataclasses.Field, panel: str) -> inspect.Parameter:
    """A typer option for one config field: its default, help text and allowed values."""
    decl = _flag_name(field.name)
    if field.type is bool:
        decl = f"{decl}/--no-{decl[2:]}"
    option = typer.Option(field.default, decl, help=field.metadata["help"], rich_help_panel=panel)
    return _keyword(field.name, field.type, option)


def _flag_name(field: str) -> str:
    return FLAG_NAMES.get(field, "--" + field.replace("_", "-"))


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: expected comma-separated integers such as 10,20,40") from None
    if not values or min(values) < 1:
        raise typer.BadParameter(f"{text!r}: expected positive integers such as 10,20,40")
    return values


def _device(name: str) -> str:
    import torch  # noqa: PLC0415  (torch loads on use)

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise typer.BadParameter(f"{name!r}: expected cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise typer.BadParameter(f"{name!r}: {torch.cuda.device_count()} CUDA devices are visible; use cpu or auto")
    return name


def _configs(values: dict[str, Any]) -> tuple[TokenDataConfig, ModelConfig, TrainConfig]:
    """Build the three configs from the flags; a bad value is a usage error (exit code 2)."""
    try:
        data, model, training = (
            cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)}) for cls in CONFIGS.values()
        )
        check_fits_data(model, data.dim, data.n_patterns)
        return data, model, training
    except ConfigError as error:
        raise typer.BadParameter(
            f"{error.value!r}: {error.allowed}", param_hint=f"'{_flag_name(error.field)}'"
        ) from None


def _per_n_rows(rows: list[dict]) -> list[list[str]]:
    fmt = lambda v, sweep: "-" if v is None else format(v, sweep)  # noqa: E731
    return [
        [
            str(r["n"]),
            str(r["models"]),
            fmt(r["success_rate"], ".2f"),
            fmt(r["mean_test_error"], ".4f"),
            fmt(r["median_iterations_to_zero"], ".0f"),
            str(r["settled"]),
            str(r["diverged"]),
            fmt(r["mean_attention_mass"], ".3f"),
        ]
        for r in rows
    ]


def train(**values: Any) -> None:
    """Train every (N, seed) pair of one model kind as one pack and report outcomes per N."""
    import torch  # noqa: PLC0415  (torch loads on use)

    from vit_core import train_pack  # noqa: PLC0415  (torch loads on use)

    data, model, training = _configs(values)
    n_values, seeds = values["n"], list(range(values["seed_start"], values["seed_start"] + values["seeds"]))
    if values["threads"]:
        torch.set_num_threads(values["threads"])
    n_train = [n for n in n_values for _ in seeds]
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{model.kind}: {len(n_train)} models", total=training.max_steps)

        def report(step: int, left: int, at_zero: int) -> None:
            done = step if left else training.max_steps
            training_now = f"{model.kind}: {left} of {len(n_train)} models training, {at_zero} at zero test error"
            bar.update(task, completed=done, description=training_now)

        result = train_pack(
            data, model, training, n_train, seeds * len(n_values), device=values["device"], progress=report
        )
    rows, family = result.by_n(), family_of(data)
    field, value, effective = family.scaling.field, getattr(data, family.scaling.field), family.scaling_value(data)
    show_table(
        f"{model.kind}, {family.scaling.name}={value} (effective {effective:.4f}), "
        f"{len(seeds)} seeds, {result.wall_s:.1f} s",
        ["N", "models", "success", "test error", "steps to 0", "settled", "diverged", "attn mass"],
        _per_n_rows(rows),
        left=(),
    )
    if values["json"]:
        summary = {
            "model": model.kind,
            field: value,
            f"effective_{field}": effective,
            "trainings": len(n_train),
            "wall_s": round(result.wall_s, 3),
            "per_n": rows,
            "models": result.records(),
            "config": {name.lower(): dataclasses.asdict(cfg) for name, cfg in zip(CONFIGS, (data, model, training))},
        }
        print(json.dumps(summary))


_RUN_FLAGS = [
    _keyword(
        "n",
        str,
        typer.Option(
            "10,20,40,80", "--n", help="training-set sizes N, comma-separated", parser=_int_list, rich_help_panel="Pack"
        ),
    ),
    _keyword("seeds", int, typer.Option(8, "--seeds", min=1, help="seeds per N", rich_help_panel="Pack")),
    _keyword("seed_start", int, typer.Option(0, "--seed-start", min=0, help="first seed", rich_help_panel="Pack")),
    _keyword(
        "device",
        str,
        typer.Option("cpu", "--device", help="cpu, cuda, cuda:N, or auto", parser=_device, rich_help_panel="Pack"),
    ),
    _keyword(
        "threads",
        int,
        typer.Option(0, "--threads", min=0, help="torch threads (0: torch's default)", rich_help_panel="Pack"),
    ),
    _keyword("json", bool, typer.Option(False, "--json", help="end stdout with one JSON object of the results")),
]
train.__signature__ = inspect.Signature(
    [_flag(f, panel) for panel, cls in CONFIGS.items() for f in dataclasses.fields(cls)] + _RUN_FLAGS
)
