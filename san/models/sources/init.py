"""The ``init`` source: random weights of a family's explicit architecture (``init.config``) drawn with a seed, or of
the architecture of an acquired pretrained folder's ``config.json`` (an entry without ``init.config``), or of an
image encoder's architecture with its family's reference image processor.

A text init gets the WordPiece tokenizer bundled with all-MiniLM-L6-v2 (pinned: :data:`BUNDLED_TOKENIZER_SHA256`; no
offline tokenizer exists for ALBERT/XLNet at init), the vocabulary sized to its ids; an init of a pretrained folder
keeps that folder's tokenizer, each file pinned by the folder's manifest.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer

from san.models.families import family as family_entry
from san.models.folders import (
    BUNDLED_TOKENIZER_PACKAGE,
    BUNDLED_TOKENIZER_SHA256,
    MANIFEST,
    WORKFLOW_MARKERS,
    AcquisitionError,
    bundled_model_dir,
    tokenizer_files,
    verify_folder,
)
from san.models.sources.fetched import Fetched


def init_source(family: str, arch: dict[str, Any], seed: int) -> Fetched:
    """Random weights of a ``family`` model with the explicit architecture ``arch``, drawn with ``seed``.

    The tokenizer is the WordPiece tokenizer bundled with all-MiniLM-L6-v2 (no offline tokenizer exists for
    ALBERT/XLNet at init); the vocabulary is sized to its ids, and the manifest records this.
    """
    entry = family_entry(family)
    if entry.row.modality == "image":
        return image_init_source(family, arch, seed)
    config_cls, model_cls = entry.config_cls, entry.model_cls
    unknown = sorted(set(arch) - set(config_cls().to_dict()))
    if unknown:
        raise AcquisitionError(f"architecture keys {unknown} are not {config_cls.__name__} fields")
    tok_src = bundled_model_dir()
    names = tokenizer_files(tok_src)

    def derive(folder: Path) -> tuple[dict[str, Any], None]:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        cleared = ids_outside_vocabulary({**config_cls().to_dict(), **arch}, len(tokenizer))
        ids = dict.fromkeys(cleared)
        if entry.row.reads_end_token and "eos_token_id" in cleared:  # the forward pools the end token
            ids["eos_token_id"] = tokenizer.sep_token_id
        config = config_cls(**{**arch, "vocab_size": len(tokenizer), **ids})
        torch.manual_seed(seed)
        model_cls(config).save_pretrained(folder, safe_serialization=True)
        extra: dict[str, Any] = {
            "tokenizer": f"WordPiece tokenizer bundled in {BUNDLED_TOKENIZER_PACKAGE} (vocab {len(tokenizer)})"
        }
        if cleared:
            extra["cleared_token_ids"] = cleared
        if ids.get("eos_token_id") is not None:
            extra["end_token_id"] = f"{ids['eos_token_id']} (the bundled tokenizer's sep_token)"
        return extra, None

    return Fetched(
        "init",
        f"init of family {family!r} (tokenizer of package {BUNDLED_TOKENIZER_PACKAGE})",
        {"seed": seed, "architecture": arch},
        family,
        copy={name: tok_src / name for name in names},
        pins={name: BUNDLED_TOKENIZER_SHA256[name] for name in names if name in BUNDLED_TOKENIZER_SHA256},
        require_all=True,
        derive=derive,
    )


def image_init_source(family: str, arch: dict[str, Any], seed: int) -> Fetched:
    """Random weights of an image-encoder ``family`` model with the explicit architecture ``arch``, drawn with
    ``seed``, saved with the image processor of the family's reference checkpoint (:mod:`san.models.images`), so
    that ``AutoImageProcessor`` prepares its images offline."""
    from san.models.images import IMAGE_PROCESSORS, write_image_processor

    entry = family_entry(family)
    config_cls, model_cls = entry.config_cls, entry.model_cls
    unknown = sorted(set(arch) - set(config_cls().to_dict()))
    if unknown:
        raise AcquisitionError(f"architecture keys {unknown} are not {config_cls.__name__} fields")

    def derive(folder: Path) -> tuple[dict[str, Any], None]:
        torch.manual_seed(seed)
        model_cls(config_cls(**arch)).save_pretrained(folder, safe_serialization=True)
        write_image_processor(family, folder)
        return {"image_processor": f"{IMAGE_PROCESSORS[family][0]} of the family's reference checkpoint"}, None

    return Fetched("init", f"init of family {family!r}", {"seed": seed, "architecture": arch}, family, derive=derive)


#: files of a pretrained model folder that an init of its architecture does not take over (weights and their
#: indexes, the config it writes itself, generation settings); the rest is the tokenizer
NOT_TOKENIZER = (
    "*.safetensors", "*.safetensors.index.json", "*.bin", "*.bin.index.json", "*.gguf", "config.json",
    "generation_config.json",
)  # fmt: skip


def init_of_source(pretrained: str | Path, seed: int) -> Fetched:
    """Random weights of the architecture of the acquired ``pretrained`` folder's ``config.json``, drawn with
    ``seed`` (the model's own initialisation, transformers' ``_init_weights``), with that folder's tokenizer: the
    init weights of an entry without ``init.config``. The manifest records the family and its recognition (the
    pretrained model's), the pretrained folder and the sha256 of the config it was built from."""
    src = Path(pretrained)
    origin = verify_folder(src, weights=False)
    family = origin["family"]
    config = AutoConfig.from_pretrained(src, trust_remote_code=False)
    names = [
        p.name
        for p in sorted(src.iterdir())
        if p.is_file()
        and p.name not in (MANIFEST, *WORKFLOW_MARKERS)
        and not any(fnmatch.fnmatch(p.name, pat) for pat in NOT_TOKENIZER)
    ]

    def derive(folder: Path) -> tuple[dict[str, Any], None]:
        model_cls = family_entry(family).model_cls_for(config.model_type)
        torch.manual_seed(seed)
        model_cls(config).save_pretrained(folder, safe_serialization=True)
        return {}, None

    record = {
        "seed": seed,
        "architecture": f"config.json of {src}",
        "architecture_sha256": origin["sha256"]["config.json"],
        "tokenizer": f"the tokenizer of {src}",
        "pretrained": {k: origin[k] for k in ("source", "repo_id", "commit", "path", "package") if k in origin},
    }
    return Fetched(
        "init",
        f"init of {src}",
        record,
        family,  # the saved architecture is of the pretrained folder's family
        copy={name: src / name for name in names},
        pins={name: origin["sha256"][name] for name in names},
        require_all=True,
        derive=derive,
        recognition=origin.get("recognition"),
    )


def ids_outside_vocabulary(settings: dict[str, Any], vocab_size: int) -> dict[str, int]:
    """The special-token ids (``*_token_id``) of config ``settings`` that lie outside ``vocab_size``: an init model
    gets the bundled tokenizer's 30,522 ids, where a family's defaults may name ids of its own tokenizer (GPT-2's
    end-of-text 50,256), which transformers flags as invalid. They are set to None (and recorded in the manifest);
    ids inside the vocabulary (RoBERTa's padding index 1, which zeroes an embedding row at init) are kept, so the
    weights do not change, and no forward pass here reads these ids."""
    return {
        key: value
        for key, value in settings.items()
        if key.endswith("_token_id") and isinstance(value, int) and not 0 <= value < vocab_size
    }
