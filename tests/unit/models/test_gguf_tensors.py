"""The tensor-by-tensor GGUF dequantisation (san/models/sources/gguf_tensors.py) on tiny GGUF files written here with
``gguf.GGUFWriter``: the exact weights of a model written as llama.cpp's converter writes them (query and key rows
permuted for rotary positions) come back unchanged, quantised files come back as transformers' whole-model GGUF
loader reads them, the shards and their index load with transformers, and the peak of the memory it allocates stays
below the float32 model's size (transformers' loader's does not)."""

import json
import tracemalloc
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from safetensors import safe_open
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

import san.models.sources.gguf_tensors as gguf_tensors
from san.models.folders import AcquisitionError
from san.models.sources.gguf import write_dequantised

Q = gguf.GGMLQuantizationType


def _permute(w: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``LlamaModel.permute`` of query and key rows (interleaved rotary halves)."""
    n = n_head_kv if n_head_kv != n_head else n_head
    return w.reshape(n, 2, w.shape[0] // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_gguf(path: Path, arch: str, lm, qtype, skip: tuple[str, ...] = ()) -> None:
    """Write ``lm`` (a transformers causal LM) as a GGUF file of architecture ``arch`` the way llama.cpp's converter
    names and lays out its tensors, every matrix stored as ``qtype`` (norms and biases in F32)."""
    c = lm.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(c.vocab_size)
    names = gguf.get_tensor_name_map(
        next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch), c.num_hidden_layers
    )
    for hf_name, tensor in lm.state_dict().items():
        if hf_name == "lm_head.weight" and c.tie_word_embeddings:
            continue
        stem, suffix = hf_name.rsplit(".", 1)
        name = f"{names.get_name(stem)}.{suffix}"
        if name in skip:
            continue
        w = tensor.float().numpy()
        if arch == "llama" and ".attn_q." in name:
            w = _permute(w, c.num_attention_heads, c.num_attention_heads)
        if arch == "llama" and ".attn_k." in name:
            w = _permute(w, c.num_attention_heads, c.num_key_value_heads)
        if w.ndim == 2 and qtype != Q.F32:
            writer.add_tensor(name, gguf.quants.quantize(w, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, np.ascontiguousarray(w, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _tiny(cls, config_cls, **extra):
    torch.manual_seed(0)
    config = config_cls(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        **extra,
    )
    lm = cls(config).eval()
    with torch.no_grad():  # norms away from their initial ones, so a wrong mapping of them shows
        for p in lm.parameters():
            if p.ndim == 1:
                p.copy_(torch.rand(p.shape) + 0.5)
    return lm


def _written(folder: Path) -> dict[str, torch.Tensor]:
    index = folder / "model.safetensors.index.json"
    files = (
        sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    )
    out = {}
    for file in files:
        with safe_open(folder / file, "pt") as fh:
            out.update({k: fh.get_tensor(k) for k in fh.keys()})  # noqa: SIM118 (a safe_open handle is not a dict)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
def test_exact_llama_weights_come_back_unpermuted(tmp_path, tied):
    """A float32 GGUF written from a llama model the way llama.cpp writes it (query and key rows permuted) comes
    back as the model's own state dict, exactly, under transformers' names; a tied LM head is not written."""
    lm = _tiny(LlamaForCausalLM, LlamaConfig, tie_word_embeddings=tied)
    _write_gguf(tmp_path / "m.gguf", "llama", lm, Q.F32)
    write_dequantised(tmp_path, "m.gguf", "llama")
    got = _written(tmp_path)
    want = {k: v for k, v in lm.state_dict().items() if not (tied and k == "lm_head.weight")}
    assert set(got) == set(want)
    for name, value in want.items():
        assert torch.equal(got[name], value), name
    assert json.loads((tmp_path / "config.json").read_text())["tie_word_embeddings"] is tied


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "family", "qtype"),
    [("llama", "llama", Q.Q4_1), ("llama", "llama", Q.Q8_0), ("qwen2", "qwen2", Q.Q4_0)],
)
def test_quantised_weights_equal_transformers_gguf_loader(tmp_path, arch, family, qtype, monkeypatch):
    """Quantised GGUF files (llama with its permutation, qwen2 with its query/key/value biases and no permutation)
    dequantised tensor by tensor equal transformers' whole-model GGUF loader's weights exactly, also when written
    in several shards with an index, and load back with ``from_pretrained``."""
    cls, config_cls = (LlamaForCausalLM, LlamaConfig) if arch == "llama" else (Qwen2ForCausalLM, Qwen2Config)
    lm = _tiny(cls, config_cls, tie_word_embeddings=False)
    _write_gguf(tmp_path / "m.gguf", arch, lm, qtype)
    monkeypatch.setattr(gguf_tensors, "MAX_SHARD_BYTES", 64 * 1024)
    files = write_dequantised(tmp_path, "m.gguf", family)
    assert len(files) > 2 and files[-1] == "model.safetensors.index.json"
    reference = cls.from_pretrained(tmp_path, gguf_file="m.gguf", dtype=torch.float32).state_dict()
    got = _written(tmp_path)
    assert set(got) == set(reference)
    for name, value in reference.items():
        assert torch.equal(got[name], value), name
    assert not torch.equal(
        got["model.layers.0.mlp.up_proj.weight"], lm.state_dict()["model.layers.0.mlp.up_proj.weight"]
    )
    loaded = cls.from_pretrained(tmp_path, dtype=torch.float32, use_safetensors=True).state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in reference.items())


@pytest.mark.slow
def test_a_gguf_file_missing_a_parameter_is_refused(tmp_path):
    """A file without one of the model's parameters is refused naming it, before any weight file is written."""
    lm = _tiny(LlamaForCausalLM, LlamaConfig, tie_word_embeddings=True)
    _write_gguf(tmp_path / "m.gguf", "llama", lm, Q.F32, skip=("blk.1.ffn_down.weight",))
    with pytest.raises(AcquisitionError, match=r"model\.layers\.1\.mlp\.down_proj\.weight"):
        write_dequantised(tmp_path, "m.gguf", "llama")
    assert not list(tmp_path.glob("*.safetensors"))


@pytest.mark.slow
def test_peak_memory_stays_below_the_float32_model(tmp_path):
    """The memory the dequantisation allocates (tracemalloc: numpy's arrays and Python's objects; the GGUF file is
    memory-mapped) peaks below the float32 model's size, within a few of its largest tensors; transformers'
    whole-model loader, measured the same way, peaks above the model's size (so the measure would see a whole-model
    load)."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    lm = LlamaForCausalLM(config).eval()
    _write_gguf(tmp_path / "m.gguf", "llama", lm, Q.Q8_0)
    model_bytes = 4 * sum(p.numel() for p in lm.parameters())
    largest = 4 * max(p.numel() for p in lm.parameters())
    del lm
    write_dequantised(tmp_path, "m.gguf", "llama")  # the imports and first-use caches, outside the measure
    for f in tmp_path.glob("*.safetensors"):
        f.unlink()
    tracemalloc.start()
    try:
        write_dequantised(tmp_path, "m.gguf", "llama")
        _, ours = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        parsed = load_gguf_checkpoint(
            str(tmp_path / "m.gguf"), return_tensors=True, model_to_load=LlamaForCausalLM(config)
        )
        _, whole = tracemalloc.get_traced_memory()
        del parsed
    finally:
        tracemalloc.stop()
    assert ours < model_bytes / 2 and ours < 6 * largest, (ours, model_bytes, largest)
    assert whole > model_bytes, (whole, model_bytes)
