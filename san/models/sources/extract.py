"""The extractions that make a model folder of what a source fetched: the tower of a dual text-image checkpoint,
the encoder stack of an encoder-decoder checkpoint, the text model of a multimodal wrapper, and safetensors written
from pickle weights. Each rewrites the folder in place and returns what the manifest records of it (the sha256 of
the files it replaced, the tensors kept and left out); the store runs them after the one pin check
(:func:`san.models.store.store`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from san.models.folders import AcquisitionError, sha256_file
from san.models.recognise import STACK_FAMILIES
from san.models.spec import FAMILY_TABLE

#: the class of each tower of a dual text-image checkpoint, by the checkpoint's model_type and the tower (``vision``
#: or ``text``): the rows that are such towers (:attr:`san.models.spec.FamilyRow.tower_of`)
TOWER_CLASSES = {row.tower_of: row.model_class for row in FAMILY_TABLE.values() if row.tower_of}


def extract_tower(folder: Path, tower: str, where: str) -> dict[str, Any]:
    """Make the acquired folder of a dual text-image checkpoint (CLIP, SigLIP: ``config.json`` with a
    ``vision_config`` and a ``text_config``) the folder of its ``tower`` (``vision`` or ``text``): ``config.json``
    becomes the ``<tower>_config`` (``architectures``: the class of the row whose ``tower_of`` is the checkpoint's
    model_type and ``tower``, :data:`TOWER_CLASSES`), ``model.safetensors`` the
    ``<tower>_model.`` tensors without that prefix (the other tower, the projections and the logit scale are left
    out). The vision tower is analysed as an image encoder, the text tower as a text model of the table. What the
    manifest records: the checkpoint's architecture, the sha256 of its config and weight files, the number of
    tensors kept and left out."""
    classes = {model_type: cls for (model_type, side), cls in TOWER_CLASSES.items() if side == tower}
    key, prefix = f"{tower}_config", f"{tower}_model."
    config = json.loads((folder / "config.json").read_text())
    model_type = config.get("model_type")
    if model_type not in classes or not isinstance(config.get(key), dict):
        raise AcquisitionError(
            f"{where}: a {tower} tower is taken from a dual text-image checkpoint with a {key} (model_type one of "
            f"{sorted(classes)}), but config.json has model_type {model_type!r}"
        )
    part = {**config[key], "architectures": [classes[model_type]]}
    part.setdefault("model_type", f"{model_type}_{tower}_model")
    originals, kept, left_out = keep_renamed(folder, ((prefix, ""),), where, f"{prefix!r} tensors")
    (folder / "config.json").write_text(json.dumps(part, indent=2, sort_keys=True))
    return {"architecture": config.get("architectures"), "sha256": originals, "tensors": kept,
            "left_out": left_out}  # fmt: skip


def extract_encoder_stack(folder: Path, where: str) -> dict[str, Any]:
    """Make the acquired folder of an encoder-decoder checkpoint (``architectures[0]`` one of a family's
    ``stack_of``: ``T5ForConditionalGeneration``, an encoder-only ``T5EncoderModel`` too) its encoder stack's:
    ``config.json`` names the family's encoder-only class (``architectures``; the rest of the config is the
    checkpoint's, which that class reads), ``model.safetensors`` the tensors the row's ``stack_tensors`` keep,
    renamed (the decoder and the LM head are left out). What the manifest records: the checkpoint's architecture,
    the sha256 of its config and weight files, the number of tensors kept and left out."""
    config = json.loads((folder / "config.json").read_text())
    architecture = (config.get("architectures") or [None])[0]
    encoders = {a: name for name, row in FAMILY_TABLE.items() if row.stack_of for a in row.architectures}
    family = STACK_FAMILIES.get(architecture) or encoders.get(architecture)
    if family is None:
        raise AcquisitionError(
            f"{where}: an encoder stack is taken from an encoder-decoder checkpoint whose architectures[0] is one of "
            f"{sorted({*STACK_FAMILIES, *encoders})}, but config.json has architectures {config.get('architectures')}"
        )
    row = FAMILY_TABLE[family]
    originals, kept, left_out = keep_renamed(folder, row.stack_tensors, where, "encoder tensors")
    (folder / "config.json").write_text(json.dumps({**config, "architectures": [row.model_class]}, indent=2))
    return {"architecture": config.get("architectures"), "sha256": originals, "tensors": kept,
            "left_out": left_out}  # fmt: skip


#: prefixes of a multimodal wrapper's text-model weights (both of transformers' layouts), and what they are in the
#: text model's own causal-LM checkpoint; the first that matches a key applies
TEXT_MODEL_PREFIXES = (
    ("language_model.model.", "model."),
    ("model.language_model.", "model."),
    ("language_model.lm_head.", "lm_head."),
    ("language_model.", "model."),
)


def extract_text_model(folder: Path, where: str) -> dict[str, Any]:
    """Make the acquired folder of a multimodal wrapper (a vision-language model whose ``config.json`` holds a
    ``text_config``) its text model's: ``config.json`` becomes the ``text_config`` (``architectures``: the text
    model_type's causal LM), ``model.safetensors`` the text model's tensors (:data:`TEXT_MODEL_PREFIXES`, renamed;
    the vision tower and projector are left out). What the manifest records: the wrapper's architecture, the sha256
    of its config and weight files, the number of tensors kept and left out."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    config = json.loads((folder / "config.json").read_text())
    text = dict(config["text_config"])
    where = f"{where}: a multimodal wrapper"
    originals, kept, left_out = keep_renamed(folder, TEXT_MODEL_PREFIXES, where, "text-model weights")
    model_type = text.get("model_type")
    architecture = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or MODEL_MAPPING_NAMES.get(model_type)
    (folder / "config.json").write_text(json.dumps({**text, "architectures": [architecture]}, indent=2))
    return {
        "architectures": config.get("architectures"),
        "model_type": config.get("model_type"),
        "sha256": originals,
        "tensors_kept": kept,
        "tensors_left_out": left_out,
    }


def keep_renamed(folder: Path, renames: tuple[tuple[str, str], ...], where: str, what: str) -> tuple[dict, int, int]:
    """Rewrite ``folder``'s safetensors as one ``model.safetensors`` of the tensors whose names start with a prefix of
    ``renames`` (``(old, new)``: the first that matches applies, ``old`` replaced by ``new``), the others left out;
    refused, naming ``where`` and ``what`` is missing, when none matches. Returns the sha256 of the original config
    and weight files, the number of tensors kept and the number left out."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    weights = sorted(folder.glob("*.safetensors"))
    index = folder / "model.safetensors.index.json"
    originals = {p.name: sha256_file(p) for p in [folder / "config.json", *weights, index] if p.is_file()}
    kept: dict[str, torch.Tensor] = {}
    left_out = 0
    for path in weights:
        with safe_open(path, "pt") as fh:
            for name in fh.keys():  # noqa: SIM118 - a safetensors handle is not a mapping
                match = next(((old, new) for old, new in renames if name.startswith(old)), None)
                if match is None:
                    left_out += 1
                    continue
                kept[match[1] + name[len(match[0]) :]] = fh.get_tensor(name)
    if not kept:
        raise AcquisitionError(
            f"{where}: the checkpoint holds no {what} (no key starts with any of {[old for old, _ in renames]})"
        )
    for path in [*weights, index]:
        path.unlink(missing_ok=True)
    save_file(kept, folder / "model.safetensors", metadata={"format": "pt"})
    return originals, len(kept), left_out


def convert_pickle(folder: Path, names: list[str], where: str, fetched: dict[str, str]) -> dict[str, Any]:
    """Convert the pickle checkpoint files ``names`` of ``folder`` (``pytorch_model*.bin``, fetched only for an
    entry with ``allow_pickle: true``) into safetensors files of the same tensors and remove them: the pickles are
    read with ``torch.load(weights_only=True)`` (tensors and plain containers only, no code), every later load
    reads the safetensors. What the manifest records: the pickles' sha256 (of ``fetched``, the sha256 of the files
    as the source handed them over) and the conversion."""
    if not names:
        return {}
    from safetensors.torch import save_file

    hashes, converted = {}, {}
    for name in names:
        path = folder / name
        hashes[name] = fetched[name]
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure of an untrusted file
            raise AcquisitionError(f"{where}: {name} is not a loadable tensor checkpoint ({exc})") from exc
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise AcquisitionError(f"{where}: {name} does not hold a mapping of names to tensors")
        target = name.replace("pytorch_model", "model").removesuffix(".bin") + ".safetensors"
        save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, folder / target, {"format": "pt"})
        converted[name] = target
        path.unlink()
    index = folder / "pytorch_model.bin.index.json"
    if index.is_file():
        data = json.loads(index.read_text())
        data["weight_map"] = {k: converted.get(v, v) for k, v in data.get("weight_map", {}).items()}
        (folder / "model.safetensors.index.json").write_text(json.dumps(data, indent=2))
        hashes[index.name] = fetched[index.name]
        index.unlink()
    return {
        "pickle_sha256": hashes,
        "converted_from_pickle": (
            f"safetensors written from the pickle checkpoint {sorted(converted)} by the acquisition job "
            "(allow_pickle: true; torch.load with weights_only=True)"
        ),
    }
