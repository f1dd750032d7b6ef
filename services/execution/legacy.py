"""The readers of Ray Tune trial state saved by an older vitsweep (the searcher's and the progress
callback's), each with the date its format changed: plain functions on the saved dicts that return
them as today's code reads them. Drop one when no sweep of its age is left to resume."""


def searcher_state(saved: dict) -> dict:
    """PlanSearcher's saved state: before 2026-11-25 it did not say whether its search had ended;
    then, as those versions read it, it had ended where no pack was queued or in flight."""
    ended = not saved.get("queue") and not saved.get("in_flight")
    return {"search_finished": ended} | saved


def progress_state(saved: dict) -> dict:
    """The progress callback's saved counts: before 2026-11-24 they had no ``train_s``; before
    2026-12-06 no ``sweep_id`` (None: the run of this process)."""
    return {"train_s": 0.0, "sweep_id": None} | saved


def searcher_attributes(pickled: dict) -> dict:
    """PlanSearcher as Tune pickled it: before 2026-12-06 without ``sweep_id`` (None: the run of this process)."""
    return {"sweep_id": None} | pickled
