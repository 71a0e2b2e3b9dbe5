"""Data generators of the path-effectiveness tasks and their input-blind chance level."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial import ConvexHull, Delaunay

from san.paths.tasks import (
    IGNORE,
    TaskData,
    chance_accuracy,
    convex_hull_data,
    hull_labels,
    make_task,
    memorization_text,
    positional_mode,
    prose_windows,
    random_token_labels,
    sorting_data,
)

SORT_CFG = {
    "seed": 2,
    "data": {"seq_len": 8, "vocab_size": 10, "n_train": 300, "n_eval": 50},
    "model": {"n_layers": 2, "n_heads": 2, "dim": 8, "dropout": 0.1},
}
HULL_CFG = {
    "seed": 2,
    "data": {"n_points": 10, "low": 0.0, "high": 10.0, "shift_std": 3.3, "n_train": 400, "n_eval": 100},
    "model": {"n_layers": 2, "n_heads": 2, "dim": 8, "dropout": 0.1, "point_mlp": True},
}


def test_sorting_targets_are_the_sorted_inputs():
    d = sorting_data(200, 8, 10, np.random.default_rng(0))
    assert d.inputs.shape == d.labels.shape == (200, 8) and d.mask is None
    assert (d.labels[:, 1:] >= d.labels[:, :-1]).all()  # non-decreasing
    for x, y in zip(d.inputs.tolist(), d.labels.tolist(), strict=True):
        assert sorted(x) == y  # same multiset, repetitions kept
    assert d.inputs.min() >= 0 and d.inputs.max() <= 9
    assert any(len(set(row)) < 8 for row in d.inputs.tolist())  # drawn with repetition


@pytest.mark.slow
def test_hull_labels_are_the_scipy_convex_hull_vertices():
    d = convex_hull_data(100, 10, 0.0, 10.0, 3.3, np.random.default_rng(1))
    assert d.inputs.shape == (100, 10, 2) and d.labels.shape == (100, 10)
    for pts, lab in zip(d.inputs.double().numpy(), d.labels.numpy(), strict=True):
        expected = np.zeros(10, dtype=np.int64)
        expected[ConvexHull(pts).vertices] = 1
        np.testing.assert_array_equal(lab, expected)
        # independently: a point is a vertex iff it lies outside the convex hull of the other points
        for i in range(10):
            others = np.delete(pts, i, axis=0)
            outside = Delaunay(others).find_simplex(pts[i]) < 0
            assert outside == bool(lab[i])


def test_hull_labels_by_hand():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [0.2, 0.7]])
    np.testing.assert_array_equal(hull_labels(square), [1, 1, 1, 1, 0, 0])


def test_hull_sets_share_one_gaussian_offset():
    rng = np.random.default_rng(2)
    d = convex_hull_data(4000, 10, 0.0, 10.0, 3.3, rng)
    pts = d.inputs.double().numpy()
    spread = pts.max(1) - pts.min(1)
    assert (spread <= 10.0 + 1e-5).all()  # one shift per set: the within-set range stays that of the square
    centre = pts.mean(1)  # = 5 + offset + mean of 10 uniforms (std 10/sqrt(12*10))
    assert np.abs(centre.mean(0) - 5.0).max() < 0.2
    expected_std = np.sqrt(3.3**2 + 100 / 120)
    np.testing.assert_allclose(centre.std(0), expected_std, rtol=0.05)


def test_chance_level_is_the_positional_mode_by_hand():
    train = torch.tensor([[0, 1, 2], [0, 2, 2], [1, 2, IGNORE], [0, 1, IGNORE]])
    assert positional_mode(train, 3).tolist() == [0, 1, 2]  # position 1: tie between 1 and 2 -> smallest
    ev = torch.tensor([[0, 1, 0], [1, 1, IGNORE]])
    assert chance_accuracy(train, ev, 3) == pytest.approx(3 / 5)


def test_chance_of_sorting_is_far_above_uniform_and_of_the_hull_is_the_majority_class():
    task = make_task("sorting", SORT_CFG)
    chance = chance_accuracy(task.train.labels, task.eval.labels, 10)
    assert chance > 0.25  # the first and last sorted tokens are mostly 0 and 9
    mode = positional_mode(task.train.labels, 10)
    assert mode[0] == 0 and mode[-1] == 9
    hull = make_task("convex_hull", HULL_CFG)
    majority = int(hull.train.labels.float().mean() > 0.5)
    assert (positional_mode(hull.train.labels, 2) == majority).all()
    rate = float((hull.eval.labels == majority).float().mean())
    assert chance_accuracy(hull.train.labels, hull.eval.labels, 2) == pytest.approx(rate)


def test_random_token_labels_only_on_real_tokens():
    valid = np.ones((200, 100), dtype=bool)
    valid[:, 80:] = False
    lab = random_token_labels(valid, 2, np.random.default_rng(0))
    assert (lab[:, 80:] == IGNORE).all() and set(np.unique(lab[:, :80])) == {0, 1}
    assert abs(lab[:, :80].mean() - 0.5) < 0.02  # 16000 fair coins: std 0.004


class CharTokenizer:
    """A stand-in tokenizer: one token per character (ids 10..), [CLS]=1, [SEP]=2."""

    cls_token_id, sep_token_id = 1, 2

    def __call__(self, text, add_special_tokens=True, verbose=True):
        return {"input_ids": [10 + ord(c) % 50 for c in text]}


def test_prose_windows_are_wrapped_and_never_cross_documents():
    docs = [["abcdefgh", "ij"], ["klmno"]]  # 11 and 5 characters (paragraphs joined by a space)
    w = prose_windows(CharTokenizer(), docs, seq_len=6)  # 4 body tokens per window
    assert w.shape == (3, 6)  # 11 -> 2 windows (3 left over), 5 -> 1 window (1 left over)
    assert (w[:, 0] == 1).all() and (w[:, -1] == 2).all()
    assert w[2, 1:5].tolist() == [10 + ord(c) % 50 for c in "klmn"]


@pytest.fixture(scope="module")
def tokenizer():
    from san.paths.tasks import bundled_tokenizer

    return bundled_tokenizer()


@pytest.mark.slow
def test_memorisation_text_is_prose_windows_of_the_bundled_tokenizer(tokenizer):
    ids, mask = memorization_text("pydoc", 20, 32, seed=0, rte={}, tokenizer=tokenizer)
    assert ids.shape == (20, 32) and mask.all()
    assert (ids[:, 0] == tokenizer.cls_token_id).all() and (ids[:, -1] == tokenizer.sep_token_id).all()
    assert (ids[:, 1:-1] != tokenizer.pad_token_id).all()
    text = tokenizer.decode(ids[0, 1:-1])
    assert sum(ch.isalpha() for ch in text) > 0.6 * len(text)  # prose, not code
    again, _ = memorization_text("pydoc", 20, 32, seed=0, rte={}, tokenizer=tokenizer)
    other, _ = memorization_text("pydoc", 20, 32, seed=1, rte={}, tokenizer=tokenizer)
    np.testing.assert_array_equal(ids, again)
    assert not np.array_equal(ids, other)
    with pytest.raises(ValueError, match="windows"):
        memorization_text("pydoc", 10**6, 32, seed=0, rte={}, tokenizer=tokenizer)


def test_default_memorisation_text_is_long_enough(tokenizer):
    ids, _ = memorization_text("pydoc", 500, 128, seed=42, rte={}, tokenizer=tokenizer)
    assert ids.shape == (500, 128) and len(np.unique(ids, axis=0)) == 500


def test_memorisation_task_is_evaluated_on_its_training_sequences(tokenizer):
    cfg = {
        "seed": 42,
        "data": {"source": "pydoc", "n_sequences": 12, "seq_len": 16, "n_labels": 2, "rte": {}},
        "model": {"n_layers": 2, "n_heads": 2, "dim": 8, "dropout": 0.1},
    }
    task = make_task("memorization", cfg, tokenizer=tokenizer)
    assert task.eval is task.train and task.train.mask is None
    assert task.model_config.vocab_size == len(tokenizer) and task.model_config.n_classes == 2
    assert set(task.train.labels.unique().tolist()) == {0, 1}


def test_tasks_are_deterministic_and_splits_independent():
    a, b = make_task("sorting", SORT_CFG), make_task("sorting", SORT_CFG)
    assert a.info["train_hash"] == b.info["train_hash"] and a.info["eval_hash"] == b.info["eval_hash"]
    assert a.info["train_hash"] != a.info["eval_hash"]
    bigger = make_task("sorting", {**SORT_CFG, "data": {**SORT_CFG["data"], "n_train": 400}})
    assert bigger.info["eval_hash"] == a.info["eval_hash"]  # the evaluation set does not depend on n_train
    other = make_task("sorting", {**SORT_CFG, "seed": 3})
    assert other.info["train_hash"] != a.info["train_hash"]
    with pytest.raises(ValueError):
        make_task("parity", SORT_CFG)


def test_task_data_round_trips_through_npz(tmp_path):
    d = TaskData(
        torch.arange(6).view(2, 3), torch.tensor([[0, 1, IGNORE], [1, 0, 1]]), torch.tensor([[1, 1, 0]] * 2).bool()
    )
    np.savez(tmp_path / "d.npz", **d.to_numpy("eval"))
    with np.load(tmp_path / "d.npz") as arrays:
        back = TaskData.from_numpy(arrays, "eval")
    assert back.content_hash() == d.content_hash()
    assert torch.equal(back.mask, d.mask)


def test_prose_windows_of_long_documents_raise_no_length_warning(tokenizer, caplog, capsys):
    """A whole document is tokenised before it is cut into windows: longer than the tokenizer's 512, without the
    'indexing errors' warning transformers prints for a sequence a model could not take."""
    rows = prose_windows(tokenizer, [["word " * 1500]], seq_len=128)
    assert rows.shape == (1500 // 126, 128)
    assert "longer than the specified maximum" not in caplog.text + capsys.readouterr().err
