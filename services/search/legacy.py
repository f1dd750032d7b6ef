"""The readers of round planners' states saved by an older vitsweep, each with the date its
format changed: plain functions on the saved dicts that return them as today's planners read
them. Drop one when no sweep of its age is left to resume."""


def planner_state(saved: dict) -> dict:
    """A round planner's saved state: before 2026-11-24 it had no ``failed`` cells."""
    return {"failed": []} | saved


def bracket_states(cells: list[dict]) -> tuple[list[dict], set[int]]:
    """The N* search's saved brackets, and the cells that had failed: before 2026-11-24 a bracket
    held its cell's ``failed`` flag itself."""
    cells = [dict(c) for c in cells]
    return cells, {i for i, c in enumerate(cells) if c.pop("failed", False)}
