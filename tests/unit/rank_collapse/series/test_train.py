"""The offline training series: checkpoints on the schedule as verified model folders, the same numbers after an
interrupted run is restarted, a vocabulary and a baseline computed independently, and the rank-collapse measures of a
series against the residual stream recomputed from transformers' hidden states."""

import json
import math
from collections import Counter

import numpy as np
import pytest
import torch
import xarray as xr

import san.rank_collapse.series.train as series_train
from san.core.text import content_hash, pydoc_documents, tokenize_documents
from san.models.folders import load_tokenizer, verify_folder
from san.rank_collapse.series.experiment import run_series
from san.rank_collapse.series.train import train, unigram_loss, vocabulary

SETTINGS = {
    "model": {"layers": 2, "width": 16, "heads": 2, "intermediate": 32, "context": 32},
    "vocabulary": 300,
    "seq_len": 16,
    "batch_size": 4,
    "learning_rate": 3e-3,
    "steps": 12,
    "every": 4,
    "log_until": 2,
}
STEPS = [0, 1, 2, 4, 8, 12]


@pytest.fixture(scope="module")
def documents():
    return pydoc_documents()[:40]


@pytest.fixture(scope="module")
def series(tmp_path_factory, documents):
    root = tmp_path_factory.mktemp("series")
    return {seed: (root / f"seed{seed}", train(SETTINGS, seed, documents, root / f"seed{seed}")) for seed in (0, 1)}


def test_checkpoints_are_model_folders_on_the_schedule(series):
    folder, record = series[0]
    assert record["steps"] == STEPS and record["revisions"] == [f"step{s}" for s in STEPS]
    assert len(record["loss"]) == 12 and all(math.isfinite(x) for x in record["loss"])
    for step in STEPS:
        manifest = verify_folder(folder / f"step{step}")
        assert manifest["source"] == "series" and manifest["family"] == "gpt_neox"
        assert manifest["step"] == step and manifest["tokens_seen"] == step * 4 * 16 and manifest["seed"] == 0
    assert json.loads((folder / "loss.json").read_text())["loss"] == record["loss"]
    # two seeds: other weights, other losses
    assert series[1][1]["loss"] != record["loss"]
    a = verify_folder(folder / "step12")["sha256"]["model.safetensors"]
    assert a != verify_folder(series[1][0] / "step12")["sha256"]["model.safetensors"]


def test_a_restarted_run_continues_with_the_same_numbers(tmp_path, documents, series, monkeypatch):
    real = series_train._save_checkpoint

    def interrupted(out, step, *args, **kwargs):
        if step == 8:
            raise KeyboardInterrupt
        return real(out, step, *args, **kwargs)

    monkeypatch.setattr(series_train, "_save_checkpoint", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(SETTINGS, 0, documents, tmp_path)
    assert not (tmp_path / "step8").exists() and (tmp_path / "step4").is_dir()
    monkeypatch.setattr(series_train, "_save_checkpoint", real)
    again = train(SETTINGS, 0, documents, tmp_path)
    assert again["loss"] == series[0][1]["loss"]
    for step in STEPS:
        want = verify_folder(series[0][0] / f"step{step}")["sha256"]
        assert verify_folder(tmp_path / f"step{step}")["sha256"] == want, step


def test_vocabulary_and_unigram_baseline_recomputed(documents):
    vocab = vocabulary(documents, 50)
    words = Counter()
    for doc in documents:
        for para in doc:
            for token in __import__("re").findall(r"\w+|[^\w\s]+", para.lower()):
                words[token] += 1
    top = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:48]
    assert list(vocab)[2:] == [w for w, _ in top] and list(vocab.values()) == list(range(50))
    stream = torch.tensor([0, 1, 1, 2, 2, 2, 2, 3])
    p = np.array([1, 2, 4, 1]) / 8
    assert unigram_loss(stream, 5) == pytest.approx(float(-(p * np.log(p)).sum()))


def _relative_residual(x: np.ndarray) -> float:
    """||X - 1 mean(X)||_{1,inf} / ||X||_{1,inf}, the paper's composite norm, per sequence in numpy."""

    def norm(a):
        return math.sqrt(np.abs(a).sum(0).max() * np.abs(a).sum(1).max())

    return norm(x - x.mean(0, keepdims=True)) / norm(x)


@pytest.mark.slow
def test_rank_collapse_along_the_series_matches_the_hidden_states(series, documents):
    from transformers import GPTNeoXModel

    folders = {seed: {f"step{s}": folder / f"step{s}" for s in STEPS} for seed, (folder, _) in series.items()}
    tokenizer = load_tokenizer(folders[0]["step0"])
    ids = tokenize_documents(tokenizer, documents, 16, 3, 0)
    inputs = xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": content_hash(ids)})
    settings = {
        "variants": ["SAN", "transformer"],
        "dtype": "float64",
        "batch_size": 2,
        "albert_no_mlp": "remove",
        "control_token_seed": 0,
        "massive_token_factor": 10.0,
    }
    ds = run_series("gpt_neox", folders, inputs, settings)
    assert ds["residual_ratio"].dims == ("seed", "revision", "variant", "layer", "sample")
    assert list(ds["step"].values) == STEPS and list(ds["tokens_seen"].values) == [s * 64 for s in STEPS]
    assert ds["first_token_attention"].sizes["head"] == 2
    for seed in (0, 1):
        model = GPTNeoXModel.from_pretrained(
            folders[seed]["step12"], dtype=torch.float64, attn_implementation="eager"
        ).eval()
        with torch.no_grad():
            hidden = model(input_ids=torch.as_tensor(ids), output_hidden_states=True).hidden_states
        for layer in range(2):  # the last hidden state has the final norm applied; the stream does not
            want = [_relative_residual(hidden[layer][i].numpy()) for i in range(3)]
            got = ds["residual_ratio"].sel(seed=seed, revision="step12", variant="transformer", layer=layer).values
            np.testing.assert_allclose(got, want, rtol=1e-7)  # float32 weights, float64 passes
