"""Entry script for the Ray cluster launcher: `ray submit docker/cluster.yaml docker/submit_sweep.py
SPEC [vitsweep run options]` runs `vitsweep run SPEC ...` on the head node, where the cluster is
already running (so Ray Tune uses it), from the project folder of vitsweep's image.
"""

import os
import sys

PROJECT = "/opt/vitsweep"  # where docker/Dockerfile puts the project

if __name__ == "__main__":
    os.environ.setdefault("RAY_ADDRESS", "auto")  # the cluster this head belongs to
    os.chdir(PROJECT)
    from services.app.cli import app

    app(["run", *sys.argv[1:], "--home", "/ray-storage/runs"], prog_name="vitsweep")
