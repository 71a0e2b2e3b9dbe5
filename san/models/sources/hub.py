"""The ``hub`` model source: a Hugging Face hub snapshot at a revision, resolved to a commit, verified, copied
(:func:`hub_source`); a dual text-image checkpoint's tower or an encoder-decoder checkpoint's encoder stack is taken
out of it by the store after the pin check, when the entry asks for one (``tower``, ``stack: encoder``).

Files are downloaded with huggingface_hub into its cache (``HF_HOME``, default ``~/.cache/huggingface``), so a
second acquisition, an interrupted one rerun, or one with ``HF_HUB_OFFLINE=1`` reuses what is already there. Only
the top-level files that match the model's patterns are fetched (a repository's subfolders, e.g. a sentence
encoder's ``1_Pooling/``, are never downloaded).

Integrity: over plain HTTP the client checks a file's size, not its content. The hub announces each file's hash
(``X-Linked-Etag`` / ``lfs.sha256``: the sha256 of an LFS file; ``ETag``: the git blob id of a plain file), and the
cache stores each file as a blob named by that announced hash; every file copied into the model folder is checked
against it, then against the config's ``sha256`` pins, before the folder exists. A file that differs is removed
from the cache (a rerun downloads it again) and refused, naming it.

Errors say what to fix: a repository that does not exist (or is private), a revision that does not exist, a gated
repository, a pinned commit that differs, no network or ``HF_HUB_OFFLINE=1`` without a cached snapshot.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from san.models.folders import MANIFEST, AcquisitionError, read_manifest, sha256_file
from san.models.sources.extract import extract_encoder_stack, extract_tower
from san.models.sources.fetched import Fetched

#: files of a model repository that the model folder is built from (top level only)
HUB_PATTERNS = ["*.json", "*.safetensors", "vocab.txt", "spiece.model", "merges.txt", "*.model"]
#: pickle checkpoints, fetched only for an entry with ``allow_pickle: true`` and a repository without safetensors
PICKLE_PATTERNS = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]
#: files taken from a separate tokenizer repository
TOKENIZER_PATTERNS = ["tokenizer*", "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt", "*.model"]
#: every file in a subfolder (``fnmatch``'s ``*`` crosses ``/``): never downloaded
SUBFOLDERS = ["*/*"]
_HEX = re.compile(r"^[0-9a-f]+$")


def git_blob_id(path: Path) -> str:
    """The git object id of a file (sha1 of ``blob <size>\\0`` and its content): the hub's ETag of a plain file."""
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


#: what to run without the hub
OFFLINE_DEFAULT = (
    "the offline default (`snakemake --cores all` with the shipped config.yaml, whose models use `init` and "
    "`package` sources)"
)


def _message(exc: BaseException, repo_id: str, revision: str, key: str) -> str:
    """What went wrong fetching ``repo_id`` at ``revision`` and what to fix, by the client's exception (``key``: the
    config path of the source's settings, e.g. ``models.bert.pretrained.tokenizer_``)."""
    from huggingface_hub import constants, errors

    entry = key.removesuffix("tokenizer_").rstrip(".")
    where = f"{repo_id!r} (revision {revision!r}) for {entry} from the Hugging Face hub at {constants.ENDPOINT}"
    got = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if isinstance(exc, errors.GatedRepoError):
        return (
            f"cannot download {where}: the repository is gated ({got}). Accept its conditions at "
            f"{constants.ENDPOINT}/{repo_id} while logged in, then give this machine an access token "
            "(`hf auth login`, or the HF_TOKEN environment variable)."
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return (
            f"cannot download {where}: no such repository ({got}). Check the spelling of {key}repo_id "
            "(owner/name, as in the repository's URL); a private repository also needs an access token (HF_TOKEN)."
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return (
            f"cannot download {where}: the repository has no revision {revision!r} ({got}). Check {key}revision "
            "(a branch, a tag or a full 40-character commit id)."
        )
    if constants.HF_HUB_OFFLINE:
        return (
            f"cannot download {where}: HF_HUB_OFFLINE is set and the huggingface_hub cache ({constants.HF_HUB_CACHE}) "
            f"holds no complete snapshot of it ({got}). Unset HF_HUB_OFFLINE for a first download, or run "
            f"{OFFLINE_DEFAULT}."
        )
    if isinstance(exc, errors.HfHubHTTPError) and exc.response is not None and exc.response.status_code < 500:
        return f"cannot download {where}: the hub answered {got}. Check {key}repo_id, {key}revision and the token."
    return (
        f"cannot download {where}: {got}. The hub is unreachable or the download was interrupted; rerunning "
        f"fetches only the files not yet in the huggingface_hub cache ({constants.HF_HUB_CACHE}). Without the hub, run "
        f"{OFFLINE_DEFAULT}."
    )


@contextmanager
def hub_errors(repo_id: str, revision: str, key: str) -> Iterator[None]:
    """Turn the client's exceptions into an :class:`AcquisitionError` that says what to fix (``key``: the config
    entry of the source, named in the message)."""
    try:
        yield
    except AcquisitionError:
        raise
    except Exception as exc:  # noqa: BLE001 - HTTP, network and offline-mode errors of every client version
        raise AcquisitionError(_message(exc, repo_id, revision, key)) from exc


def snapshot(repo_id: str, revision: str, commit: str | None, patterns: list[str], key: str) -> tuple[str, Path]:
    """Download (or, with ``HF_HUB_OFFLINE=1``, find in the cache) the top-level files of ``repo_id`` matching
    ``patterns`` at ``revision``; the commit it resolves to and the snapshot folder in the cache (``key``: the
    config path that the source's ``repo_id``, ``revision`` and ``commit`` settings follow, named in errors).

    Online, the revision is resolved first and a ``commit`` pin that differs is refused before any download.
    """
    import huggingface_hub
    from huggingface_hub import constants

    expected = commit
    with hub_errors(repo_id, revision, key):
        if not constants.HF_HUB_OFFLINE:
            resolved = huggingface_hub.HfApi().model_info(repo_id, revision=revision).sha
            _check_commit(repo_id, revision, resolved, commit, key)
            expected = resolved  # the download resolves the revision again: it must not have moved meanwhile
        folder = Path(
            huggingface_hub.snapshot_download(
                repo_id, revision=revision, allow_patterns=patterns, ignore_patterns=SUBFOLDERS
            )
        )
    _check_commit(repo_id, revision, folder.name, expected, key)  # offline: the cached ref's commit
    return folder.name, folder


def _check_commit(repo_id: str, revision: str, resolved: str, commit: str | None, key: str) -> None:
    if commit and resolved != commit:
        raise AcquisitionError(
            f"hub {repo_id}@{revision} resolves to commit {resolved}, but {key}commit pins {commit}: the revision "
            "has moved. Check what changed before pinning the new commit (and its files' sha256)."
        )


def announced_hash(path: Path) -> str:
    """The hash the hub announced for a cached file: the name of the blob its snapshot entry links to (the cache
    layout of huggingface_hub: ``snapshots/<commit>/<file>`` -> ``blobs/<etag>``)."""
    blob = Path(os.path.realpath(path))
    if blob.parent.name != "blobs" or not _HEX.match(blob.name) or len(blob.name) not in (40, 64):
        raise AcquisitionError(
            f"{path}: the huggingface_hub cache does not link it to a blob named by its hash, so the hash the hub "
            "announced for it is unknown; use a cache on a file system with symbolic links (HF_HOME)"
        )
    return blob.name


def copy_verified(folder: Path, out: Path, patterns: list[str], where: str) -> list[str]:
    """Copy the top-level files of the snapshot ``folder`` that match ``patterns`` (the cache may hold others that
    another download fetched) into ``out`` after checking each against the hash the hub announced for it (sha256
    for an LFS file, the git blob id otherwise); a file that differs is removed from the cache and refused. The
    copied names."""
    names = []
    wanted = (p for p in folder.iterdir() if p.is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns))
    for src in sorted(wanted):
        want = announced_hash(src)
        got = sha256_file(src) if len(want) == 64 else git_blob_id(src)
        if got != want:
            Path(os.path.realpath(src)).unlink(missing_ok=True)
            raise AcquisitionError(
                f"{where}: the downloaded {src.name} hashes to {got}, but the hub announced {want}: the file was "
                "altered or corrupted in transit; it was removed from the cache, refusing it (rerun to download it "
                "again)"
            )
        shutil.copyfile(src, out / src.name)
        names.append(src.name)
    return names


def fetch(source: dict[str, Any], key: str, out: Path) -> dict[str, Any]:
    """Copy the model files of a ``hub`` source (``source``: its config entry, ``key`` its config path) and of its
    tokenizer repository, if any, into ``out``, each verified against the hub's announced hash; what the manifest
    records about where they came from (repository, revision, resolved commit of each)."""
    repo_id, revision = source["repo_id"], source.get("revision", "main")
    commit, folder = snapshot(repo_id, revision, source.get("commit"), HUB_PATTERNS, f"{key}.")
    record: dict[str, Any] = {"repo_id": repo_id, "revision": revision, "commit": commit}
    safetensors = (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file()
    record["files"] = copy_verified(folder, out, HUB_PATTERNS, f"hub {repo_id}@{commit}")
    if not safetensors:
        if not source.get("allow_pickle"):
            raise AcquisitionError(
                f"hub {repo_id}@{commit} has no safetensors weights (model.safetensors or a sharded "
                f"model.safetensors.index.json): a pickle checkpoint (pytorch_model.bin) is loaded only when the entry "
                f"opts in with {key}.allow_pickle: true"
            )
        _, folder = snapshot(repo_id, commit, commit, PICKLE_PATTERNS, f"{key}.")
        pickles = copy_verified(folder, out, PICKLE_PATTERNS, f"hub {repo_id}@{commit}")
        if not any(name.endswith(".bin") for name in pickles):
            raise AcquisitionError(f"hub {repo_id}@{commit} has neither safetensors nor pickle (.bin) weights")
        record["files"] += pickles
        record["pickle_files"] = sorted(n for n in pickles if n.endswith(".bin"))
    tok_repo = source.get("tokenizer_repo_id")
    if tok_repo:
        tok_rev = source.get("tokenizer_revision", "main")
        tok_pin = source.get("tokenizer_commit")
        tok_commit, tok_folder = snapshot(tok_repo, tok_rev, tok_pin, TOKENIZER_PATTERNS, f"{key}.tokenizer_")
        files = copy_verified(tok_folder, out, TOKENIZER_PATTERNS, f"hub {tok_repo}@{tok_commit}")
        record.update(tokenizer_repo_id=tok_repo, tokenizer_revision=tok_rev, tokenizer_commit=tok_commit)
        record["tokenizer_files"] = files
    return record


def hub_source(source: dict[str, Any], family: str | None, out: Path, key: str) -> Fetched:
    """A hub snapshot (safetensors, configs, tokenizer) at its revision, downloaded into ``out``, every file checked
    against the hash the hub announced (:func:`fetch`), then by the store against the config's pins; the manifest
    records the repository, revision and resolved commit. ``key`` is the source's config path, named in errors (a
    missing repository or revision, a gated one, a moved commit, no network and no cache)."""
    out.mkdir(parents=True, exist_ok=True)
    record = fetch(source, key, out)
    pickles = record.pop("pickle_files", [])
    where = f"hub {record['repo_id']}@{record['commit']}"
    extractions = {}
    if source.get("tower") is not None:
        tower = source["tower"]
        extractions[f"{tower}_tower_of"] = functools.partial(extract_tower, tower=tower, where=f"{key}.tower: {where}")
    if source.get("stack") == "encoder":
        extractions["encoder_stack_of"] = functools.partial(extract_encoder_stack, where=f"{key}.stack: {where}")
    return Fetched(
        "hub",
        where,
        record,
        family,
        placed=sorted(p.name for p in out.iterdir() if p.is_file()),
        pins=source.get("sha256"),  # the downloaded files, before any extraction or conversion
        extractions=extractions,
        pickles=pickles,
        check=source.get("check") or None,
    )


def pins(models_dir: str | Path) -> dict[str, Any]:
    """The ``commit``/``sha256`` pins of every hub model materialised under ``models_dir``
    (``<name>/pretrained/manifest.json``), as a config overlay: ``{"models": {name: {"pretrained": {...}}}}``."""
    out: dict[str, Any] = {}
    for path in sorted(Path(models_dir).glob(f"*/pretrained/{MANIFEST}")):
        manifest = read_manifest(path.parent)
        if manifest.get("source") != "hub":
            continue
        entry = {"commit": manifest["commit"]}
        if manifest.get("tokenizer_commit"):
            entry["tokenizer_commit"] = manifest["tokenizer_commit"]
        entry["sha256"] = dict(sorted(manifest["sha256"].items()))
        out[path.parent.parent.name] = {"pretrained": entry}
    return {"models": out}


def main(argv: list[str]) -> int:
    """``python -m san.models.sources.hub [results/models]``: print the YAML pins of the hub models acquired there,
    to paste into the config that downloaded them (e.g. config/paper.yaml)."""
    import argparse

    import yaml

    from san.core.cli import add_verbose, quiet_libraries

    ap = argparse.ArgumentParser(
        prog="python -m san.models.sources.hub",
        description="Print the YAML pins (commits, sha256) of the hub models acquired in a run's model folders, to "
        "paste into the config that downloaded them (e.g. config/paper.yaml).",
    )
    ap.add_argument("models_dir", nargs="?", type=Path, default=Path("results/models"), help="a run's model folders")
    add_verbose(ap)
    args = ap.parse_args(argv)
    quiet_libraries(args.verbose)
    models_dir = args.models_dir
    found = pins(models_dir)
    if not found["models"]:
        print(f"no hub models with a manifest under {models_dir}", file=sys.stderr)
        return 1
    print(yaml.safe_dump(found, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
