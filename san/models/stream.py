"""Loading a model tensor by tensor, and models larger than a memory budget.

A model is built without weights (``accelerate.init_empty_weights``: its parameters on the ``meta`` device) and
filled from its safetensors checkpoint one tensor at a time, each converted to the requested dtype as it is read
(:func:`safetensors.safe_open` maps the file; a tensor's pages are read when it is converted and released when the
file is closed), so loading bfloat16 from a float32 checkpoint peaks at the bfloat16 weights plus one float32
tensor, not at both copies of the whole model.

With a memory budget (``compute.<rule>.memory_budget_mb``) the weights outside the blocks (embeddings, final norm)
and as many blocks as fit are held; every other block stays on ``meta`` and is read from the checkpoint when the
forward pass reaches it (a forward pre-hook of the block) and dropped again after it (a forward hook). Plain module
hooks run around whatever ``forward`` a block has, so the per-instance overrides of the ablations
(:mod:`san.models.ablations`) and the residual-stream hooks of :mod:`san.rank_collapse.experiment` see the same
computation on the same weights: a streamed model gives the numbers of the model held in memory. On a GPU the
budget is the device memory of the weights: held and streamed tensors alike are placed there.

The plan (:func:`plan_blocks`) keeps room for one streamed block beside the held ones; a budget that cannot hold
the weights outside the blocks and one block is refused before anything is read, naming the config key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

#: safetensors' dtype names and their sizes in bytes
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1}
#: safetensors' names of the float dtypes this project loads
SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
MB = 2**20


def checkpoint_files(folder: str | Path) -> dict[str, str]:
    """Every tensor name of a folder's safetensors checkpoint and the file holding it: ``model.safetensors`` or the
    shards a ``model.safetensors.index.json`` maps; FileNotFoundError naming the folder when it has neither."""
    folder = Path(folder)
    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(folder / "model.safetensors", "pt") as fh:
            return dict.fromkeys(fh.keys(), "model.safetensors")  # noqa: SIM118 - not a mapping
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return dict(json.loads(index.read_text())["weight_map"])
    raise FileNotFoundError(f"{folder} has no model.safetensors nor model.safetensors.index.json")


def checkpoint_dtypes(folder: str | Path) -> set[torch.dtype]:
    """The float dtypes of a folder's checkpoint tensors (read from the safetensors headers, no tensor is read)."""
    from safetensors import safe_open

    folder = Path(folder)
    found = set()
    by_file: dict[str, list[str]] = {}
    for key, name in checkpoint_files(folder).items():
        by_file.setdefault(name, []).append(key)
    for name, keys in by_file.items():
        with safe_open(folder / name, "pt") as fh:
            found |= {SAFETENSORS_DTYPES[d] for k in keys if (d := fh.get_slice(k).get_dtype()) in SAFETENSORS_DTYPES}
    return found


@dataclass(frozen=True)
class Plan:
    """Which blocks a budget holds: the first ``held`` of ``blocks``; the bytes (in the load's dtype) of the weights
    outside the blocks (``resident_bytes``) and of each block (``block_bytes``), and of the largest checkpoint
    tensor as stored (``reading_bytes``: its file pages are mapped while it is read into a streamed block)."""

    blocks: int
    held: int
    resident_bytes: int
    block_bytes: tuple[int, ...]
    reading_bytes: int = 0

    @property
    def streamed(self) -> int:
        return self.blocks - self.held

    def weights_bytes(self) -> int:
        """The bytes of all weights (held or not)."""
        return self.resident_bytes + sum(self.block_bytes)

    def peak_bytes(self) -> int:
        """The most weight bytes in memory at once: the held weights and, when a block is streamed, the largest
        streamed block and the checkpoint tensor being read into it."""
        streamed = max(self.block_bytes[self.held :], default=0)
        reading = self.reading_bytes if self.held < self.blocks else 0
        return self.resident_bytes + sum(self.block_bytes[: self.held]) + streamed + reading


def plan_blocks(
    resident_bytes: int, block_bytes: Sequence[int], budget_bytes: int | None, key: str, reading_bytes: int = 0
) -> Plan:
    """Hold the weights outside the blocks and the first blocks that fit in ``budget_bytes`` beside room for the
    largest remaining block (streamed) and the checkpoint tensor being read (``reading_bytes``); every block when
    the budget holds the whole model or is None. ValueError naming ``key`` when the budget cannot hold the weights
    outside the blocks, the largest block and the tensor being read."""
    sizes = tuple(int(b) for b in block_bytes)
    total = resident_bytes + sum(sizes)
    if budget_bytes is None or total <= budget_bytes:
        return Plan(len(sizes), len(sizes), resident_bytes, sizes, reading_bytes)
    need = Plan(len(sizes), 0, resident_bytes, sizes, reading_bytes).peak_bytes()
    if need > budget_bytes:
        raise ValueError(
            f"{key}: {budget_bytes / MB:.0f} MB cannot hold this model streamed block by block: the weights outside "
            f"the blocks ({resident_bytes / MB:.0f} MB), its largest block ({max(sizes) / MB:.0f} MB) and the "
            f"largest tensor being read ({reading_bytes / MB:.0f} MB) need {need / MB:.0f} MB (the whole model: "
            f"{total / MB:.0f} MB)"
        )
    held = 0
    while held < len(sizes) and Plan(len(sizes), held + 1, resident_bytes, sizes, reading_bytes).peak_bytes() <= (
        budget_bytes
    ):
        held += 1
    return Plan(len(sizes), held, resident_bytes, sizes, reading_bytes)


def _qualified_names(model: nn.Module, blocks: Sequence[nn.Module]) -> list[str]:
    """The names of the distinct modules ``blocks`` inside ``model``, in order (a block shared by several layers,
    ALBERT's, once)."""
    names = {id(m): name for name, m in model.named_modules(remove_duplicate=False)}
    seen: dict[int, str] = {}
    for block in blocks:
        seen.setdefault(id(block), names[id(block)])
    return list(seen.values())


#: the LayerNorm names of old checkpoints (BERT's original ``gamma``/``beta``) and transformers' names for them
LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}


def _legacy(key: str) -> list[str]:
    """``key`` with an old LayerNorm suffix renamed as transformers renames it on loading (none otherwise)."""
    return [key[: -len(old)] + new for old, new in LEGACY_SUFFIXES.items() if key.endswith(old)]


def key_map(
    checkpoint_keys: Sequence[str], model_keys: Sequence[str], base_prefix: str
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The model tensor each checkpoint key fills (the key itself, without the base model's prefix ``<prefix>.`` of a
    checkpoint saved from a model with a head, or with an old LayerNorm name, :data:`LEGACY_SUFFIXES`) and what does
    not fit: ``missing_keys`` (model tensors no key
    fills) and ``unexpected_keys`` (keys with no place in the model, the head's included; the caller judges them
    as :func:`san.models.load.load_model` does)."""
    wanted = set(model_keys)
    mapping: dict[str, str] = {}
    unexpected = []
    for key in checkpoint_keys:
        stripped = key[len(base_prefix) + 1 :] if base_prefix and key.startswith(base_prefix + ".") else key
        name = next((n for n in (key, stripped, *_legacy(key), *_legacy(stripped)) if n in wanted), None)
        if name is None:
            unexpected.append(key)
        else:
            mapping[key] = name
    filled = set(mapping.values())
    missing = [k for k in model_keys if k not in filled]
    return mapping, {"missing_keys": missing, "unexpected_keys": unexpected}


@dataclass
class Streaming:
    """The streamed blocks of a loaded model: the checkpoint entries ``(file, key, dtype)`` of every tensor of each
    streamed block, by the block's name, and the hooks that load and drop them."""

    folder: Path
    dtype: torch.dtype
    device: torch.device
    plan: Plan
    entries: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    handles: list[Any] = field(default_factory=list)
    loads: int = 0
    #: the memory a streamed block's tensors are read into, by their name inside the block: allocated once and
    #: reused by every streamed block (blocks of one model have the same tensors), so that reading a block allocates
    #: nothing and the allocator's freed memory never piles up between blocks
    slots: dict[str, torch.Tensor] = field(default_factory=dict)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def _read(folder: Path, entries: dict[str, tuple[str, str]], dtype: torch.dtype, device: torch.device):
    """Yield ``(model name, tensor)`` for ``entries`` (model name -> (file, checkpoint key)), each tensor read and
    converted on its own, its file mapped only while it is read."""
    from safetensors import safe_open

    for name, (file, key) in entries.items():
        with safe_open(folder / file, "pt") as fh:
            tensor = fh.get_tensor(key)
            floating = tensor.is_floating_point()
            # a converted (or moved) tensor is a copy; one kept in its dtype on the CPU is copied out of the mapping
            value = tensor.to(device=device, dtype=dtype if floating else tensor.dtype, copy=True)
            del tensor  # the file's mapping ends with the handle
        yield name, value


def _read_into_slots(streaming: Streaming, entries: dict[str, tuple[str, str]]):
    """Yield ``(model name, tensor)`` for a streamed block's ``entries``, each read into its slot of ``streaming``
    (converted to the dtype by the copy itself), its file mapped only while it is read."""
    from safetensors import safe_open

    for name, (file, key) in entries.items():
        slot_name = _inside_block(name, streaming.entries)
        with safe_open(streaming.folder / file, "pt") as fh:
            source = fh.get_tensor(key)
            dtype = streaming.dtype if source.is_floating_point() else source.dtype
            slot = streaming.slots.get(slot_name)
            if slot is None or slot.shape != source.shape or slot.dtype != dtype:
                slot = streaming.slots[slot_name] = torch.empty(source.shape, dtype=dtype, device=streaming.device)
            slot.copy_(source)
            del source
        yield name, slot


def _inside_block(name: str, blocks: dict[str, Any]) -> str:
    """A tensor's name inside its streamed block (``layers.7.mlp.up_proj.weight`` -> ``mlp.up_proj.weight``)."""
    block = next(b for b in blocks if name.startswith(b + "."))
    return name[len(block) + 1 :]


def _set(model: nn.Module, name: str, value: torch.Tensor) -> None:
    """Put ``value`` in place of the parameter or buffer ``name`` (dotted) of ``model``."""
    from accelerate.utils import set_module_tensor_to_device

    set_module_tensor_to_device(model, name, value.device, value=value)


def load_tensorwise(
    model_cls: type[nn.Module],
    folder: str | Path,
    blocks_of: Any,
    dtype: torch.dtype,
    device: torch.device | str = "cpu",
    budget_mb: float | None = None,
    key: str = "memory_budget_mb",
    check: Any = None,
) -> tuple[nn.Module, Streaming | None]:
    """Build ``model_cls`` from ``folder``'s config.json without weights and fill it tensor by tensor in ``dtype``
    on ``device``; with ``budget_mb``, the blocks (``blocks_of(model)``, the family's residual-stream blocks) that do
    not fit are streamed (module docstring). ``check(info)`` judges the keys that do not fit (missing and unexpected
    model tensors, wrong shapes) before any tensor is read. Returns the model in eval mode, eager attention, and its
    :class:`Streaming` (None when every block is held)."""
    folder = Path(folder)
    device = torch.device(device)
    model = _skeleton(model_cls, folder, dtype)
    files = checkpoint_files(folder)
    tensors = dict(model.named_parameters())
    tensors.update({n: b for n, b in model.named_buffers() if b is not None})
    mapping, info = _mapping(model, folder, files, tensors)
    if check is not None:
        check(info)
    block_names = _qualified_names(model, list(blocks_of(model)))
    by_block: dict[str, dict[str, tuple[str, str]]] = {b: {} for b in block_names}
    resident: dict[str, tuple[str, str]] = {}
    for ckpt_key, name in mapping.items():
        block = next((b for b in block_names if name.startswith(b + ".")), None)
        (by_block[block] if block else resident)[name] = (files[ckpt_key], ckpt_key)
    size = torch.finfo(dtype).bits // 8

    def nbytes(entries: dict[str, tuple[str, str]]) -> int:
        return sum(tensors[n].numel() * (size if tensors[n].is_floating_point() else tensors[n].element_size())
                   for n in entries)  # fmt: skip

    budget = None if budget_mb is None else int(budget_mb * MB)
    stored = max(torch.finfo(d).bits // 8 for d in checkpoint_dtypes(folder) | {dtype})
    reading = max((tensors[n].numel() * stored for entries in by_block.values() for n in entries), default=0)
    plan = plan_blocks(nbytes(resident), [nbytes(by_block[b]) for b in block_names], budget, key, reading)
    for name, value in _read(folder, resident, dtype, device):
        _set(model, name, value)
    for block in block_names[: plan.held]:
        for name, value in _read(folder, by_block[block], dtype, device):
            _set(model, name, value)
    for name, buffer in model.named_buffers():
        if buffer is not None and buffer.device != device:
            _set(model, name, buffer.to(device))
    if plan.streamed == 0:
        return model, None
    streaming = Streaming(folder, dtype, device, plan, {b: by_block[b] for b in block_names[plan.held :]})
    modules = dict(model.named_modules())
    for block, entries in streaming.entries.items():
        streaming.handles += _stream_hooks(model, modules[block], entries, streaming)
    return model, streaming


def _skeleton(model_cls: type[nn.Module], folder: Path, dtype: torch.dtype) -> nn.Module:
    """``model_cls`` of ``folder``'s config.json with eager attention and experts, in eval mode, its parameters on
    ``meta`` in ``dtype`` and its buffers computed at init cast to ``dtype``, as a loaded model's are."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # mixture-of-experts layers: the loop over experts, as in load_model
    with init_empty_weights(include_buffers=False):
        model = model_cls(config)
    return model.to(dtype).eval()


def _mapping(
    model: nn.Module, folder: Path, files: dict[str, str], tensors: dict[str, torch.Tensor]
) -> tuple[dict[str, str], dict[str, list]]:
    """:func:`key_map` of the checkpoint onto ``model``'s parameters and buffers, with the shapes compared: the
    map and what does not fit (a buffer the file lacks is computed at init and is not missing)."""
    params = list(dict(model.named_parameters()))
    mapping, info = key_map(list(files), params + [n for n in tensors if n not in params], model.base_model_prefix)
    info["missing_keys"] = [k for k in info["missing_keys"] if k in params]
    shapes = _shapes(folder, files, mapping)
    info["mismatched_keys"] = [name for name in mapping.values() if shapes[name] != tuple(tensors[name].shape)]
    return mapping, info


def _stream_hooks(model: nn.Module, block: nn.Module, entries: dict[str, tuple[str, str]], streaming: Streaming):
    """The forward pre-hook that reads a streamed block's tensors and the forward hook that drops them (back to
    ``meta``); registered first and last so that every other hook sees the block with its weights. The hooks hold
    the model weakly: a model and its hooks form no reference cycle, so the model's memory is returned as soon as
    its last reference goes, without waiting for the garbage collector."""
    import weakref

    owner = weakref.ref(model)

    def load(module: nn.Module, args: tuple, kwargs: dict) -> None:
        for name, value in _read_into_slots(streaming, entries):
            _set(owner(), name, value)
        streaming.loads += 1

    def drop(module: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
        from accelerate.utils import set_module_tensor_to_device

        for name in entries:
            set_module_tensor_to_device(owner(), name, "meta")

    return [
        block.register_forward_pre_hook(load, with_kwargs=True, prepend=True),
        block.register_forward_hook(drop, with_kwargs=True, always_call=True),
    ]


def _shapes(folder: Path, files: dict[str, str], mapping: dict[str, str]) -> dict[str, tuple[int, ...]]:
    """The shape of every mapped checkpoint tensor by its model name (from the headers; no tensor is read)."""
    from safetensors import safe_open

    by_file: dict[str, list[str]] = {}
    for ckpt_key in mapping:
        by_file.setdefault(files[ckpt_key], []).append(ckpt_key)
    shapes = {}
    for file, keys in by_file.items():
        with safe_open(folder / file, "pt") as fh:
            for ckpt_key in keys:
                shapes[mapping[ckpt_key]] = tuple(fh.get_slice(ckpt_key).get_shape())
    return shapes
