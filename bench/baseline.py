"""A git worktree of a baseline revision, for the benchmarks' ratios measured in the same run, with that
revision's own entry points (its families and strategies) written beside its code: a process run from
the tree (its folder first on sys.path, or on PYTHONPATH) finds them before the installed vitsweep's,
which name modules the baseline may not have (the strategies moved to services/search and Paper A's
family to vit_core/li2023)."""

import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def worktree(revision: str, path: Path) -> Iterator[Path]:
    """``path`` holding a detached worktree of ``revision`` and its entry points, removed afterwards."""
    subprocess.run(["git", "worktree", "add", "--detach", str(path), revision], cwd=ROOT, check=True)
    try:
        write_entry_points(path)
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


def write_entry_points(tree: Path) -> None:
    """The tree's distribution metadata as an egg-info folder in it, read from its pyproject.toml:
    the least importlib.metadata reads (name, version, entry points)."""
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    info = tree / f"{project['name']}.egg-info"
    info.mkdir(exist_ok=True)
    (info / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    (info / "entry_points.txt").write_text(
        "\n".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) for group, points in groups.items()
        )
    )
