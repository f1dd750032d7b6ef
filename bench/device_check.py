"""Issue 68's GPU check in one command of at most 8 minutes, its results as JSON files in the folder --out names.

    make device-check OUT=DIR          # or: .venv/bin/python bench/device_check.py --out DIR

Two parts, in this order, each a subprocess cut off where the 8 minutes would run out (its output kept in a .log
beside its JSON, and the packs it finished in steps.json):
  steps.json   bench/steps.py --device cuda: W2's and W3's packs on the GPU: ms a step, model-steps per second,
               matmul share, kernels launched a step and the GPU's busy share;
  job.json     the main job (sweeps/sample_complexity.yaml) through `vitsweep run --no-cache --json`, on a copy
               whose trials each ask for --gpus-per-trial of the GPU (sharing it): its summary and end-to-end s.
summary.json says what ran, where and how each part ended. With no CUDA device both parts run on the CPU at toy
sizes (W2's CNN pack for one step; the main job's shape at toy sizes), and summary.json says so: what `make
test` runs (--cpu: the same where there is a GPU).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.onepass import on_gpus, vitsweep  # noqa: E402
from bench.steps import WORKLOADS  # noqa: E402

BUDGET_S = 450  # 8 minutes less this process's start and the parts' own start-up
STEPS_SHARE = 0.55  # of what is left when the step bench starts; the job gets the rest
GPU_STEPS = 200  # a pack's timed steps on a GPU (a few ms each)
TOY = {  # the CPU fallback's job: the main job's shape at toy sizes
    "data": {"n_tokens": 24},
    "model": {"width": 16},
    "training": {"max_steps": 20, "n_test": 100, "eval_subset": 50},
    "axes": {"alpha_star": [0.4]},
    "seeds": 2,
}


def steps_part(folder: Path, gpu: bool, seconds: float) -> dict:
    """W2's and W3's step rates by bench/steps.py within ``seconds`` (a toy run of W2's CNN pack on the CPU)."""
    out, log = folder / "steps.json", folder / "steps.log"
    sizes = ["--steps", str(GPU_STEPS)] if gpu else ["--workloads", "W2", "--models", "cnn", "--steps", "1"]
    command = [sys.executable, str(ROOT / "bench" / "steps.py"), "--device", "cuda" if gpu else "cpu", *sizes]
    try:
        run = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=seconds)
        text, ended = run.stdout + run.stderr, f"exit {run.returncode}"
    except subprocess.TimeoutExpired as cut:
        text, ended = _text(cut.stdout) + _text(cut.stderr), f"cut off after {seconds:.0f} s"
    log.write_text(text)
    if not out.exists():  # cut off or failed: the packs it finished, from its output
        rows = [json.loads(line) for line in text.splitlines() if line.startswith('{"workload"')]
        out.write_text(json.dumps({"rows": rows, "ended": ended}, indent=2))
    return {"ended": ended, "rows": len(json.loads(out.read_text())["rows"])}


def job_part(folder: Path, scratch: Path, gpu: bool, gpus_per_trial: float, seconds: float) -> dict:
    """The main job through `vitsweep run` within ``seconds``, its trials sharing the GPU (on the CPU: at toy
    sizes); its spec copy and home in ``scratch``."""
    main = ROOT / WORKLOADS["W2"]
    spec = on_gpus(main, gpus_per_trial, scratch) if gpu else toy(main, scratch)
    try:
        result, ended = vitsweep(ROOT, spec, scratch / "home", folder / "job.log", timeout=seconds), "exit 0"
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        result, ended = {"error": str(error)[-3000:]}, type(error).__name__
    (folder / "job.json").write_text(json.dumps(result | {"spec": spec.name, "ended": ended}, indent=2))
    return {"ended": ended, "trainings": result.get("trainings")}


def toy(spec: Path, folder: Path) -> Path:
    """A copy of ``spec`` at the toy sizes of TOY, in ``folder``."""
    text = yaml.safe_load(spec.read_text())
    for key, value in TOY.items():
        text[key] = text[key] | value if isinstance(value, dict) else value
    path = folder / spec.name
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return path


def _text(output: bytes | str | None) -> str:
    """What a cut-off subprocess had printed (bytes or str, or None)."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder the JSON files are written to")
    parser.add_argument("--gpus-per-trial", type=float, default=0.125, help="each job trial's share of the GPU")
    parser.add_argument("--cpu", action="store_true", help="the CPU fallback even where there is a GPU")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start, gpu = time.perf_counter(), torch.cuda.is_available() and not args.cpu
    summary: dict = {
        "cuda": gpu,
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "torch": torch.__version__,
        "fallback": None if gpu else "no CUDA device (or --cpu): both parts on the CPU at toy sizes",
    }
    summary["steps"] = steps_part(args.out, gpu, STEPS_SHARE * BUDGET_S)
    left = max(60.0, BUDGET_S - (time.perf_counter() - start))
    with tempfile.TemporaryDirectory(prefix="vitsweep-device-check-") as scratch:
        summary["job"] = job_part(args.out, Path(scratch), gpu, args.gpus_per_trial, left)
    summary["wall_s"] = round(time.perf_counter() - start, 1)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
