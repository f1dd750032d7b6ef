import numpy as np
import pytest
import torch
from conftest import write_idx

from services.report import text as report
from services.results import CellResult, ModelRecord
from services.spec import parse_spec
from services.spec.schema import refresh
from services.stats.summarize import summarize
from vit_core import ConfigError, TokenDataConfig, TokenKind, keep_mask, sample_tokens
from vit_core.family import families
from vit_core.image_config import ImageTokenConfig
from vit_core.images import sample_images
from vit_core.li2023.configs import ModelConfig
from vit_core.li2023.family import Li2023Images
from vit_core.seeding import Stream
from vit_core.sparsify import image_keep, sparsified_name
from vit_core.train_config import TrainConfig
from vit_core.training import build, evaluate, sample, train_pack
from vit_core.training.scoring import sparsified_scores


@pytest.fixture
def facts():
    b = sample_tokens(TokenDataConfig(n_tokens=40, alpha_star=0.25), 300, seed=0)
    return b.kinds.numpy(), b.noise_norm.numpy()


def test_all_keeps_everything(facts):
    kinds, noise = facts
    assert keep_mask(kinds, noise, "all", 0, np.random.default_rng(0)).all()


def test_random_removes_exactly_k_per_sample(facts):
    kinds, noise = facts
    keep = keep_mask(kinds, noise, "random", 7, np.random.default_rng(0))
    assert ((~keep).sum(1) == 7).all()
    removed_kinds = kinds[~keep]
    assert (removed_kinds == TokenKind.RELEVANT).any()  # random removal does not look at kinds


def test_label_irrelevant_removes_only_irrelevant_tokens(facts):
    kinds, noise = facts
    keep = keep_mask(kinds, noise, "label_irrelevant", 12, np.random.default_rng(0))
    assert ((~keep).sum(1) == 12).all()
    assert (kinds[~keep] == TokenKind.IRRELEVANT).all()


def test_label_irrelevant_removes_all_when_fewer_than_k(facts):
    kinds, noise = facts
    n_irr = (kinds == TokenKind.IRRELEVANT).sum(1)
    keep = keep_mask(kinds, noise, "label_irrelevant", 39, np.random.default_rng(0))
    assert ((~keep).sum(1) == n_irr).all()
    assert (kinds[keep] != TokenKind.IRRELEVANT).all()


def test_noisiest_removes_the_k_largest_noise_norms(facts):
    kinds, noise = facts
    keep = keep_mask(kinds, noise, "noisiest", 5, np.random.default_rng(0))
    assert ((~keep).sum(1) == 5).all()
    assert (noise[~keep].reshape(-1, 5).min(1) >= np.where(keep, noise, -1).max(1)).all()


def test_sparsified_data_carries_its_mask():
    b = sample_tokens(TokenDataConfig(n_tokens=40, sparsify="noisiest", sparsify_k=4), 64, seed=0)
    assert ((~b.keep).sum(1) == 4).all()


# Real images (li2023_images): test images lose k patches by a rule, from a trained model's attention,
# the patches' pixel mass, or at random (vit_core.sparsify.image_keep)

PATCHES = 16  # 28 x 28 images cut into 7 x 7 patches
RULES = ("least_attended", "background", "random")


@pytest.fixture
def fashion(tmp_path):
    """A few Fashion-MNIST-like images written as idx files: patch j of image i is flat at an
    intensity of its own (some patches blank), so every patch's pixel mass is known."""
    rng = np.random.default_rng(0)
    level = {"train": rng.integers(0, 256, (24, PATCHES)), "t10k": rng.integers(0, 256, (10, PATCHES))}
    for part, levels in level.items():
        levels[:, rng.random(levels.shape[1]) < 0.3] = 0  # background patches
        grid = levels.reshape(-1, 4, 1, 4, 1).repeat(7, 2).repeat(7, 4).reshape(-1, 28, 28)
        write_idx(tmp_path / f"{part}-images-idx3-ubyte.gz", grid)
        write_idx(tmp_path / f"{part}-labels-idx1-ubyte.gz", np.arange(len(levels)) % 10)
    return tmp_path, level["t10k"]


@pytest.fixture
def family(monkeypatch):
    """li2023_images, registered as its entry point would (a checkout not reinstalled since lacks it)."""
    monkeypatch.setitem(families(), "li2023_images", Li2023Images())
    refresh()
    yield families()["li2023_images"]
    monkeypatch.undo()
    refresh()


def _images(folder, **kwargs):
    return ImageTokenConfig(source="fashion_mnist", path=str(folder), patch=7, **kwargs)


def test_each_image_rule_removes_the_patches_it_says(fashion):
    folder, levels = fashion
    test = sample_images(_images(folder), 10, 0, Stream.TEST_DATA)
    mass = test.tokens.sum(-1).numpy()
    assert np.allclose(mass, levels * 49 / 255, atol=1e-4)  # a patch's pixel mass, read from the images
    rngs = lambda: [np.random.default_rng(s) for s in (0, 1)]  # noqa: E731
    background = image_keep("background", 4, None, mass, rngs())
    order = np.argsort(levels, axis=1, kind="stable")  # the lowest mass first, ties to the earlier patch
    assert np.array_equal(np.sort(np.nonzero(~background[0])[1].reshape(10, 4)), np.sort(order[:, :4]))
    assert np.array_equal(background[0], background[1])  # the same patches for every model
    attention = np.random.default_rng(5).random((2, 10, PATCHES))  # hand-set: what each patch receives
    least = image_keep("least_attended", 3, attention, mass, rngs())
    assert ((~least).sum(-1) == 3).all()
    assert (np.where(least, -1, attention).max(-1) < np.where(least, attention, 2).min(-1)).all()
    random = image_keep("random", 5, None, mass, rngs())
    assert ((~random).sum(-1) == 5).all()  # k distinct patches of every image
    assert not np.array_equal(random[0], random[1])  # each model draws its own
    assert np.array_equal(random, image_keep("random", 5, None, mass, rngs()))  # and draws them again
    assert all(image_keep(rule, 0, attention, mass, rngs()).all() for rule in RULES)
    with pytest.raises(ValueError, match="attention"):
        image_keep("least_attended", 2, None, mass, rngs())


def test_scores_after_removal_read_the_trained_attention_and_k_0_changes_nothing(fashion, family):
    data = _images(fashion[0])
    test = sample(data, 10, 0, Stream.TEST_DATA)
    train = TrainConfig(eval_batch=4)
    pack = build(ModelConfig(init="random", width=8, readout="per_token"), data, [0, 1, 2])
    whole = evaluate(pack, test.tokens, test.labels, None, 4)
    got = sparsified_scores(RULES, (0, 3), pack, test, [0, 1, 2], train)
    for rule in RULES:
        assert torch.allclose(got[sparsified_name(rule, 0, "error")], whole["error"])
        assert torch.allclose(got[sparsified_name(rule, 0, "loss")], whole["loss"], atol=1e-6)
    received = pack(test.tokens)[1].detach().mean(-2).numpy()  # each patch's attention, averaged over queries
    keep = torch.from_numpy(image_keep("least_attended", 3, received, test.tokens.sum(-1).numpy(), [None] * 3))
    removed = evaluate(pack, test.tokens, test.labels, keep, 4)
    assert torch.allclose(got[sparsified_name("least_attended", 3, "loss")], removed["loss"], atol=1e-6)
    assert not torch.allclose(removed["loss"], whole["loss"])
    cnn = build(ModelConfig(init="random", width=8, kind="cnn"), data, [0])
    without_attention = sparsified_scores(RULES, (3,), cnn, test, [0], train)
    assert without_attention[sparsified_name("least_attended", 3, "error")].isnan().all()


def test_the_family_refuses_an_aligned_init_and_bad_rules(fashion, family):
    with pytest.raises(ConfigError, match="init"):
        family.check(_images(fashion[0]), ModelConfig())
    with pytest.raises(ConfigError, match="test_sparsify_k"):
        _images(fashion[0], test_sparsify_k=(0,))
    with pytest.raises(ConfigError, match="test_sparsify"):
        _images(fashion[0], test_sparsify=("noisiest",))


def test_a_tiny_image_sparsification_spec_trains_records_and_reports_every_rule(fashion, family):
    spec = parse_spec(
        f"name: tiny_sparse\nfamily: li2023_images\nmodels: [vit]\n"
        f"data: {{source: fashion_mnist, path: {fashion[0]}, patch: 7, test_sparsify_k: [2, 4]}}\n"
        "model: {init: random, width: 8, readout: per_token}\n"
        "training: {lr: 0.5, batch_size: 8, max_steps: 30, eval_every: 10, n_test: 10, eval_batch: 5}\n"
        "n_train: [20]\nseeds: 3\n"
    )
    resolved = spec.resolved_cell(spec.cells[0])
    result = train_pack(resolved.data, resolved.model, resolved.training, [20] * 3, [0, 1, 2])
    records = [ModelRecord.from_dict(r) for r in result.records()]
    assert all(0 <= r.metrics["sparsified_random_k4_test_error"] <= 1 for r in records)
    summary = summarize(spec, "tiny-1", [CellResult(spec.cells[0], records)])
    groups = summary.stats["sparsification"]
    assert set(groups) == {f"vit sparsify={rule}" for rule in RULES}
    for ks in groups.values():
        assert sorted(ks) == [0, 2, 4]
        assert ks[0]["test_error"].mean == pytest.approx(np.mean([r.test_error for r in records]))
        assert ks[0]["change"].mean == 0 and ks[4]["change"].seeds == 3
    lines = [line for line in report.notes(summary) if line.startswith("sparsification, vit sparsify=background")]
    assert len(lines) == 1 and all(part in lines[0] for part in ("test error ", "at k = 0", "k = 2: ", "k = 4: "))


def test_every_image_training_and_test_keeps_its_token_set_by_the_rule(fashion, family):
    """sparsify on images (Paper A's S^n, as on token data): each training and test image loses
    sparsify_k patches, the least massive (background) or drawn (random, again the same from the
    same seed, stream and start); the config refuses k with 'all' and both removals at once."""
    folder, levels = fashion
    whole = family.sample(_images(folder), 10, 0, Stream.TEST_DATA, 0)
    assert whole.keep.all()
    background = family.sample(_images(folder, sparsify="background", sparsify_k=4), 10, 0, Stream.TEST_DATA, 0)
    order = np.argsort(levels, axis=1, kind="stable")[:, :4]
    assert np.array_equal(np.sort(np.nonzero(~background.keep.numpy())[1].reshape(10, 4)), np.sort(order))
    assert torch.equal(background.tokens, whole.tokens)  # the pixels stay: the mask says what S^n holds
    random = _images(folder, sparsify="random", sparsify_k=5)
    train = family.sample(random, 12, 3, Stream.TRAIN_DATA, 0)
    assert ((~train.keep).sum(-1) == 5).all()
    assert torch.equal(train.keep, family.sample(random, 12, 3, Stream.TRAIN_DATA, 0).keep)
    assert not torch.equal(train.keep, family.sample(random, 12, 4, Stream.TRAIN_DATA, 0).keep)
    with pytest.raises(ConfigError, match="sparsify_k"):
        _images(folder, sparsify_k=2)
    with pytest.raises(ConfigError, match="test_sparsify_k"):
        _images(folder, sparsify="random", sparsify_k=2, test_sparsify_k=(2,))


def test_a_swept_image_sparsify_k_is_reported_by_test_error(fashion, family):
    spec = parse_spec(
        f"name: tiny_sparse_train\nfamily: li2023_images\nmodels: [vit]\n"
        f"data: {{source: fashion_mnist, path: {fashion[0]}, patch: 7}}\n"
        "axes: {sparsify: [background, random], sparsify_k: [0, 4]}\n"
        "model: {init: random, width: 8, readout: per_token}\n"
        "training: {lr: 0.5, batch_size: 8, max_steps: 20, eval_every: 10, n_test: 10, eval_batch: 5}\n"
        "n_train: [20]\nseeds: 2\n"
    )
    cells = []
    for cell in spec.cells:
        resolved = spec.resolved_cell(cell)
        result = train_pack(resolved.data, resolved.model, resolved.training, [20] * 2, [0, 1])
        cells.append(CellResult(cell, [ModelRecord.from_dict(r) for r in result.records()]))
    groups = summarize(spec, "tiny-2", cells).stats["sparsification"]
    assert set(groups) == {"vit sparsify=background", "vit sparsify=random"}
    for group, ks in groups.items():
        assert sorted(ks) == [0, 4] and set(ks[0]) == {"test_error", "change"}
        at_zero = [c for c in cells if c.cell.label == f"{group} sparsify_k=0"]
        assert ks[0]["test_error"].mean == pytest.approx(np.mean([r.test_error for r in at_zero[0].records]))
