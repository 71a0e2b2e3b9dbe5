"""A GGUF file dequantised tensor by tensor into safetensors shards: each tensor is read from the memory-mapped file,
dequantised (``gguf.quants.dequantize``), put in transformers' layout and written straight to its shard, so the
acquisition holds one float32 tensor at a time, never the whole model (transformers' GGUF loader dequantises every
tensor into one state dict first: about 15 bytes per parameter at its peak, 23 GB for a 1.5B-parameter model).

The names and layout are transformers' own: the GGUF-to-state-dict name map
(``transformers.modeling_gguf_pytorch_utils.get_gguf_hf_weights_map``, built from gguf-py's tensor name map on a
model built on the meta device) and the architecture's tensor processor (``TENSOR_PROCESSORS``: the reverse of
llama.cpp's rotary permutation of the query and key rows for ``llama``, Gemma's norm weights stored as ``1 + w``),
so the shards hold what ``from_pretrained(..., gguf_file=...)`` would load (tests/unit/models/test_gguf_tensors.py
compares them on a GGUF file written with ``gguf.GGUFWriter``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from san.models.folders import AcquisitionError

#: the largest shard written (bytes of float32 data); a model that fits one shard gets a plain model.safetensors
MAX_SHARD_BYTES = 2 << 30


@dataclass(frozen=True)
class Planned:
    """One GGUF tensor's place in the shards: its GGUF name, its state-dict name and shape (transformers' layout)."""

    gguf_name: str
    name: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return 4 * int(np.prod(self.shape, dtype=np.int64))


def gguf_state_dict_plan(reader: Any, config_dict: dict[str, Any], lm: Any) -> list[list[Planned]]:
    """The state-dict name and shape of every tensor of the GGUF file ``reader`` that the model ``lm`` (built on the
    meta device from the file's config) has, in file order, split into shards of at most :data:`MAX_SHARD_BYTES`.
    Raises AcquisitionError naming the parameters no tensor of the file fills (a parameter tied to another, the LM
    head tied to the embeddings, needs none)."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map

    architecture = _architecture(reader)
    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=config_dict)
    names = get_gguf_hf_weights_map(lm, processor)
    shapes = {name: tuple(t.shape) for name, t in lm.state_dict().items()}
    planned = [Planned(t.name, names[t.name], shapes[names[t.name]]) for t in reader.tensors if t.name in names]
    wanted = {name for name, _ in lm.named_parameters()} | {name for name, _ in lm.named_buffers() if name in shapes}
    missing = sorted(wanted - {p.name for p in planned})
    if missing:
        raise AcquisitionError(f"the GGUF file ({architecture}) has no tensor for the parameters {missing}")
    shards: list[list[Planned]] = [[]]
    for p in planned:
        if shards[-1] and sum(q.nbytes for q in shards[-1]) + p.nbytes > MAX_SHARD_BYTES:
            shards.append([])
        shards[-1].append(p)
    return shards


def dequantised_tensors(reader: Any, config_dict: dict[str, Any], shard: list[Planned]) -> Iterator[np.ndarray]:
    """The float32 values of the GGUF tensors of ``shard``, one at a time, in transformers' layout (the
    architecture's tensor processor applied), each checked against its planned shape."""
    from gguf.quants import dequantize
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor

    processor = TENSOR_PROCESSORS.get(_architecture(reader), TensorProcessor)(config=config_dict)
    tensors = {t.name: t for t in reader.tensors}
    for p in shard:
        tensor = tensors[p.gguf_name]
        result = processor.process(weights=dequantize(tensor.data, tensor.tensor_type), name=p.gguf_name)
        if result.name != p.gguf_name:
            raise AcquisitionError(
                f"the tensor processor of {_architecture(reader)!r} renames {p.gguf_name}: not read tensor by tensor"
            )
        values = np.ascontiguousarray(result.weights, dtype=np.float32)
        if values.shape != p.shape:
            raise AcquisitionError(
                f"GGUF tensor {p.gguf_name} ({tensor.tensor_type.name}) has shape {values.shape}; {p.name} of the "
                f"model its config describes has {p.shape}"
            )
        yield values
        del result, values  # held by this frame while the writer asks for the next one otherwise


def write_safetensors(path: Path, shard: list[Planned], values: Iterator[np.ndarray]) -> None:
    """Write one safetensors file of float32 tensors, the header first (its names, shapes and offsets are known from
    the plan) and then each tensor's bytes as ``values`` yields them, so only one tensor is in memory at a time. The
    format: an 8-byte little-endian header length, the JSON header (padded with spaces to 8 bytes), the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for p in shard:
        header[p.name] = {"dtype": "F32", "shape": list(p.shape), "data_offsets": [offset, offset + p.nbytes]}
        offset += p.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for _ in shard:
            array = next(values)
            out.write(memoryview(array).cast("B"))
            del array  # the next tensor is dequantised while none is held


def write_gguf_weights(reader: Any, config_dict: dict[str, Any], lm: Any, folder: Path) -> list[str]:
    """Dequantise every tensor of the GGUF file ``reader`` that the meta-device model ``lm`` has into safetensors in
    ``folder``, one tensor at a time (:func:`gguf_state_dict_plan`, :func:`write_safetensors`): ``model.safetensors``,
    or shards ``model-0000i-of-0000n.safetensors`` with transformers' ``model.safetensors.index.json``. The names
    of the files written."""
    shards = gguf_state_dict_plan(reader, config_dict, lm)
    if len(shards) == 1:
        write_safetensors(folder / "model.safetensors", shards[0], dequantised_tensors(reader, config_dict, shards[0]))
        return ["model.safetensors"]
    files = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for file, shard in zip(files, shards, strict=True):
        write_safetensors(folder / file, shard, dequantised_tensors(reader, config_dict, shard))
    index = {
        "metadata": {"total_size": sum(p.nbytes for shard in shards for p in shard)},
        "weight_map": {p.name: file for file, shard in zip(files, shards, strict=True) for p in shard},
    }
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return [*files, "model.safetensors.index.json"]


def _architecture(reader: Any) -> str:
    """The ``general.architecture`` of a GGUF file."""
    field = reader.fields["general.architecture"]
    return bytes(field.parts[field.data[0]]).decode()
