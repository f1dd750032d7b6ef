"""Every reader of what an older vitsweep wrote, in one place: plain functions (no imports) on the
saved dicts, or on what MLflow returns, that give them back as today's code reads them. Each says
what its older format lacked or held; newer files also say their format by number (``"format"``:
the home's marker, result.json, cache entries, a report's view), read by their own classes. Drop
a reader when no home, store or sweep of its age is left to read.

Sections: results and specs (services.results, services.spec), round planners' states
(services.search), MLflow records (services.store.tracking), Ray Tune trial state
(services.execution.ray_tune)."""


# Results and specs


def record_row(row: dict) -> dict:
    """A model record (a table row, or vit_core's dict): an older one named its seed ``seeds``."""
    row = dict(row)
    if "seeds" in row:
        row["seed"] = row.pop("seeds")
    return row


def cell_result(saved: dict) -> dict:
    """A cell of a saved SweepResult: an older one has no ``started_at`` and ``ended_at``."""
    return {"started_at": None, "ended_at": None} | saved


def sweep_result(saved: dict) -> dict:
    """A saved SweepResult: an older one has no ``slots`` (0: not known)."""
    return {"slots": 0} | saved


def search_section(raw: dict, fields) -> dict:
    """A recorded spec's search section with only its own strategy's ``fields``: sweeps recorded
    before the strategies were classes of their own hold every one's."""
    return {k: v for k, v in raw.items() if k in fields}


def removed_training_fields(raw: dict) -> dict:
    """A recorded spec: an older one's training section may have ``compile`` (the compiled step,
    removed), and its axes section listed that field with every other."""
    return raw | {
        section: {k: v for k, v in raw[section].items() if k != "compile"}
        for section in ("training", "axes")
        if isinstance(raw.get(section), dict)
    }


def trial_config(config: dict) -> dict:
    """A Ray Tune trial's config (services.search.packs.TrialConfig): in an older one its pack and
    a searcher's sampled values and resolved cell are keys of the config itself, not of ``trial``."""
    return config.get("trial", config)


# Round planners' saved states


def planner_state(saved: dict) -> dict:
    """A round planner's saved state: an older one has no ``failed`` cells."""
    return {"failed": []} | saved


def bracket_states(cells: list[dict]) -> tuple[list[dict], set[int]]:
    """The N* search's saved brackets, and the cells that had failed: in an older state a bracket
    holds its cell's ``failed`` flag itself."""
    cells = [dict(c) for c in cells]
    return cells, {i for i, c in enumerate(cells) if c.pop("failed", False)}


# MLflow records


def cell_of_run(tags: dict, run_name: str, cell_tag: str, by_label: dict):
    """The cell of a child run: its ``cell_tag`` where it has one; a run recorded before that tag
    existed is matched by its name, the cell's label (``by_label``: label -> cell)."""
    return None if cell_tag in tags else by_label[run_name]


def whole_record(marker: str | None, status: str) -> bool:
    """Whether a sweep's parent run holds its whole record: its record tag says so; a parent
    logged before sweeps were recorded live has no such tag, and was whole once its
    status left RUNNING (set last)."""
    return marker == "whole" if marker is not None else status != "RUNNING"


# Ray Tune trial state (the searcher's and the progress callback's)


def searcher_state(saved: dict) -> dict:
    """PlanSearcher's saved state: an older one does not say whether its search had ended;
    as those versions read it, it had ended where no pack was queued or in flight."""
    ended = not saved.get("queue") and not saved.get("in_flight")
    return {"search_finished": ended} | saved
