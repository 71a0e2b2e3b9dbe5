"""Local model folders (``pretrained: {source: local, path, sha256}``), checked while the config is checked, before any
job runs, as far as the folder itself can tell (torch-free).

A hub model's ``config.json`` is known only after its acquisition job downloads it; a local folder's is on this
machine, so everything the acquisition would refuse is refused with the config instead, naming the key or file and
what was expected, and nothing is written: the folder exists and holds a ``config.json``; the model is recognised
(:func:`san.models.recognise.recognise`: a family of the table, softmax attention, no decoder-flagged encoder, no
remote code) and agrees with the entry's ``family`` if given; every file the loader reads
(:func:`model_folder_files`: ``config.json``, the safetensors weights or the shards and their index, each tokenizer
file) is pinned by ``sha256``; and its position embeddings cover ``text.seq_len`` tokens (``max_position_embeddings``,
GPT-2's ``n_positions``: the family row's ``position_key``). The recognised family makes a local decoder a causal
model of the run (the context-length run takes it like an entry that names its family: :func:`entry_family`).

``python -m san.models.pins FOLDER`` prints a folder's config entry with every loaded file's sha256
(:mod:`san.models.pins`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.folders import AcquisitionError, tokenizer_files
from san.models.recognise import Recognition, UnsupportedModel, recognise, text_model_config


def model_folder_files(src: Path, allow_pickle: bool = False) -> tuple[dict[str, Path], list[str]]:
    """The files of a model folder that a copy of it takes: its config, safetensors weights (one file or a sharded
    checkpoint) and tokenizer files, by name; a folder with only pickle weights (``pytorch_model*.bin``) is taken
    only with ``allow_pickle`` (the store converts them, :func:`san.models.sources.extract.convert_pickle`). Also the
    pickle files."""
    weights = _weight_files(src, "model", ".safetensors")
    pickles = [] if weights else _weight_files(src, "pytorch_model", ".bin")
    if not weights and not (allow_pickle and pickles):
        raise AcquisitionError(
            f"{src} has no model.safetensors (only safetensors weights are loaded"
            + ("; its pickle weights only when the entry opts in with allow_pickle: true)" if pickles else ")")
        )
    names = ["config.json", *weights, *pickles, *tokenizer_files(src)]
    return {name: src / name for name in names}, [name for name in pickles if name.endswith(".bin")]


def _weight_files(src: Path, stem: str, suffix: str) -> list[str]:
    """The weight files of a folder in one format: ``<stem><suffix>``, or a sharded checkpoint's index
    ``<stem><suffix>.index.json`` and the shards its ``weight_map`` names; empty when the folder has neither."""
    if (src / f"{stem}{suffix}").is_file():
        return [f"{stem}{suffix}"]
    index = src / f"{stem}{suffix}.index.json"
    if index.is_file():
        return [index.name, *sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))]
    return []


def read_folder_config(folder: Path, key: str) -> dict[str, Any]:
    """The parsed ``config.json`` of model folder ``folder`` (the config key ``key`` names it in errors)."""
    if not folder.is_dir():
        raise ConfigError(f"config key '{key}': {folder} is not a folder (expected a model folder: save_pretrained's)")
    path = folder / "config.json"
    if not path.is_file():
        raise ConfigError(f"config key '{key}': {path} is missing (a model folder's architecture is its config.json)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config key '{key}': {path} is not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"config key '{key}': {path} does not hold a JSON object")
    return config


@functools.lru_cache(maxsize=64)
def _recognised(path: str, mtime_ns: int, where: str, family: str | None) -> Recognition:
    return recognise(json.loads(Path(path).read_text(encoding="utf-8")), where, family)


def recognise_local(name: str, spec: Mapping[str, Any]) -> Recognition:
    """The recognition of model ``name``'s local folder from its ``config.json`` (the entry's ``family``, if given,
    must agree); raises :class:`ConfigError` naming the key."""
    key = f"models.{name}.pretrained.path"
    folder = Path(spec["pretrained"]["path"]).expanduser()
    read_folder_config(folder, key)
    path = folder / "config.json"
    try:
        return _recognised(str(path.resolve()), path.stat().st_mtime_ns, f"model {name!r} ({path})", spec.get("family"))
    except UnsupportedModel as exc:
        wrong_family = spec.get("family") is not None and "the config gives family" in str(exc)
        raise ConfigError(f"config key '{f'models.{name}.family' if wrong_family else key}': {exc}") from None


def is_local(spec: Mapping[str, Any]) -> bool:
    """Whether model entry ``spec`` takes its pretrained weights from a local folder."""
    return (spec.get("pretrained") or {}).get("source") == "local"


def entry_family(spec: Mapping[str, Any], name: str = "?") -> str | None:
    """The family of model entry ``spec`` known while the workflow parses its rules: the entry's ``family``, else a
    local folder's, recognised from its ``config.json``; None for a hub or package model without one (known only
    after its acquisition)."""
    if spec.get("family") is not None:
        return spec["family"]
    if is_local(spec):
        try:
            return recognise_local(name, spec).family
        except ConfigError:
            return None
    return None


def check_local(name: str, spec: Mapping[str, Any]) -> Recognition | None:
    """Model ``name``'s local folder (module docstring): recognised and every loaded file pinned (its position
    embeddings are checked by :func:`san.models.entries.check_models`); raises :class:`ConfigError` naming the key or
    file and what was expected. None for an entry of another source."""
    if not is_local(spec):
        return None
    source = spec["pretrained"]
    recognition = recognise_local(name, spec)
    folder = Path(source["path"]).expanduser()
    try:
        files, _ = model_folder_files(folder, bool(source.get("allow_pickle")))
    except AcquisitionError as exc:
        raise ConfigError(f"config key 'models.{name}.pretrained.path': {exc}") from None
    unpinned = [f for f in files if f not in source.get("sha256", {})]
    if unpinned:
        raise ConfigError(
            f"config key 'models.{name}.pretrained.sha256': no pin for {unpinned} of {folder} (every file the model "
            f"is loaded from is pinned: config.json, the weights, each tokenizer file); "
            f"python -m san.models.pins {folder} prints them"
        )
    return recognition


def folder_text_config(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The architecture config of a local entry's folder: its ``config.json`` (a multimodal wrapper's text model)."""
    path = Path(spec["pretrained"]["path"]).expanduser() / "config.json"
    return dict(text_model_config(json.loads(path.read_text(encoding="utf-8"))))
