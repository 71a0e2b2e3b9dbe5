"""The workflow where its users take it next gives the numbers of a direct run of the same config: imported as a
module of another workflow (`module san: snakefile: ...`, `use rule * from san as san_*`), and run without a shared
filesystem, every input and output going through a storage plugin (`--default-storage-provider fs|s3
--shared-fs-usage none`): the fs plugin (rsync into a folder) and the s3 plugin against moto's S3 emulator on
127.0.0.1 (no S3 server package is available to the tests; moto implements S3's HTTP API in Python).

The small target covers what a move off a shared filesystem breaks: model folders (directory outputs) written,
stored and read back, a model job's memory declared before its folder is on the scheduling host, the path training
with its resume state, and the library files every job has as inputs, read where they ship (local())."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from san.core.compare import compare_files

from helpers import ROOT, copy_workflow, snakemake, tiny_config, write_config

TARGETS = ["results/rank_collapse/tiny-bert.nc", "results/paths/sorting.nc", "results/theorem.nc"]
#: Snakemake's marker in a stored directory output (its mtime), not a file of the job's
TIMESTAMP = ".snakemake_timestamp"


def files_below(folder: Path, *tops: str) -> set[str]:
    """Every file under ``folder``'s ``tops``, relative to ``folder`` (directory markers aside)."""
    return {
        str(p.relative_to(folder))
        for top in tops
        for p in (folder / top).rglob("*")
        if p.is_file() and p.name != TIMESTAMP
    }


@pytest.fixture(scope="module")
def direct(tmp_path_factory) -> Path:
    """A direct run of the targets: the workflow copied, the tiny config as its config.yaml, from its root."""
    wf = copy_workflow(tmp_path_factory.mktemp("direct") / "wf")
    write_config(wf, tiny_config())
    snakemake(wf, "--cores", "2", *TARGETS)
    return wf


def same_numbers(direct: Path, results: Path) -> None:
    """Every netCDF file of the direct run has its twin under ``results`` (a results/ folder), every value equal."""
    files = sorted(p.relative_to(direct / "results") for p in (direct / "results").rglob("*.nc"))
    assert len(files) >= 4, files
    for rel in files:
        assert (results / rel).is_file(), f"{rel} missing"
        assert compare_files(direct / "results" / rel, results / rel) == [], rel


CONSUMER_RULE = """

rule consumer_rule:
    input:
        "results/theorem.nc",
    output:
        "consumer_rule.txt",
    script:
        "consumer_rule.py"
"""
CONSUMER_SCRIPT = """from pathlib import Path

from san.core.compare import compare_files

same = compare_files(Path(snakemake.input[0]), Path(snakemake.input[0]))
Path(snakemake.output[0]).write_text("identical" if not same else "differ")
"""


def readme_module_snippet() -> str:
    """The consumer Snakefile the README shows (its python block)."""
    readme = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert "module san:" in block and "use rule * from san as san_*" in block
    return block


def test_as_a_module_of_another_workflow(direct, tmp_path):
    """The README's consumer Snakefile in a folder of its own, its own config file (config/san.yaml), the rules
    renamed san_*: the clone's workflow/Snakefile resolves every path of its own from its folder."""
    consumer = tmp_path / "consumer"
    (consumer / "config").mkdir(parents=True)
    (consumer / "config" / "san.yaml").write_text(yaml.safe_dump(tiny_config(), sort_keys=False))
    snippet = readme_module_snippet()
    assert '"../san/workflow/Snakefile"' in snippet
    snippet = snippet.replace('"../san/workflow/Snakefile"', repr(str(ROOT / "workflow" / "Snakefile")))
    # a rule of the consumer's own, defined before the import, whose script imports the library: the module leaves
    # its inputs alone
    (consumer / "Snakefile").write_text(CONSUMER_RULE.lstrip() + "\n\n" + snippet)
    (consumer / "consumer_rule.py").write_text(CONSUMER_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *TARGETS, "consumer_rule.txt"],
        cwd=consumer,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rule san_rank_collapse:" in proc.stdout + proc.stderr
    assert re.search(r"rule consumer_rule:\n    input: results/theorem.nc\n", proc.stdout + proc.stderr)
    assert (consumer / "consumer_rule.txt").read_text() == "identical"
    same_numbers(direct, consumer / "results")
    assert files_below(consumer, "results", "logs") == files_below(direct, "results", "logs")


def storage_run(direct: Path, work: Path, *storage: str) -> subprocess.CompletedProcess:
    """The targets in a fresh copy of the workflow, every input and output through ``storage`` (the default storage
    provider's flags), with no shared filesystem."""
    wf = copy_workflow(work)
    write_config(wf, tiny_config())
    return snakemake(wf, "--cores", "2", *TARGETS, *storage, "--shared-fs-usage", "none")


def test_without_a_shared_filesystem_through_the_fs_storage_plugin(direct, tmp_path):
    """snakemake-storage-plugin-fs (rsync) into a prefix folder: every declared output is stored there, with the
    direct run's numbers, and none is left in the working directory."""
    pytest.importorskip("snakemake_storage_plugin_fs")
    if shutil.which("rsync") is None:
        pytest.skip("the fs storage plugin copies with rsync, which is not installed (apt-get install rsync)")
    store = tmp_path / "store"
    proc = storage_run(
        direct, tmp_path / "wf", "--default-storage-provider", "fs", "--default-storage-prefix", str(store)
    )
    assert "Storing in storage" in proc.stdout + proc.stderr
    assert files_below(store, "results", "logs") == files_below(direct, "results", "logs")
    same_numbers(direct, store / "results")
    assert not list((tmp_path / "wf" / "results").rglob("*.nc"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_endpoint(tmp_path):
    """moto's S3 server on 127.0.0.1 with an empty bucket ``san``: (endpoint URL, boto3 client); stopped after."""
    pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    port = free_port()
    log = (tmp_path / "moto.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=url, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    try:
        for _ in range(100):
            try:
                client.create_bucket(Bucket="san")
                break
            except Exception:  # the server is still starting
                time.sleep(0.2)
        else:
            pytest.fail(f"moto's S3 server did not start: {(tmp_path / 'moto.log').read_text()}")
        yield url, client
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_without_a_shared_filesystem_through_the_s3_storage_plugin(direct, tmp_path, s3_endpoint):
    """snakemake-storage-plugin-s3 against an S3 endpoint on 127.0.0.1: every declared output is an object of the
    bucket, model folders as their files, with the direct run's numbers."""
    pytest.importorskip("snakemake_storage_plugin_s3")
    url, client = s3_endpoint
    storage = ["--default-storage-provider", "s3", "--default-storage-prefix", "s3://san/run"]
    storage += ["--storage-s3-endpoint-url", url, "--storage-s3-access-key", "test", "--storage-s3-secret-key", "test"]
    storage_run(direct, tmp_path / "wf", *storage)
    keys = [
        o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket="san") for o in page["Contents"]
    ]
    stored = {k.removeprefix("run/") for k in keys if not k.endswith(TIMESTAMP)}
    assert stored == files_below(direct, "results", "logs")
    downloaded = tmp_path / "downloaded"
    for key in keys:
        if key.endswith(".nc"):
            target = downloaded / key.removeprefix("run/")
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file("san", key, str(target))
    same_numbers(direct, downloaded / "results")
    assert not list((tmp_path / "wf" / "results").rglob("*.nc"))
