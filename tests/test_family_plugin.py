"""Experiment families as plugins: the papers' families come through the entry points of group
vitsweep.families, and a family from outside (examples/sparse_parity, sparse parity by a two-layer
network, Barak et al. 2022) installed into the environment runs its one-pass N* sweep through Ray
into MLflow and back through `vitsweep report`, with no change to services/."""

import json
import re
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

import services.spec
import vit_core.data as previous
from services.spec import FAMILIES, SpecError, parse_spec
from vit_core import api, train_pack
from vit_core import family as registry
from vit_core.family import families
from vit_core.train_config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sparse_parity"
VITSWEEP = Path(sys.executable).parent / "vitsweep"
PACKAGE = "vitsweep-sparse-parity"


def test_the_papers_families_are_entry_points_and_each_gives_a_spec():
    installed = families()
    assert {"li2023", "li2023_images", "jelassi2022", "jelassi2022_images"} <= set(installed) <= set(FAMILIES)
    assert installed["li2023"].kinds() == installed["li2023_images"].kinds() == ("vit", "cnn")
    assert installed["jelassi2022"].kinds() == ("positional", "vanilla", "linear")
    spec = parse_spec("name: x\nfamily: jelassi2022\nmodels: [positional]\nn_train: [10]")
    assert spec.family is installed["jelassi2022"]


def test_an_unknown_family_is_refused_naming_the_installed_ones():
    with pytest.raises(SpecError) as error:
        parse_spec("name: x\nfamily: nope\nmodels: [vit]\nn_train: [10]")
    (problem,) = error.value.problems
    assert problem.path == "family" and problem.value == "nope"
    assert all(name in problem.message for name in families())


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def example_installed():
    """The example family installed as its README says (offline: no build isolation, no
    dependencies to fetch), and uninstalled afterwards where this test installed it."""
    already = _pip("show", PACKAGE).returncode == 0
    if not already:
        done = _pip("install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(EXAMPLE))
        assert done.returncode == 0, done.stderr[-3000:]
    yield
    if not already:
        assert _pip("uninstall", "--yes", PACKAGE).returncode == 0


def vitsweep(*args: str) -> dict:
    """`vitsweep ARGS --json` in a fresh interpreter (it finds the families installed now): its JSON."""
    out = subprocess.run([str(VITSWEEP), *args, "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.system
def test_a_family_from_outside_runs_through_ray_into_mlflow_and_the_report(example_installed, tmp_path):
    schema = subprocess.run([str(VITSWEEP), "schema"], capture_output=True, text=True, check=True).stdout
    assert "sparse_parity" in json.loads(schema)["discriminator"]["mapping"]  # the schema lists it
    spec = str(EXAMPLE / "parity.yaml")
    ran = vitsweep("run", spec, "--home", str(tmp_path))
    assert ran["failed_trials"] == [] and ran["trainings"] == 32
    stars = ran["n_star"]
    assert set(stars) == {f"mlp n_bits={n}" for n in (8, 12, 16, 24)} and all(stars.values())
    parent = MlflowClient(ran["tracking_uri"]).get_run(ran["mlflow_parent_run_id"])
    assert parent.data.params["family"] == "sparse_parity"
    report = vitsweep("report", ran["sweep_id"], "--home", str(tmp_path), "--out", str(tmp_path / "report"))
    assert {c["label"]: c["n_star"] for c in report["cells"]} == stars
    assert {k: v for k, v in ran.items() if k in report} == {k: v for k, v in report.items() if k != "folder"}
    assert [c["alpha_effective"] for c in report["cells"]] == [8, 12, 16, 24]  # the family's scaling field
    fit = report["exponent"]["mlp"]
    assert fit["value"] is not None and fit["value"] > 0 and len(fit["points"]) == 4  # N* rises with n
    table = (tmp_path / "report" / "summary.md").read_text()
    assert "| cell | n |" in table and "N* (iterate) ~ (n)^k" in table and "theory" not in table  # it claims none


def test_a_family_that_fails_to_load_is_left_out_with_a_warning_naming_it(monkeypatch):
    broken = EntryPoint("broken", "no_such_package:Family", registry.GROUP)
    papers = list(registry.entry_points(group=registry.GROUP))
    monkeypatch.setattr(registry, "entry_points", lambda group: [*papers, broken])
    registry.families.cache_clear()
    try:
        with pytest.warns(UserWarning, match="family broken .*no_such_package"):
            found = registry.families()
        assert "broken" not in found and {"li2023", "jelassi2022"} <= set(found)
    finally:
        monkeypatch.undo()
        registry.families.cache_clear()


def _installed(files: dict[str, str], tmp_path: Path, monkeypatch):
    """The family of package ``my_family`` whose files are ``files`` (path -> code), registered as an
    installed entry point would be; removed again, with its modules, when the test ends."""
    for path, code in files.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    point = EntryPoint("sign_of_mean", "my_family:SignOfMean", registry.GROUP)
    papers = list(registry.entry_points(group=registry.GROUP))
    monkeypatch.setattr(registry, "entry_points", lambda group: [*papers, point])
    registry.families.cache_clear()
    family = registry.families()["sign_of_mean"]
    monkeypatch.setitem(services.spec.FAMILIES, family.name, services.spec.spec_class(family))
    yield family
    monkeypatch.undo()
    registry.families.cache_clear()
    for name in [m for m in sys.modules if m.partition(".")[0] == "my_family"]:
        del sys.modules[name]


@pytest.fixture
def readme_family(tmp_path, monkeypatch):
    """The smallest family of README "Add your own experiment", built from its code blocks alone
    (each opens with the file it is), registered as an installed entry point would be."""
    blocks = re.findall(r"```python\n# (my_family/\S+)\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert {path for path, _ in blocks} == {"my_family/__init__.py", "my_family/model.py"}
    yield from _installed(dict(blocks), tmp_path, monkeypatch)


@pytest.fixture
def previous_api_family(tmp_path, monkeypatch):
    """The same family as the README wrote it before its names moved (tests/previous_api: it imports
    BLOCK, TokenBatch and blocks_of from vit_core.data, now a deprecation alias of vit_core.tokens)."""
    folder = Path(__file__).parent / "previous_api"
    files = {path.relative_to(folder).as_posix(): path.read_text() for path in folder.rglob("*.py")}
    monkeypatch.delitem(sys.modules, "vit_core.data", raising=False)  # its warning is said on import
    yield from _installed(files, tmp_path, monkeypatch)


SIGN_SPEC = "name: readme\nfamily: sign_of_mean\nmodels: [linear]\nn_train: [64]\nseeds: 4"


def test_a_family_built_from_the_readme_text_alone_validates_and_learns(readme_family):
    spec = parse_spec(SIGN_SPEC)
    data, model, _ = spec.resolved_cell(spec.cells[0]).configs
    result = train_pack(data, model, TrainConfig(max_steps=300, batch_size=8, n_test=500), [64] * 4, [0, 1, 2, 3])
    errors = [r["test_error"] for r in result.records()]
    assert len(errors) == 4 and max(errors) < 0.2  # the mean token's sign is linear in it: learned


def test_a_pack_that_breaks_the_contract_is_refused_in_one_line_at_validate(readme_family):
    from my_family.model import LinearPack  # noqa: PLC0415  (the fixture installs my_family)

    del LinearPack.select  # the README's pack without its select
    with pytest.raises(SpecError) as error:
        parse_spec(SIGN_SPEC)
    (problem,) = error.value.problems
    assert (problem.path, problem.value) == ("family", "sign_of_mean")
    assert "lacks select" in problem.message and "\n" not in str(problem)


def test_a_family_written_against_the_previous_public_api_validates_and_learns_with_a_warning(previous_api_family):
    """A name of the public API that moves keeps its old place for a release (docs/extending.md,
    "Public API"): the family validates and trains, and its import of vit_core.data warns, naming
    vit_core.api."""
    with pytest.warns(DeprecationWarning, match=r"vit_core\.data is deprecated .* from vit_core\.api"):
        spec = parse_spec(SIGN_SPEC)  # validate builds one pack: the family's model module is imported
    data, model, _ = spec.resolved_cell(spec.cells[0]).configs
    result = train_pack(data, model, TrainConfig(max_steps=300, batch_size=8, n_test=500), [64] * 4, [0, 1, 2, 3])
    errors = [r["test_error"] for r in result.records()]
    assert len(errors) == 4 and max(errors) < 0.2

    for name in ("BLOCK", "TokenBatch", "TokenKind", "blocks_of"):  # what families imported from it
        assert getattr(previous, name) is getattr(api, name)
    assert previous.sample_tokens.__module__ == "vit_core.li2023.data"


def test_each_public_api_names_what_it_exports():
    """vit_core.api (families), services.stats.api (statistics), services.search.api (strategies):
    every name in ``__all__`` is there, and the families' module loads no torch until a pack is asked for."""
    code = (
        "import sys, importlib\n"
        "for name in ('vit_core.api', 'services.stats.api', 'services.search.api'):\n"
        "    module = importlib.import_module(name)\n"
        "    assert name != 'vit_core.api' or 'torch' not in sys.modules\n"
        "    assert all(hasattr(module, n) for n in module.__all__), name\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
