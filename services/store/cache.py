"""Every trained model's results, stored by content, so that no sweep trains the same model twice.

A model's results depend only on its data, model and training configs, its N and seed, the code
of ``vit_core``, torch's version and the device type (a pack trains each model as it would alone),
so a hash of those is its key. Entries are JSON files written atomically (a temporary file, then
``os.replace``): a crash at any moment leaves either no entry or a whole one, and several trials,
or several nodes sharing a folder, may write at once. The default folder is ``HOME/cache``; on a
multi-node cluster give a folder every node mounts at the same path.
"""

import dataclasses
import hashlib
import json
import warnings
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import vit_core
from services.results import CURVES_KEPT
from services.store.files import CorruptFile, read_json, write_atomic

if TYPE_CHECKING:
    from vit_core.training import PackResult


@cache
def vit_core_hash() -> str:
    """A hash of vit_core's source: any change to the science invalidates every entry."""
    digest = hashlib.sha256()
    root = Path(vit_core.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _config(cfg) -> dict:
    return {"type": type(cfg).__qualname__, **dataclasses.asdict(cfg)}


def model_keys(
    data, model, training, n_train: list[int], seeds: list[int], device: str, lrs: list[float] | None = None
) -> list[str]:
    """The cache key of each (N, seed) model trained with these configs (and step size lrs[k],
    which replaces the training config's in model k's key)."""
    base = {
        "data": _config(data),
        "model": _config(model),
        "vit_core": vit_core_hash(),
        "torch": version("torch"),
        "device": device.split(":")[0],
    }
    return [
        hashlib.sha256(
            json.dumps(
                base | {"training": _config(dataclasses.replace(training, lr=lr)), "n": n, "seed": s},
                sort_keys=True,
                default=str,
            ).encode()
        ).hexdigest()
        for n, s, lr in zip(n_train, seeds, lrs or [training.lr] * len(seeds))
    ]


def model_entries(result: "PackResult") -> list[dict]:
    """One cache entry per model of a pack: its N, its records (one, or one per evaluated N in
    one_pass), its kept curves at the pack's evaluation steps, and its snapshots."""
    steps = result.eval_steps.tolist()
    return [
        {
            "n_train": int(result.n_train[k]),
            "records": result.model_records(k),
            "eval_steps": steps,
            "curves": {name: values[:, k].tolist() for name, values in result.curves.items() if name in CURVES_KEPT},
            "snapshots": {name: values[k].tolist() for name, values in result.snapshots.items()},
        }
        for k in range(len(result.seeds))
    ]


class ResultCache:
    """A folder of model entries by key; ``ResultCache(None)`` stores nothing (cache off)."""

    FORMAT = 1  # an entry's format number, written in it
    KEYS = ("n_train", "records", "eval_steps", "curves", "snapshots")  # what every reader of an entry reads

    def __init__(self, folder: str | Path | None):
        self.folder = Path(folder) if folder else None

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The entry at ``key``, or None: none there, or one that does not read back (truncated,
        overwritten, a newer format), which its model is trained again to replace, with a warning."""
        if self.folder is None:
            return None
        try:
            return read_json(self._path(key), "cache entry", self.FORMAT, self.KEYS)
        except FileNotFoundError:
            return None
        except CorruptFile as corrupt:
            warnings.warn(f"{corrupt}: its model is trained again", stacklevel=2)
            return None

    def put(self, key: str, entry: dict) -> None:
        if self.folder is None:
            return
        write_atomic(self._path(key), json.dumps({"format": self.FORMAT} | entry))

    def __len__(self) -> int:
        return 0 if self.folder is None else sum(1 for _ in self.folder.glob("*/*.json"))


def curve_sums(entries: list[dict]) -> list[dict]:
    """What a cell's mean curves need from a trial's models: per group of models evaluated at the
    same steps, per curve and N, the sum and count of the finite values at every step (and the sum
    of the snapshots' ``scores``, Paper B's learned attention, per N, with the smallest seed's own)."""
    groups: dict[tuple, list[dict]] = {}
    for entry in entries:
        groups.setdefault(tuple(entry["eval_steps"]), []).append(entry)
    parts = []
    for steps, group in groups.items():
        part: dict = {}
        for n in sorted({e["n_train"] for e in group}):
            mine = [e for e in group if e["n_train"] == n]
            for name in CURVES_KEPT:
                if name not in mine[0]["curves"]:
                    continue
                values = np.array([e["curves"][name] for e in mine], dtype=float).T  # (steps, models)
                finite = np.isfinite(values)
                if finite.any():
                    part.setdefault(name, {})[str(n)] = {
                        "steps": list(steps),
                        "sum": np.where(finite, values, 0).sum(1).tolist(),
                        "count": finite.sum(1).tolist(),
                    }
            if "scores" in mine[0]["snapshots"]:
                first = min(mine, key=lambda e: e["records"][0]["seed"])
                part.setdefault("scores", {})[str(n)] = {
                    "sum": np.sum([e["snapshots"]["scores"] for e in mine], axis=0).tolist(),
                    "count": len(mine),
                    "seed": first["records"][0]["seed"],
                    "one": first["snapshots"]["scores"],
                }
        parts.append(part)
    return parts
