"""GGUF weights (a quantised single-file format of decoders): one parse per file, the record of its tensor types,
and the float32 dequantisation that a model folder keeps beside the GGUF file (transformers computes GGUF weights in
float32 whatever dtype is asked for; the experiment needs float64, so the acquisition dequantises once: the
``derive`` step of a GGUF source, :func:`dequantised`)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer, GenerationConfig

from san.models.families import family as family_entry
from san.models.folders import AcquisitionError
from san.models.sources.fetched import Derived
from san.models.sources.gguf_tensors import write_gguf_weights


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within this context every ``gguf.GGUFReader`` of a file returns the first reader of that file.

    transformers' GGUF loader parses the file anew for the tokenizer, for the config and for the weights (each call
    of ``load_gguf_checkpoint`` constructs a ``GGUFReader``), and a parse walks the whole tokenizer vocabulary element
    by element, which is slow for a large vocabulary such as Gemma-3's 262,144 tokens. A reader is a read-only
    memory map with the parsed fields and tensor descriptions, which the loader only reads, so sharing one gives the
    same results.
    """
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: str | os.PathLike, mode: str = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = reader
    try:
        yield
    finally:
        gguf.GGUFReader = original
        readers.clear()


def gguf_tensor_types(path: Path) -> dict[str, int]:
    """How many tensors of a GGUF file are stored in each type (e.g. ``{"Q4_1": 211, "F32": 61}``): the record of
    what quantisation the weights went through."""
    import gguf

    return dict(sorted(Counter(t.tensor_type.name for t in gguf.GGUFReader(path).tensors).items()))


def dequantise_gguf(folder: Path, gguf_file: str, family: str) -> list[str]:
    """Write the float32 dequantisation of the GGUF file ``gguf_file`` of ``folder`` beside it as the family's causal
    LM (:func:`write_dequantised`) and its tokenizer (transformers' reading of the file's vocabulary); call it within
    :func:`gguf_parsed_once` to parse the file once. The weight files written."""
    files = write_dequantised(folder, gguf_file, family)
    AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file).save_pretrained(folder)
    return files


def write_dequantised(folder: Path, gguf_file: str, family: str) -> list[str]:
    """Write config.json, the generation config and the float32 safetensors weights of the GGUF file ``gguf_file``
    of ``folder`` as the family's causal LM: the config is transformers' reading of the file's metadata, the weights
    are written tensor by tensor (:func:`san.models.sources.gguf_tensors.write_gguf_weights`: one float32 tensor in
    memory at a time, never the whole model) in the names and layout transformers' GGUF loader gives them. The
    weight files written."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    entry = family_entry(family)
    if entry.lm_cls is None:
        raise AcquisitionError(f"family {family!r} has no causal-LM class: GGUF weights are for decoders")
    path = folder / gguf_file
    metadata = load_gguf_checkpoint(str(path))["config"]
    config = AutoConfig.from_pretrained(folder, gguf_file=gguf_file)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.float32
    with torch.device("meta"):
        lm = entry.lm_cls(config)
    files = write_gguf_weights(gguf.GGUFReader(path), metadata, lm, folder)
    config.architectures = [type(lm).__name__]
    config.save_pretrained(folder)
    if lm.can_generate():
        GenerationConfig.from_model_config(config).save_pretrained(folder)
    return files


def dequantised(name: str, family: str | None) -> Callable[[Path], Derived]:
    """The ``derive`` step of a model folder holding the GGUF file ``name`` (checked against its pin by then): its
    tensor types and float32 dequantisation (:func:`dequantise_gguf`, the file parsed once), and what the manifest
    records of them (the sanity check loads the folder)."""

    def derive(folder: Path) -> Derived:
        with gguf_parsed_once():
            types = gguf_tensor_types(folder / name)
            files = dequantise_gguf(folder, name, family)
        return {
            "gguf_tensor_types": types,
            "dequantised": (
                f"{', '.join(files)}, config.json and the tokenizer files were written from {name} by the "
                f"acquisition job (dequantised tensor by tensor with the gguf package into transformers' names and "
                f"layout, float32); the weights are a quantisation of the original ones ({types}), not the original "
                "weights"
            ),
        }, None

    return derive
