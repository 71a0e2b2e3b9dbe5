"""The workflow on a real SLURM cluster through ``--profile profiles/slurm``: every job is run by SLURM, and the
results are identical to a local run of the same config.

Needs a running cluster and the executor plugin: ``bash .ci/slurm.sh start`` (a single-node cluster with a fake GPU)
and ``SAN_SLURM=1 pytest tests/integration/test_slurm.py``; ``.ci/run`` does both. Skipped otherwise.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

from helpers import ROOT, copy_workflow, snakemake, tiny_config, write_config

# Rules whose results the SLURM run builds, with everything upstream of them (`snakemake --until`): the GPU rules
# (their requests reach sbatch), a model acquisition (a directory output) and a training with its resume state (the
# path training); every other job is submitted the same way. Rules absent from the workflow are skipped.
UNTIL_RULES = ["rank_collapse", "attention_products", "paths_evaluate"]
# Wall-clock limit of the SLURM run, enforced with `timeout -k` (the plugin may ignore SIGTERM while it polls).
SLURM_TIMEOUT_S = 900
# GPU model exported to the profile (SAN_SLURM_GPU_MODEL): .ci/slurm.sh's node has one fake GPU of type "fake", so
# the GPU rules are submitted with `--gpus=fake:1`, exercising the site-settings path of profiles/slurm.
GPU_MODEL = "fake"
# Data variables that measure wall time (e.g. paths' train_seconds per epoch): compared by presence, not value.
TIMING = re.compile(r"(^|_)(seconds|wall_time|runtime)($|_)")
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


@functools.cache
def skip_reason() -> str | None:
    """Why the SLURM test cannot run here, or None."""
    if os.environ.get("SAN_SLURM") != "1":
        return "SAN_SLURM=1 not set (start a cluster with `bash .ci/slurm.sh start`, then SAN_SLURM=1 pytest)"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')"
    if shutil.which("sinfo") is None:
        return "sinfo not found: no SLURM client on this machine"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%a"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo does not answer (is slurmctld running?)"
    if proc.returncode != 0 or "up" not in proc.stdout:
        return f"no SLURM partition is up: sinfo said {proc.stdout.strip()!r} {proc.stderr.strip()!r}"
    return None


needs_slurm = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
PROFILE = ROOT / "profiles" / "slurm" / "config.yaml"


def until_rules(workdir: Path) -> list[str]:
    """The UNTIL_RULES that the workflow defines."""
    listed = {line.split()[0] for line in snakemake(workdir, "--list-rules", timeout=120).stdout.splitlines() if line}
    rules = [rule for rule in UNTIL_RULES if rule in listed]
    assert rules, f"none of {UNTIL_RULES} is a rule of the workflow ({sorted(listed)})"
    return rules


def run_slurm(workdir: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """``snakemake --profile profiles/slurm`` in ``workdir`` under ``timeout -k``; its output and wall time."""
    env = dict(os.environ, PYTHONPATH=str(workdir), OMP_NUM_THREADS="1", SAN_SLURM_GPU_MODEL=GPU_MODEL)
    cmd = ["timeout", "-k", "15", str(SLURM_TIMEOUT_S), sys.executable, "-m", "snakemake"]
    cmd += ["--profile", "profiles/slurm", "--slurm-keep-successful-logs", *args]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    return proc, time.monotonic() - start


def slurm_job(job_id: str) -> dict[str, str]:
    """SLURM's record of a job (``scontrol show job``: kept for MinJobAge, 300 s by default, after it ends)."""
    proc = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"SLURM does not know job {job_id}: {proc.stderr}"
    return dict(field.split("=", 1) for field in proc.stdout.split() if "=" in field)


def scheduled_jobs(dry_run_stdout: str) -> dict[str, int]:
    """Jobs per rule from the ``Job stats`` table of a dry run."""
    counts: dict[str, int] = {}
    in_table = False
    for line in dry_run_stdout.splitlines():
        fields = line.split()
        if line.startswith("job") and fields[:2] == ["job", "count"]:
            in_table = True
        elif in_table and len(fields) == 2 and fields[1].isdigit() and fields[0] != "total":
            counts[fields[0]] = int(fields[1])
        elif in_table and fields and fields[0] == "total":
            break
    return counts


def assert_same_results(local: Path, cluster: Path) -> list[Path]:
    """Every .nc result of the local run exists in the SLURM run with identical data, coordinates and dimensions
    (attributes hold provenance such as timings, and may differ; so do the values of TIMING variables)."""
    files = sorted(p.relative_to(local) for p in (local / "results").rglob("*.nc"))
    assert files, "the local run wrote no .nc result"
    for rel in files:
        assert (cluster / rel).exists(), f"{rel} was not built by the SLURM run"
        with xr.open_dataset(local / rel) as a, xr.open_dataset(cluster / rel) as b:
            timing = [name for name in a.data_vars if TIMING.search(str(name))]
            assert set(timing) <= set(b.data_vars), f"{rel}: SLURM result lacks {timing}"
            xr.testing.assert_equal(a.drop_vars(timing), b.drop_vars(timing))
    return files


def declared_memory(workdir: Path, config: dict, rule: str, wildcards: str) -> int:
    """The mem_mb a model job of ``rule`` declares (san.core.memory.declared_mem_mb) from the model folders the
    run acquired, the config's dtypes, sequence length and batch; ``wildcards``: the job's model, as SLURM's comment
    spells it."""
    from san.core.memory import declared_mem_mb
    from san.rank_collapse.spec import variant_dtypes

    model = next(m for m in config["rank_collapse"]["models"] if m in wildcards)
    folders = sorted((workdir / "results" / "models" / model).iterdir())
    dtype = config["models"][model].get("dtype", config[rule]["dtype"])
    dtypes = sorted(set(variant_dtypes(dtype, config["rank_collapse"]["variants"]).values()))
    budget = config["compute"][rule].get("memory_budget_mb")
    seq_len, batch = config["text"]["seq_len"], config["rank_collapse"]["batch_size"]
    kept = config[rule]["n_sequences"] if rule == "attention_products" else 0
    return declared_mem_mb([f for f in folders if f.is_dir()], dtypes, seq_len, batch, budget, 1, 0, False, kept)


def rendered_profile(**env: str) -> dict:
    """profiles/slurm/config.yaml as Snakemake reads it (a YTE template), with the given environment."""
    import yte

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        with PROFILE.open() as fh:
            return yte.process_yaml(fh, require_use_yte=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_profile_keys_are_commented_and_rules_exist(workflow_copy: Path) -> None:
    """Every key of the SLURM profile has a comment; every rule it sizes exists (a renamed rule loses its sizing)."""
    lines = PROFILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z][\w-]*:", line) or re.match(r"^  [a-z]\w*:", line):
            before = lines[i - 1].strip() if i else ""
            assert before.startswith("#") or " #" in line, f"uncommented key: {line!r}"
    profile = rendered_profile()
    assert profile["executor"] == "slurm" and profile["slurm-status-command"] == "squeue"
    listed = {line.split()[0] for line in snakemake(workflow_copy, "--list-rules").stdout.splitlines() if line}
    stale = set(profile["set-resources"]) - listed
    assert not stale, f"profiles/slurm sizes rules that do not exist: {sorted(stale)}"


def test_profile_site_settings_from_the_environment() -> None:
    """SAN_SLURM_* variables set partition, account, GPU model and GPU count without editing any file."""
    default = rendered_profile()
    assert (
        default["default-resources"]["slurm_partition"] == "" and default["set-resources"]["rank_collapse"]["gpu"] == 1
    )
    site = rendered_profile(
        SAN_SLURM_PARTITION="cpu",
        SAN_SLURM_GPU_PARTITION="gpu",
        SAN_SLURM_ACCOUNT="proj42",
        SAN_SLURM_GPU_MODEL="a100",
        SAN_SLURM_QOS="short",
    )
    assert site["default-resources"]["slurm_partition"] == "cpu"
    assert site["default-resources"]["slurm_account"] == "proj42"
    assert site["slurm-qos"] == "short"
    for rule in ("rank_collapse", "attention_products"):
        assert site["set-resources"][rule] | {"mem_mb": 0, "runtime": 0} == {
            "mem_mb": 0,
            "runtime": 0,
            "gpu": 1,
            "gpu_model": "a100",
            "slurm_partition": "gpu",
        }
    assert rendered_profile(SAN_SLURM_GPUS="0")["set-resources"]["rank_collapse"]["gpu"] == 0


@needs_slurm
def test_workflow_runs_on_slurm(tmp_path: Path, default_config: dict) -> None:
    config = tiny_config(default_config)
    local = copy_workflow(tmp_path / "local")
    cluster = copy_workflow(tmp_path / "slurm")
    for workdir in (local, cluster):
        write_config(workdir, config)
    rules = until_rules(cluster)
    dry = snakemake(cluster, "-n", "--profile", "profiles/slurm", "--until", *rules, timeout=300)
    expected = {rule: n for rule, n in scheduled_jobs(dry.stdout).items() if rule != "all"}
    assert expected, f"the dry run schedules no job:\n{dry.stdout}"

    # The local reference run of the same config goes alongside (the SLURM run mostly waits on its polling).
    env = dict(os.environ, PYTHONPATH=str(local), OMP_NUM_THREADS="1")
    reference = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--until", *rules],
        cwd=local,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        proc, wall = run_slurm(cluster, "--until", *rules)
        reference_out, _ = reference.communicate(timeout=SLURM_TIMEOUT_S)
    finally:
        if reference.poll() is None:
            reference.kill()
    submitted = SUBMITTED.findall(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        job_ids = [job_id for job_id, _ in submitted]
        if job_ids:
            subprocess.run(["scancel", *job_ids], capture_output=True, timeout=30)
        output = f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
        pytest.fail(f"SLURM run failed ({proc.returncode}; 124/137: timeout):\n{output}")
    print(f"SLURM run: {len(submitted)} jobs in {wall:.0f} s ({expected})")

    # Every scheduled job was submitted with sbatch, has its own SLURM job id and per-job log, and SLURM ran it.
    assert len(submitted) == sum(expected.values()), (expected, submitted)
    assert len({job_id for job_id, _ in submitted}) == len(submitted)
    logs = {p.stem: p for p in (cluster / ".snakemake" / "slurm_logs").rglob("*.log")}
    ran: dict[str, int] = {}
    for job_id, log in submitted:
        assert Path(log).exists() and job_id in logs, f"no per-job log of SLURM job {job_id}"
        record = slurm_job(job_id)
        rule = record.get("Comment", "").removeprefix("rule_").split("_wildcards_")[0]
        assert record["JobState"] == "COMPLETED", record
        assert record["WorkDir"] == str(cluster), record
        assert f"rule {rule}:" in Path(log).read_text(), f"the log of job {job_id} does not show rule {rule}"
        ran[rule] = ran.get(rule, 0) + 1
        # GPU rules reach SLURM as a GPU request (gpu=1 -> sbatch --gpus=fake:1 on the CI cluster), with the memory
        # that follows from their model (san.core.memory), not a number of the resources table.
        if rule in ("rank_collapse", "attention_products"):
            assert f"gpu:{GPU_MODEL}:1" in record.get("TresPerJob", ""), record
            wildcards = record["Comment"].split("_wildcards_", 1)[-1]
            assert record.get("MinMemoryNode") == f"{declared_memory(cluster, config, rule, wildcards)}M", record
    assert ran == expected

    # The same results as the local run of the same config.
    assert reference.returncode == 0, f"the local reference run failed:\n{reference_out[-6000:]}"
    files = assert_same_results(local, cluster)
    print(f"identical results: {', '.join(map(str, files))}")
