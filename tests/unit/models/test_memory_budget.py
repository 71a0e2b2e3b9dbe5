"""Models larger than a memory budget: blocks streamed from the checkpoint give the numbers of the model held in
memory (all four variants, the residual stream the hooks record), the plan of held and streamed blocks, loading in
another dtype tensor by tensor, and a budget too small refused before any tensor is read."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import xarray as xr
from safetensors import safe_open

from san.core.device import JobPlace
from san.models.load import load_model
from san.models.store import materialise
from san.models.stream import plan_blocks
from san.rank_collapse.experiment import run

from helpers import ROOT

VARIANTS = ["SAN", "SAN+MLP", "SAN+skip", "transformer"]
LAYERS = 4
TINY = {
    "bert": {"hidden_size": 32, "num_hidden_layers": LAYERS, "num_attention_heads": 4, "intermediate_size": 64},
    "llama": {
        "hidden_size": 32, "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 64,
    },
}  # fmt: skip
#: a block's index in a checkpoint key of either family (``encoder.layer.3.`` / ``layers.3.``)
BLOCK = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


@pytest.fixture(scope="module", params=sorted(TINY))
def model_folder(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "init"
    materialise("m", request.param, "init", {"seed": 5, "config": TINY[request.param]}, out)
    return request.param, out


def _sizes_mb(folder, itemsize: int) -> tuple[float, float]:
    """(the weights outside the blocks, one block and room for reading its largest tensor from the float32 file) in
    MB at ``itemsize`` bytes a number, from the checkpoint."""
    outside, blocks, largest = 0, [0] * LAYERS, 0
    with safe_open(folder / "model.safetensors", "pt") as fh:
        for key in fh.keys():  # noqa: SIM118
            numel = int(np.prod(fh.get_slice(key).get_shape()))
            match = BLOCK.search(key)
            if match:
                blocks[int(match.group(1))] += numel * itemsize
                largest = max(largest, numel * max(itemsize, 4))
            else:
                outside += numel * itemsize
    assert len(set(blocks)) == 1
    return (outside + largest) / 2**20, blocks[0] / 2**20


def _inputs() -> dict[str, xr.Dataset]:
    ids = torch.randint(5, 1000, (3, 7), generator=torch.Generator().manual_seed(0))
    return {"init": xr.Dataset({"input_ids": (("sample", "token"), ids.numpy())}, attrs={"input_sha256": "x"})}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("held", [0, 2])
def test_streamed_model_gives_the_numbers_of_the_model_in_memory(model_folder, dtype, held):
    family, folder = model_folder
    settings = {
        "variants": VARIANTS,
        "dtype": dtype,
        "batch_size": 2,
        "albert_no_mlp": "identity_linears",
        "control_token_seed": 0,
        "massive_token_factor": 10.0,
    }
    outside, block = _sizes_mb(folder, 8 if dtype == "float64" else 4)
    budget = outside + (held + 1) * block  # the held blocks and room for one streamed block
    torch_dtype = getattr(torch, dtype)
    model = load_model(folder, family, torch_dtype, budget_mb=budget)
    plan = model.san_streaming.plan
    assert (plan.blocks, plan.held, plan.streamed) == (LAYERS, held, LAYERS - held)
    on_meta = {BLOCK.search(name).group(1) for name, p in model.named_parameters() if p.is_meta}
    assert on_meta == {str(i) for i in range(held, LAYERS)}
    in_memory = run(family, {"init": folder}, _inputs(), settings)
    streamed = run(family, {"init": folder}, _inputs(), settings, JobPlace(budget_mb=budget))
    assert list(streamed.data_vars) == list(in_memory.data_vars)
    for name in in_memory.data_vars:
        # the sink (weights, variant, layer[, sample], head), NaN at layer 0; the other measures per sample
        heads = {"first_token_attention": (streamed.sizes["head"],),
                 "first_token_attention_by_sample": (3, streamed.sizes["head"])}  # fmt: skip
        assert streamed[name].shape == (1, 4, LAYERS + 1, *heads.get(name, (3,)))
        np.testing.assert_array_equal(streamed[name].values, in_memory[name].values)


def test_streamed_blocks_are_read_once_per_forward_pass_and_dropped(model_folder):
    family, folder = model_folder
    outside, block = _sizes_mb(folder, 8)
    model = load_model(folder, family, torch.float64, budget_mb=outside + 2 * block)
    streaming = model.san_streaming
    ids = torch.randint(5, 1000, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert streaming.loads == LAYERS - 1
    streamed = [p for name, p in model.named_parameters() if (m := BLOCK.search(name)) and int(m.group(1)) >= 1]
    assert streamed and all(p.is_meta for p in streamed)


def test_a_budget_below_the_weights_outside_the_blocks_and_one_block_is_refused(model_folder):
    family, folder = model_folder
    outside, block = _sizes_mb(folder, 8)
    with pytest.raises(ValueError, match=r"compute\.rank_collapse\.memory_budget_mb: .* largest block"):
        load_model(folder, family, torch.float64, budget_mb=outside + block * 0.9,
                   budget_key="compute.rank_collapse.memory_budget_mb")  # fmt: skip


def test_a_budget_above_the_weights_holds_every_block(model_folder):
    family, folder = model_folder
    outside, block = _sizes_mb(folder, 8)
    model = load_model(folder, family, torch.float64, budget_mb=outside + LAYERS * block)
    assert model.san_streaming is None
    assert not any(p.is_meta for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_another_dtype_is_the_checkpoint_converted_tensor_by_tensor(model_folder, dtype):
    family, folder = model_folder
    model = load_model(folder, family, dtype)
    state = model.state_dict()
    with safe_open(folder / "model.safetensors", "pt") as fh:
        for key in fh.keys():  # noqa: SIM118
            name = key if key in state else key.split(".", 1)[1]
            assert state[name].dtype == dtype
            assert torch.equal(state[name], fh.get_tensor(key).to(dtype))


def test_the_plan_holds_the_blocks_that_fit_beside_one_streamed_block():
    assert plan_blocks(10, [5, 5, 5, 5], None, "k").held == 4
    assert plan_blocks(10, [5, 5, 5, 5], 30, "k").held == 4
    plan = plan_blocks(10, [5, 5, 5, 5], 29, "k")
    assert (plan.held, plan.streamed, plan.peak_bytes()) == (2, 2, 25)
    assert plan_blocks(10, [5, 5, 5, 5], 15, "k").held == 0
    with pytest.raises(ValueError, match="k: "):
        plan_blocks(10, [5, 5, 5, 5], 14, "k")
    # the tensor being read into a streamed block (its file pages) counts too
    plan = plan_blocks(10, [5, 5, 5, 5], 26, "k", reading_bytes=2)
    assert (plan.held, plan.peak_bytes()) == (1, 22)
    assert plan_blocks(10, [5, 5, 5, 5], 30, "k", reading_bytes=2).peak_bytes() == 30  # all held: nothing read
    with pytest.raises(ValueError, match="largest tensor being read"):
        plan_blocks(10, [5, 5, 5, 5], 16, "k", reading_bytes=2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_tensorwise_load_is_transformers_load(model_folder, dtype):
    """Parameters and buffers alike: the model loaded tensor by tensor is the one transformers loads in that dtype."""
    from san.models.families import family as family_entry

    family, folder = model_folder
    reference = family_entry(family).model_cls.from_pretrained(folder, dtype=dtype, attn_implementation="eager")
    reference = reference.to(dtype).state_dict()
    loaded = load_model(folder, family, dtype).state_dict()
    assert sorted(loaded) == sorted(reference)
    for name, tensor in reference.items():
        assert loaded[name].dtype == tensor.dtype, name
        assert torch.equal(loaded[name], tensor), name


@pytest.mark.parametrize("value", [0, "3GB", 1.5])
def test_a_bad_memory_budget_is_refused_naming_its_key(default_config, value):
    import copy

    from san.core.config import ConfigError
    from san.experiments import check_config

    cfg = copy.deepcopy(default_config)
    cfg["compute"]["rank_collapse"]["memory_budget_mb"] = value
    schemas = ROOT / "workflow" / "schemas"
    with pytest.raises(ConfigError, match=r"'compute.rank_collapse.memory_budget_mb'"):
        check_config(cfg, schemas)


def test_the_rank_collapse_job_passes_its_budget_and_key():
    from san.core.device import memory_budget

    key = "compute.rank_collapse.memory_budget_mb"
    assert memory_budget({"device": "cpu", "memory_budget_mb": 3072, "memory_budget_key": key}) == (3072, key)
    assert memory_budget({"device": "cpu"})[0] is None


def test_checkpoint_keys_map_as_transformers_maps_them():
    from san.models.stream import key_map

    model = ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias", "encoder.layer.0.w"]
    ckpt = ["bert.embeddings.LayerNorm.gamma", "bert.embeddings.LayerNorm.beta", "encoder.layer.0.w", "cls.x"]
    mapping, info = key_map(ckpt, model, "bert")
    assert mapping == dict(zip(ckpt[:3], [*model[:2], model[2]], strict=True))
    assert info == {"missing_keys": [], "unexpected_keys": ["cls.x"]}
    _, info = key_map(ckpt[:2], model, "bert")
    assert info["missing_keys"] == ["encoder.layer.0.w"]


def test_a_checkpoint_without_a_one_to_one_map_is_loaded_by_transformers_and_refused_for_streaming(model_folder):
    """A layout transformers converts (here: a tensor renamed to a name only transformers' own conversion knows is
    simulated by a checkpoint that lacks a tensor): without a budget the model goes to transformers' loader (whose
    check refuses it), with a budget the message names the budget's key."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    from san.models.folders import AcquisitionError, hash_folder

    family, folder = model_folder
    broken = folder.parent / "broken"
    shutil.copytree(folder, broken, dirs_exist_ok=True)
    tensors = load_file(broken / "model.safetensors")
    tensors.pop(sorted(tensors)[-1])
    save_file(tensors, broken / "model.safetensors", {"format": "pt"})
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["sha256"] = hash_folder(broken)
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(AcquisitionError, match="does not match the architecture"):
        load_model(broken, family, torch.float64)
    with pytest.raises(AcquisitionError, match=r"compute\.x\.memory_budget_mb: the tensors .* one to one"):
        load_model(broken, family, torch.float64, budget_mb=1000, budget_key="compute.x.memory_budget_mb")


#: tiny architectures of more families, for the tensor-by-tensor load against transformers' loader
MORE = {
    "gpt2": {"n_embd": 16, "n_layer": 2, "n_head": 4, "n_inner": 32, "n_positions": 32},
    "roberta": {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 32},
    "mpnet": {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 32},
    "albert": {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
               "intermediate_size": 32},
    "xlnet": {"d_model": 16, "n_layer": 2, "n_head": 4, "d_inner": 32},
    "gemma3": {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 8, "intermediate_size": 32, "max_position_embeddings": 32},
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(MORE))
def test_a_tensorwise_load_is_transformers_load_in_more_families(tmp_path, family):
    from san.models.families import family as family_entry

    folder = tmp_path / "init"
    materialise("m", family, "init", {"seed": 1, "config": MORE[family]}, folder)
    reference = family_entry(family).model_cls.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager")
    reference = reference.to(torch.float64).state_dict()
    model = load_model(folder, family, torch.float64)
    assert getattr(model, "san_streaming", "loaded by transformers") is None  # the tensor-by-tensor path
    loaded = model.state_dict()
    assert sorted(loaded) == sorted(reference)
    for name, tensor in reference.items():
        assert loaded[name].dtype == tensor.dtype and torch.equal(loaded[name], tensor), name


def test_a_streamed_model_is_freed_with_its_last_reference(model_folder):
    """No reference cycle through the streaming hooks: the weights go when the model goes, before any collection
    (a job loads its next weight set right after dropping the last)."""
    import gc
    import weakref

    family, folder = model_folder
    outside, block = _sizes_mb(folder, 8)
    model = load_model(folder, family, torch.float64, budget_mb=outside + block)
    ids = torch.randint(5, 1000, (1, 4), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    refs = [weakref.ref(model), weakref.ref(next(iter(model.san_streaming.slots.values())))]
    refs.append(weakref.ref(next(model.parameters())))
    gc.disable()
    try:
        del model
        assert [r() is None for r in refs] == [True, True, True]
    finally:
        gc.enable()
