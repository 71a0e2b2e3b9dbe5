"""The memory a model job declares follows from the model (parameters from the checkpoint, its shape from
config.json), the dtypes, the sequence length, the batch and the memory budget, and grows with each retry."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from san.core.memory import INTERPRETER_MB, MARGIN, declared_mem_mb, job_memory_mb, model_size

from helpers import ROOT

SHAPE = {"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 256}


@pytest.fixture
def folder(tmp_path):
    """A model folder of a sharded checkpoint: 3 blocks of two 64x64 matrices and an embedding of 100 x 64."""
    tensors = {f"layers.{i}.{n}": torch.zeros(64, 64) for i in range(3) for n in ("q", "o")}
    save_file(dict(list(tensors.items())[:3]), tmp_path / "a.safetensors")
    save_file({**dict(list(tensors.items())[3:]), "embed.weight": torch.zeros(100, 64)}, tmp_path / "b.safetensors")
    weight_map = {k: "a.safetensors" for k in list(tensors)[:3]}
    weight_map |= {k: "b.safetensors" for k in [*list(tensors)[3:], "embed.weight"]}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps(SHAPE))
    return tmp_path


def test_the_size_is_read_from_the_checkpoint_headers_and_config(folder):
    size = model_size(folder)
    assert size.parameters == 6 * 64 * 64 + 100 * 64
    assert (size.width, size.layers, size.heads, size.mlp) == (64, 3, 4, 256)


def _expected(parameters, itemsize, seq, batch, budget=None, attempt=1, gpu=False):
    """The estimate written out: weights (at most the budget), the residual stream of every layer in the dtype and
    in float64, the attention probabilities of the 3 blocks (returned for the first-token sink), three copies of one
    block's attention probabilities and MLP hidden layer; interpreter, margin."""
    weights = parameters * itemsize / 2**20
    if budget is not None:
        weights = min(weights, budget)
    stream = batch * seq * 64 * 4 * (itemsize + 8)
    per_block = 3 * batch * 4 * seq * seq * itemsize + 3 * batch * seq * 256 * itemsize
    per_block += batch * 3 * 4 * seq * seq * itemsize  # every block's attention, 4 heads
    mb = (weights + (stream + per_block) / 2**20 + (0 if gpu else INTERPRETER_MB)) * MARGIN * attempt
    return -(-mb // 100) * 100


@pytest.mark.parametrize("dtype,itemsize", [("float64", 8), ("float32", 4), ("bfloat16", 2)])
def test_the_job_memory_follows_the_model_dtype_sequence_and_batch(folder, dtype, itemsize):
    size = model_size(folder)
    for seq, batch in ((128, 32), (512, 4)):
        assert job_memory_mb(size, [dtype], seq, batch) == _expected(size.parameters, itemsize, seq, batch)
        assert job_memory_mb(size, [dtype], seq, batch, gpu=True) == _expected(
            size.parameters, itemsize, seq, batch, gpu=True
        )


def test_the_widest_dtype_sets_the_memory_and_a_budget_caps_the_weights():
    from san.core.memory import ModelSize

    big = ModelSize(parameters=3_000_000_000, width=3072, layers=28, heads=24, mlp=8192)
    f32 = job_memory_mb(big, ["float32"], 128, 2)
    assert job_memory_mb(big, ["bfloat16", "float32"], 128, 2) == f32 > job_memory_mb(big, ["bfloat16"], 128, 2)
    assert f32 > 3_000_000_000 * 4 / 2**20  # the weights alone
    capped = job_memory_mb(big, ["float32"], 128, 2, budget_mb=3072)
    assert capped < 6000 < f32
    assert job_memory_mb(big, ["float32"], 128, 2, budget_mb=10**9) == f32


def test_a_retry_declares_more(folder):
    size = model_size(folder)
    first, second = (job_memory_mb(size, ["float64"], 128, 8, attempt=a) for a in (1, 2))
    assert second >= 2 * first - 100


def test_the_declared_memory_is_the_largest_weight_set_and_the_table_before_acquisition(folder, tmp_path_factory):
    missing = tmp_path_factory.mktemp("not-acquired")
    assert declared_mem_mb([folder, missing], ["float64"], 128, 8, None, 1, 4500) == 4500
    assert declared_mem_mb([folder, missing], ["float64"], 128, 8, None, 3, 4500) == 3 * 4500
    got = declared_mem_mb([folder], ["float64"], 128, 8, None, 2, 4500)
    assert got == job_memory_mb(model_size(folder), ["float64"], 128, 8, attempt=2)
    assert declared_mem_mb([folder], ["float64"], 128, 8, None, 1, 0, gpu=True) < got


def test_a_gpu_job_asks_for_the_smallest_gpu_model_that_holds_it():
    from san.core.memory import gpu_model_for

    site = "h100:81920, a100:40960"  # in any order
    assert gpu_model_for(30000, site) == "a100"
    assert gpu_model_for(40960, site) == "a100"
    assert gpu_model_for(40961, site) == "h100"
    assert gpu_model_for(10**6, site) == "h100"  # none holds it: the largest
    assert gpu_model_for(10**6, "") == ""
    with pytest.raises(ValueError, match="SAN_SLURM_GPU_MODELS: 'a100'"):
        gpu_model_for(1, "a100")


def _profile(monkeypatch, **env):

    import yte

    for key in ("SAN_SLURM_GPU_MODEL", "SAN_SLURM_RETRIES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = ROOT / "profiles" / "slurm" / "config.yaml"
    with path.open() as fh:
        return yte.process_yaml(fh, require_use_yte=True)


def test_the_slurm_profile_leaves_memory_to_the_rules_and_retries(monkeypatch):
    """The profile sets no mem_mb of a model rule (the rule's, from its model, reaches sbatch), asks for the site's
    GPU model only when one is set (else the rule's choice by its gpu_mem_mb stands), and resubmits a failed job."""
    default = _profile(monkeypatch)
    for rule in ("rank_collapse", "attention_products"):
        assert "mem_mb" not in default["set-resources"][rule] and "gpu_model" not in default["set-resources"][rule]
    assert default["retries"] == 1
    site = _profile(monkeypatch, SAN_SLURM_GPU_MODEL="a100", SAN_SLURM_RETRIES="3")
    assert site["set-resources"]["rank_collapse"]["gpu_model"] == "a100" and site["retries"] == 3


def test_kept_attention_matrices_add_every_layer_of_their_sequences():
    from san.core.memory import ModelSize, activations_mb

    size = ModelSize(parameters=10**8, width=768, layers=12, heads=12, mlp=3072)
    extra = activations_mb(size, "float64", 128, 16, attentions=8) - activations_mb(size, "float64", 128, 16)
    assert extra == pytest.approx(2 * 8 * 12 * 12 * 128 * 128 * 8 / 2**20)
    assert job_memory_mb(size, ["float64"], 128, 16, attentions=8) > job_memory_mb(size, ["float64"], 128, 16)
