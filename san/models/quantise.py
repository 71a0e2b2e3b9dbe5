"""Quantised copies of a model folder, the control of every measure taken on quantised weights: each weight matrix
quantised to a GGUF block type with the ``gguf`` package (llama.cpp's reference quantisers) and dequantised again,
tensor by tensor, into a new folder of the same architecture (float32 safetensors), so the rank-collapse measures of
the copy against the original show how far quantisation alone moves them.

The kinds are the decoders' own (:data:`QUANT_TYPES`): Q4_1 (SmolLM2's GGUF file), and Q4_0 and Q8_0, the coarser and
finer neighbours of Q4_K_M (Gemma-3's and Qwen2.5's files; the ``gguf`` package has no K-quant quantiser). As
llama.cpp does, only matrices are quantised (every 2-D weight whose rows are whole blocks: the linear maps and the
embeddings); norms, biases and position tables stay as they are.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from san.models.folders import AcquisitionError, write_manifest
from san.models.sources.gguf_tensors import Planned, write_safetensors

#: the GGUF block types a copy is quantised to (the decoders' kinds: Q4_1 exactly, Q4_0 and Q8_0 around Q4_K_M)
QUANT_TYPES = ("Q4_0", "Q4_1", "Q8_0")


def quantise_roundtrip(values: np.ndarray, kind: str) -> np.ndarray:
    """``values`` quantised to the GGUF block type ``kind`` row by row and dequantised again (float32): what a
    weight matrix stored as ``kind`` holds. A tensor that is not a matrix of whole blocks per row is returned as
    float32 unchanged (llama.cpp keeps such tensors in float)."""
    import gguf

    if kind not in QUANT_TYPES:
        raise ValueError(f"unknown quantisation {kind!r}; expected one of {list(QUANT_TYPES)}")
    qtype = gguf.GGMLQuantizationType[kind]
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    values = np.ascontiguousarray(values, dtype=np.float32)
    if values.ndim != 2 or values.shape[1] % block:
        return values
    return gguf.quants.dequantize(gguf.quants.quantize(values, qtype), qtype).reshape(values.shape)


def is_quantised(name: str, shape: tuple[int, ...], kind: str) -> bool:
    """Whether :func:`quantise_roundtrip` quantises the tensor ``name`` of shape ``shape`` to ``kind``."""
    import gguf

    block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]][0]
    return len(shape) == 2 and shape[1] % block == 0


def quantised_copy(folder: Path, kind: str, out: Path) -> dict[str, Any]:
    """Write a copy of the model folder ``folder`` to ``out`` with every weight matrix round-tripped through the GGUF
    block type ``kind`` (:func:`quantise_roundtrip`), tensor by tensor (one float32 tensor in memory at a time), its
    config and tokenizer files copied; the manifest records the original folder's manifest, the kind and the
    tensors quantised. ``out`` is written beside its place and moved there when complete."""
    from safetensors import safe_open

    from san.models.store import staged

    manifest_file = folder / "manifest.json"
    if not manifest_file.is_file():
        raise AcquisitionError(f"{folder} is not an acquired model folder (no manifest.json)")
    source = json.loads(manifest_file.read_text())
    weight_files = _weight_files(folder)
    with staged(Path(out)) as staging:
        staging.mkdir(parents=True)
        quantised: list[str] = []
        for file in weight_files:
            if file.endswith(".json"):
                shutil.copy2(folder / file, staging / file)
                continue
            with safe_open(folder / file, "np") as fh:
                plan = [Planned(name, name, tuple(fh.get_slice(name).get_shape())) for name in fh.keys()]  # noqa: SIM118

                def values(plan: list[Planned] = plan, fh: Any = fh) -> Any:
                    for p in plan:
                        yield quantise_roundtrip(fh.get_tensor(p.name), kind)

                write_safetensors(staging / file, plan, values())
            quantised += [p.name for p in plan if is_quantised(p.name, p.shape, kind)]
        for other in folder.iterdir():
            if other.is_file() and other.name not in weight_files and other.name != "manifest.json":
                shutil.copy2(other, staging / other.name)
        record = {
            "source": "quantised_copy",
            "quantisation": kind,
            "quantised_tensors": sorted(quantised),
            "of": {k: source[k] for k in source if k != "sha256"} | {"sha256": source.get("sha256")},
            "family": source.get("family"),
            "recognition": source.get("recognition"),
        }
        return write_manifest(staging, record)


def _weight_files(folder: Path) -> list[str]:
    """The safetensors weights of a model folder: ``model.safetensors``, or the index and its shards."""
    if (folder / "model.safetensors").is_file():
        return ["model.safetensors"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return [index.name, *sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    raise AcquisitionError(f"{folder} has no safetensors weights")
