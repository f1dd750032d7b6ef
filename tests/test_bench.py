"""The device benchmark runs end to end on the CPU: its JSON carries the fields the docs quote,
and the models trained one at a time reach the same outcomes as in their packs."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_device_bench_on_the_cpu(tmp_path):
    out = tmp_path / "device.json"
    run = subprocess.run(
        [sys.executable, "bench/device.py", "--device", "cpu", "--alpha-every", "6", "--n-every", "10", "--seeds", "1",
         "--loop-every", "1", "--flop-every", "1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == json.loads(out.read_text())
    assert result["trainings"] == result["loop_trainings"] == 4  # 2 alpha* x the smallest N, for the ViT and the CNN
    assert result["loop_outcomes_equal_packed"] == 1.0
    assert set(result["flops_per_training"]) == {"vit", "cnn"}
    assert 0 < result["flop_fraction"] < 1
    assert result["packed_trainings_per_s"] > 0 and result["ratio_packed_vs_loop"] > 0
