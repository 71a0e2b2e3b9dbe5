"""The one door into a model folder: each source makes one trip (:mod:`san.models.sources`: its files, by name and
where they are, and what the manifest records of their origin, a :class:`~san.models.sources.fetched.Fetched`), and
:func:`store` takes every folder through the same steps: one check of every file against its pins (before anything
is copied or read), the copy, the extractions (a tower, an encoder stack), the files derived from them (an init's
weights, a GGUF file's dequantisation), the recognition of the family (a refused model before its weights are read),
the conversion of pickle weights, the text model of a multimodal wrapper, the sanity check and the manifest.

Every materialised model is a folder with ``config.json``, safetensors weights, tokenizer files and a
``manifest.json`` recording where it came from (source, revision, resolved commit, sha256 of every file); a folder
is built beside its place and moved there only when complete (:func:`staged`), so a failure, an unsupported
architecture included, leaves no folder. Only safetensors and GGUF files are ever loaded and remote code is never
trusted.

Integrity: a package source pins the sha256 of every file the model is loaded from (weights, ``config.json``, each
tokenizer file), the tokenizer that ``init`` models copy from the bundled package is pinned
(:data:`san.models.folders.BUNDLED_TOKENIZER_SHA256`), and a hub source's pins are verified when given (offline,
nobody can compute them for you; the hashes of every downloaded file are recorded in the manifest). Every load
verifies the folder's files against its manifest (:mod:`san.models.load`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from san.models.folders import AcquisitionError, sha256_file, verify_hashes, write_manifest
from san.models.recognise import recognise_folder
from san.models.sanity import sanity_check
from san.models.sources.extract import convert_pickle, extract_text_model
from san.models.sources.fetched import Fetched
from san.models.sources.hub import hub_source
from san.models.sources.init import init_of_source, init_source
from san.models.sources.onnx import onnx_source
from san.models.sources.package import local_source, package_parts_source, package_source
from san.models.sources.series import REPO_BRANCH, drop_cached, expand_revisions, pinned_revisions, weight_hashes

#: one trip to a source of pretrained weights: ``(source, family, out, key) -> Fetched``, where ``source`` is the
#: config entry, ``family`` the configured family (None: recognised), ``out`` the staging folder a source may place
#: files in and ``key`` the entry's config path, named in errors; the store verifies every pin afterwards
Source = Callable[[dict[str, Any], str | None, Path, str], Fetched]

#: the sources of pretrained weights by the config's ``source`` kind (init weights: :func:`fetch_source`)
SOURCES: dict[str, Source] = {
    "hub": hub_source,
    "package": package_source,
    "local": local_source,
    "package_parts": package_parts_source,
    "onnx": onnx_source,
}


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
    acquired pretrained folder, whose architecture an ``init`` without ``config`` initialises): one trip to the
    source (:func:`fetch_source`), then :func:`store`, in a folder built beside ``out_dir`` (:func:`staged`)."""
    origin = None if pretrained is None else Path(pretrained)
    with staged(Path(out_dir)) as staging:
        return store(staging, fetch_source(name, family, weights, source, staging, origin))


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
    if kind not in SOURCES:
        raise AcquisitionError(f"model {name!r}: unknown source {kind!r}; expected one of {sorted(SOURCES)}")
    return SOURCES[kind](source, family, out, f"models.{name}.{weights}")


def store(out: Path, fetched: Fetched) -> dict[str, Any]:
    """The one door into a model folder (module docstring): check every file a source hands over against its pins
    (:func:`check_pins`), copy them into ``out``, run the extractions, derive the files made from them, recognise
    the family (a refused model before its weights are read), convert pickle weights, reduce a multimodal wrapper
    to its text model, run the sanity check, and write the manifest (the sha256 of every file and the source's
    record)."""
    out.mkdir(parents=True, exist_ok=True)
    hashes = check_pins(out, fetched)
    for name, path in fetched.copy.items():
        shutil.copy2(path, out / name)
    record: dict[str, Any] = {"source": fetched.source, **fetched.record}
    record.update({key: extract(out) for key, extract in fetched.extractions.items()})
    lm = None
    if fetched.derive is not None:
        derived, lm = fetched.derive(out)
        record.update(derived)
    found = recognise_folder(out, fetched.where, fetched.family)  # a refused model before its weights are read
    record.update(convert_pickle(out, fetched.pickles, fetched.where, hashes))
    record.update(family=found.family, recognition=fetched.recognition or found.record())
    if found.text_config:
        record["text_model_of"] = extract_text_model(out, fetched.where)
    if fetched.check is not None:
        record["check"] = sanity_check(out, found.family, fetched.check, lm)
    return write_manifest(out, record)


def check_pins(out: Path, fetched: Fetched) -> dict[str, str]:
    """The one pin check of every source: the sha256 of each file handed over (copied from the source or placed in
    ``out``) and of what the source read but does not hand over (``digests``: an archive), against the source's
    pins (with ``require_all``, every one of them must have a pin); raises naming the file. The sha256 of the files
    handed over, by name."""
    hashes = dict(fetched.digests)
    hashes.update({name: sha256_file(path) for name, path in fetched.copy.items()})
    hashes.update({name: sha256_file(out / name) for name in fetched.placed})
    verify_hashes(hashes, fetched.pins, fetched.where, fetched.require_all)
    return hashes


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """The folder ``.<name>.partial`` beside ``out``, emptied first, to build a model folder in: moved into place
    as ``out`` (replacing it) when the block completes, removed when it fails, so that ``out`` is either complete
    or absent."""
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)


def materialise_init(family: str, arch: dict[str, Any], seed: int, out_dir: str | Path) -> dict[str, Any]:
    """Randomly initialise a ``family`` model from the explicit architecture ``arch`` with ``seed`` and save it in
    ``out_dir`` (:func:`san.models.sources.init.init_source`, :func:`store`)."""
    return store(Path(out_dir), init_source(family, arch, seed))


def acquire_series(
    name: str,
    family: str | None,
    source: dict[str, Any],
    out_root: str | Path,
    key: str,
    analyse: Callable[[str, Path], None] | None = None,
    keep: bool = True,
) -> dict[str, Any]:
    """Acquire every revision of the hub entry ``source`` (``repo_id``, ``revisions``:
    :func:`san.models.sources.series.expand_revisions`) into ``out_root/<revision>``, one after the other, each a
    verified model folder (:func:`materialise` at its pinned commit), and hand each to ``analyse``; without ``keep``
    a revision's folder and its download in the huggingface_hub cache (:func:`drop_cached`) are removed once it is
    analysed, so at most one revision is on disk at a time. The pins are written to ``out_root/pins.json`` first and
    reused by a rerun; a missing revision is refused before anything is downloaded. A revision whose commit or
    weights (the sha256 of its weight files, e.g. the 86 of pythia-2.8b's 154 branches that serve its final weights)
    equal an earlier revision's is a duplicate: analysed once, not kept, and recorded. With ``repos`` each revision
    is the ``main`` branch of its own repository (:mod:`san.models.sources.series`). The series record, also written
    to ``out_root/series.json``: the repository, the revisions, their commits, the duplicates (revision -> the first
    revision with its weights), the manifests, the folders kept and, with ``repos``, each revision's repository."""
    root = Path(out_root)
    revisions = expand_revisions(source["revisions"], source["repo_id"], key)
    repos = source.get("repos") or {}
    missing = [r for r in revisions if repos and r not in repos]
    if missing:
        raise AcquisitionError(f"{key}.repos: no repository for revision(s) {missing}")
    commits = pinned_revisions(root / "pins.json", source["repo_id"], revisions, key, repos)
    drop = ("revisions", "keep_revisions", "revision", "commit", "sha256", "repos")
    base = {k: v for k, v in source.items() if k not in drop}
    manifests: dict[str, dict[str, Any]] = {}
    same: dict[str, str] = {}
    by_commit: dict[str, str] = {}
    by_weights: dict[tuple[tuple[str, str], ...], str] = {}
    for revision in revisions:
        if commits[revision] in by_commit:  # the same commit: the same files, nothing to download
            same[revision] = by_commit[commits[revision]]
            continue
        by_commit[commits[revision]] = revision
        folder = root / revision
        where = {"repo_id": repos[revision], "revision": REPO_BRANCH} if repos else {"revision": revision}
        entry = {**base, **where, "commit": commits[revision]}
        manifest = materialise(name, family, "pretrained", entry, folder)
        hashes = weight_hashes(manifest)
        if hashes in by_weights:
            same[revision] = by_weights[hashes]
            _remove(folder, commits[revision], keep, duplicate=True)
            continue
        by_weights[hashes] = revision
        manifests[revision] = manifest
        if analyse is not None:
            analyse(revision, folder)
        _remove(folder, commits[revision], keep)
    return _write_record(root, source["repo_id"], revisions, commits, same, manifests, repos)


def _remove(folder: Path, commit: str, keep: bool, duplicate: bool = False) -> None:
    """Remove a revision's folder (always for a duplicate, else unless the entry keeps its revisions) and, unless
    kept, its download in the huggingface_hub cache (:func:`drop_cached`)."""
    if duplicate or not keep:
        shutil.rmtree(folder)
    if not keep:
        drop_cached(commit)


def _write_record(
    root: Path,
    repo_id: str,
    revisions: list[str],
    commits: dict[str, str],
    same: dict[str, str],
    manifests: dict[str, dict[str, Any]],
    repos: dict[str, str],
) -> dict[str, Any]:
    """The series record of :func:`acquire_series`, written to ``root/series.json``."""
    record = {
        "repo_id": repo_id,
        "revisions": revisions,
        "commits": commits,
        "duplicates": {r: same[r] for r in revisions if r in same},
        "manifests": manifests,
        "folders": {r: str(root / r) for r in manifests if (root / r).is_dir()},
        **({"repos": {r: repos[r] for r in revisions}} if repos else {}),
    }
    (root / "series.json").write_text(json.dumps(record, indent=2))
    return record
