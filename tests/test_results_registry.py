"""The results registry (services.store.registry): `vitsweep report SWEEP --publish` writes a recorded
sweep's entry, results/<spec>.json and .md, with its provenance as its record holds it; `vitsweep
results` names each entry current or stale (its spec or vit_core changed since); and every entry the
README quotes is current. Read from the shared two-sweep store: no Ray, no training."""

import json

from conftest import SYNTHETIC_SPEC
from typer.testing import CliRunner

from services.app.cli import app
from services.spec import parse_spec
from services.store import provenance, registry
from services.store.cache import vit_core_hash

runner = CliRunner()


def _published(two_sweeps, tmp_path):
    """sweep-b published into tmp_path/results, with its spec as it is now in tmp_path/sweeps."""
    results, specs = tmp_path / "results", tmp_path / "sweeps"
    specs.mkdir()
    (specs / "synthetic.yaml").write_text(SYNTHETIC_SPEC)
    out = runner.invoke(app, ["report", "sweep-b", "--home", str(two_sweeps), "--publish", "--results", str(results)])
    assert out.exit_code == 0, out.output
    return results, specs


def test_publishing_a_recorded_sweep_writes_its_entry_with_the_hashes_its_record_holds(two_sweeps, tmp_path):
    results, specs = _published(two_sweeps, tmp_path)
    assert sorted(p.name for p in results.iterdir()) == ["synthetic.json", "synthetic.md"]
    document = json.loads((results / "synthetic.json").read_text())
    assert document["format"] == 1 and document["spec"] == "synthetic" and document["sweep_id"] == "sweep-b"
    entry = registry.read(results / "synthetic.json")
    assert entry.spec_hash == provenance.spec_hash(parse_spec(SYNTHETIC_SPEC).spec)
    assert entry.vit_core_hash == vit_core_hash() and entry.machine_recorded and entry.wall_s == 12.5
    assert entry.commit == provenance.git_commit() and entry.date is not None
    vit_hard = next(c for c in entry.n_star if c.cell == "vit alpha_star=0.1")
    assert vit_hard.n_star == 40 and vit_hard.known  # the ViT's N* at alpha* = 0.1 in sweep-b (conftest.two_sweeps)
    assert "vit" in {f.group for f in entry.exponents}  # the CNN's last cell has a failed pack
    text = (results / "synthetic.md").read_text()
    assert "sweep-b" in text and entry.spec_hash in text and "| vit alpha_star=0.1 | 40" in text
    assert registry.status(entry, specs) == registry.CURRENT


def test_an_entry_is_stale_once_its_spec_or_vit_core_changed(two_sweeps, tmp_path):
    results, specs = _published(two_sweeps, tmp_path)
    entry = registry.read(results / "synthetic.json")
    (specs / "synthetic.yaml").write_text("# a comment changes nothing measured\n" + SYNTHETIC_SPEC)
    assert registry.status(entry, specs) == registry.CURRENT
    (specs / "synthetic.yaml").write_text(SYNTHETIC_SPEC.replace("seeds: 4", "seeds: 5"))
    assert registry.status(entry, specs) == "stale: spec changed"
    (specs / "synthetic.yaml").write_text(SYNTHETIC_SPEC)
    older = entry.model_copy(update={"vit_core_hash": "0123456789abcdef"})
    assert registry.status(older, specs) == "stale: vit_core changed"
    (specs / "synthetic.yaml").unlink()
    assert registry.status(entry, specs).startswith("stale: spec gone")


def test_results_lists_the_entries_and_check_fails_on_a_stale_one_the_readme_quotes(two_sweeps, tmp_path):
    results, specs = _published(two_sweeps, tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("Nothing quoted.\n")
    args = ["results", "--results", str(results), "--specs", str(specs), "--readme", str(readme), "--check"]
    listed = runner.invoke(app, args)
    assert listed.exit_code == 0, listed.output
    assert "synthetic" in listed.stdout and "sweep-b" in listed.stdout and "current" in listed.stdout
    (specs / "synthetic.yaml").write_text(SYNTHETIC_SPEC.replace("seeds: 4", "seeds: 5"))
    assert runner.invoke(app, args).exit_code == 0  # stale, but quoted nowhere
    readme.write_text("N* as measured: [results/synthetic.md](results/synthetic.md)\n")
    stale = runner.invoke(app, args)
    assert stale.exit_code == 1 and "stale: spec changed" in stale.output
    readme.write_text("See results/missing.md\n")
    assert runner.invoke(app, args).exit_code == 1  # quoted, and no such entry


def test_every_entry_the_readme_quotes_is_published_and_current():
    """The README's measured numbers come from entries measured at the spec and vit_core as they are
    now; a stale one is measured again (`vitsweep run sweeps/SPEC.yaml`, then `vitsweep report SPEC
    --publish`) before the README quotes it."""
    quoted = registry.quoted(registry.README)
    have = {entry.spec: entry for entry in registry.entries(registry.RESULTS)}
    assert quoted - set(have) == set(), "the README quotes entries results/ does not hold"
    stale = {name: registry.status(have[name]) for name in quoted}
    assert {name: why for name, why in stale.items() if why != registry.CURRENT} == {}


def test_an_entry_paces_the_eta_of_its_own_spec_scaled_to_the_slots_from_the_cpus_of_its_machine(two_sweeps, tmp_path):
    results, _ = _published(two_sweeps, tmp_path)
    sweep = parse_spec(SYNTHETIC_SPEC)
    entry = registry.read(results / "synthetic.json")
    registry.write(entry.model_copy(update={"machine": "Some CPU, 4 CPUs, Linux x86_64"}), results)
    cpus_per_trial = sweep.resources.cpus_per_trial
    assert registry.measured_wall_s(sweep, 2, results) == 12.5 * int(4 // cpus_per_trial) / 2
    assert registry.measured_wall_s(parse_spec(SYNTHETIC_SPEC.replace("seeds: 4", "seeds: 5")), 2, results) is None
    (results / "synthetic.json").write_text("{}")
    assert registry.measured_wall_s(sweep, 2, results) is None  # not an entry: no pace, no error
