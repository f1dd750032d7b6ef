"""The layers as the folder tree shows them. vit_core never imports services; only
services/execution imports Ray; every module of services sits in the layer its folder names
(services/*.py at the bottom); the store knows neither report nor statistics; and each command
loads only what it needs, checked in sys.modules after the command ran in a fresh interpreter."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "mlflow", "matplotlib")
RUN = """
import json, sys
from services.app.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


def loaded_by(*args: str) -> set[str]:
    """The heavy packages a fresh interpreter has loaded after `vitsweep ARGS`."""
    out = subprocess.run(
        [sys.executable, "-c", RUN.format(heavy=HEAVY), *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def imports(path: Path) -> set[str]:
    """The top-level packages a module imports, wherever in the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "vit_core").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_vit_core_is_torch_and_numpy_only(path):
    assert imports(path) <= {"torch", "numpy", "vit_core", *sys.stdlib_module_names}


@pytest.mark.parametrize("path", sorted((ROOT / "services").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_execution_layer_imports_ray(path):
    assert "ray" not in imports(path) or "execution" in path.parts


def test_the_notebook_api_is_a_face_of_services():
    assert imports(ROOT / "vitsweep" / "__init__.py") <= {"services", *sys.stdlib_module_names}


def test_validate_loads_neither_torch_ray_mlflow_nor_matplotlib():
    assert loaded_by("validate", "sweeps/smoke.yaml") == set()


def test_status_of_a_home_without_tune_state_loads_none_of_them(tmp_path):
    assert loaded_by("status", "--home", str(tmp_path)) == set()


def test_report_and_export_load_no_ray(two_sweeps, tmp_path):
    """Read back as the run recorded them, the report and the cells need MLflow alone. Recomputed, the
    summary's premises are read from the models as built and its information floor draws the seeds'
    samples: vit_core, with torch, as training does. None of them starts or imports Ray."""
    home = str(two_sweeps)
    assert loaded_by("report", "--home", home, "--out", str(tmp_path / "report")) == {"mlflow"}
    assert (tmp_path / "report" / "summary.md").exists()  # it did write the report
    recomputed = loaded_by("report", "--home", home, "--out", str(tmp_path / "again"), "--recompute")
    assert recomputed == {"mlflow", "matplotlib", "torch"}
    assert loaded_by("export", "--home", home, "--table", "cells", "--out", str(tmp_path / "cells.csv")) == {"mlflow"}
    assert loaded_by("export", "--home", home, "--out", str(tmp_path / "models.csv")) == {"mlflow"}
    assert (tmp_path / "models.csv").exists() and (tmp_path / "cells.csv").exists()


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports, wherever in the module, type-checking ones too."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for package in ("services", "vit_core")
        for path in (ROOT / package).rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name and m not in ("services", "vit_core")}
    return graph


# services' layers, bottom up: a module imports only from its own layer and those below it
LAYERS = (
    (
        "services.process",
        "services.analysis",
        "services.ratios",
        "services.legacy",
        "services.results",
        "services.plotting",
    ),
    ("services.spec",),  # the schema, the strategies, a cell resolved, the checks
    ("services.search",),  # each strategy's round planner, the packs
    ("services.sweep_run",),  # one run of a sweep: its trials' outcomes, decoded once, and who follows them
    ("services.stats",),  # the summary, its fits, the registered statistics
    ("services.report",),  # text, figures, frames, comparisons
    ("services.store",),  # state, cache, MLflow
    ("services.estimate",),  # the plan: pilots, worlds, a search played out (no Ray)
    ("services.execution",),  # Ray: the only layer that imports it
    ("services.app",),  # runs, plan, the command line
)


def layer_of(module: str) -> int:
    """The layer of a module of services: its longest prefix's in LAYERS."""
    prefix = max((p for layer in LAYERS for p in layer if module == p or module.startswith(p + ".")), key=len)
    return next(i for i, layer in enumerate(LAYERS) if prefix in layer)


def test_every_module_of_services_sits_in_a_layer_and_imports_none_above_it():
    below = [
        f"{name} (layer {layer_of(name)}) imports {other} (layer {layer_of(other)})"
        for name, imported in import_graph().items()
        if name.startswith("services.") and name != "services"
        for other in imported
        if other.startswith("services.")
        and layer_of(other) > layer_of(name)
        and not any(o.startswith(other + ".") for o in imported)  # `from package import module`: the module's
    ]
    assert below == []


def test_no_module_of_services_or_vit_core_imports_itself_back():
    """No circle among the project's modules, counting every import, type-checking ones too."""
    graph = import_graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, f"import circle: {' -> '.join(path[path.index(name) :] + [name])}"
        if name not in done:
            for other in sorted(graph[name]):
                visit(other, [*path, name])
            done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_each_folder_of_services_is_its_own_layer():
    """A folder's modules sit in its layer, and a module of services/ itself (the readers of older
    formats among them) at the bottom: no module is placed in a layer other than its folder's."""
    placed = [
        name
        for name in import_graph()
        if name.startswith("services.") and name.count(".") >= 2 and LAYERS[layer_of(name)] != (name.rsplit(".", 1)[0],)
    ]
    assert placed == []


def test_the_store_imports_neither_report_nor_statistics():
    """It is handed what it logs of a summary as plain values (store.logged), built in services.app."""
    above = [
        f"{name} imports {other}"
        for name, imported in import_graph().items()
        if name.split(".")[:2] == ["services", "store"]
        for other in imported
        if other.split(".")[:2] in (["services", "report"], ["services", "stats"])
    ]
    assert above == []


def test_a_test_not_marked_system_is_refused_a_ray_of_its_own():
    """The fast tier's guard (tests/conftest.py): `make test-fast` runs every test not marked
    ``system``, so such a test may not start Ray in its process; the refusal names the mark."""
    with pytest.raises(pytest.fail.Exception, match=r"mark it @pytest.mark.system"):
        ray.init()
