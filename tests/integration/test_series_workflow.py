"""End to end: the offline training series on a tiny config, in a copy of the workflow: every seed's checkpoints on
the schedule, the series' result with its revision and seed dimensions recomputed for one checkpoint from the
folder alone, and the training-dynamics figure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from san.core.storage import read_netcdf
from san.core.text import content_hash, pydoc_documents, tokenize_documents
from san.models.folders import load_tokenizer, verify_folder
from san.models.revisions import log_then_every

from helpers import built_workflow, tiny_config


def targets(cfg: dict) -> list[str]:
    return ["results/rank_collapse_series.nc"] + [
        f"results/figures/training_dynamics.{e}" for e in cfg["figures"]["formats"]
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory, default_config):
    cfg = tiny_config(default_config)
    return built_workflow(tmp_path_factory.mktemp("series") / "wf", cfg, targets(cfg)), cfg


def test_the_series_is_built_and_analysed(run):
    wf, cfg = run
    for t in targets(cfg):
        assert (wf / t).is_file() and (wf / t).stat().st_size > 0, t
    s = cfg["series"]
    steps = log_then_every(s["steps"], s["every"], s["log_until"])
    for seed in s["seeds"]:
        for step in steps:
            assert verify_folder(wf / f"results/series/seed{seed}/step{step}")["step"] == step
    ds = read_netcdf(wf / "results/rank_collapse_series.nc")
    assert ds["residual_ratio"].dims == ("seed", "revision", "variant", "layer", "sample")
    assert list(ds["seed"].values) == s["seeds"] and list(ds["step"].values) == steps
    assert ds["first_token_attention"].dims == ("seed", "revision", "variant", "layer", "head")


def test_one_checkpoint_recomputed_from_its_folder(run):
    """The transformer variant's residual of the last checkpoint of the last seed, from transformers' hidden
    states of the folder alone (layers before the last: the last hidden state has the final norm applied)."""
    from transformers import GPTNeoXModel

    wf, cfg = run
    s, text = cfg["series"], cfg["text"]
    folder = wf / f"results/series/seed{s['seeds'][-1]}/step{s['steps']}"
    ids = tokenize_documents(
        load_tokenizer(folder), pydoc_documents(), text["seq_len"], text["n_sequences"], text["seed"]
    )
    ds = read_netcdf(wf / "results/rank_collapse_series.nc")
    got = ds["residual_ratio"].sel(seed=s["seeds"][-1], revision=f"step{s['steps']}", variant="transformer")
    model = GPTNeoXModel.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager").eval()
    with torch.no_grad():
        hidden = model(input_ids=torch.as_tensor(ids), output_hidden_states=True).hidden_states
    for layer in range(s["model"]["layers"]):
        x = hidden[layer].numpy()
        res = x - x.mean(1, keepdims=True)

        def norm(a):
            return np.sqrt(np.abs(a).sum(1).max(-1) * np.abs(a).sum(2).max(-1))

        np.testing.assert_allclose(got.sel(layer=layer).values, norm(res) / norm(x), rtol=1e-5)
    assert isinstance(ds.attrs["input_sha256"], str) and ds.attrs["input_sha256"] == content_hash(ids)
