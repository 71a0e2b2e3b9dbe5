"""benchmarks/bench_cpu_against.py: the comparison groups jobs and restricts the per-model ones to the models both
runs analysed, and both commits are arguments without defaults (its CPU hook in a job's process:
tests/integration/benchmarks/test_bench_cpu_hook.py)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the script's own folder, as when it runs
spec = importlib.util.spec_from_file_location("bench_cpu_against", ROOT / "benchmarks" / "bench_cpu_against.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _hooked_run(folder: Path, records: list[dict]) -> Path:
    folder.mkdir()
    (folder / bench.HOOK_LOG).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _job(rule: str, cpu: float, **wildcards: str) -> dict:
    return {"job": {"rule": rule, "wildcards": wildcards}, "cpu": cpu}


def test_groups_restrict_per_model_rules_to_the_models_of_both_runs(tmp_path):
    a = _hooked_run(
        tmp_path / "a",
        [
            _job("paths_train", 10.0, task="sorting"),
            _job("circle_train", 2.0, seed="0"),
            _job("rank_collapse", 5.0, model="bert"),
            _job("rank_collapse", 8.0, model="xlnet"),  # a model only run A analysed
            _job("tokenize", 1.0, model="bert", weights="init"),
            _job("summary", 3.0),  # in no group
            {"job": None, "cpu": 99.0},  # a process that was no job (snakemake itself)
        ],
    )
    b = _hooked_run(
        tmp_path / "b",
        [
            _job("paths_train", 9.0, task="sorting"),
            _job("paths_evaluate", 4.0, task="sorting"),
            _job("circle_train", 1.0, seed="0"),
            _job("rank_collapse", 4.0, model="bert"),
            _job("rank_collapse", 50.0, model="gpt2"),  # a model only run B analysed
            _job("tokenize_inputs", 0.5, model="bert", weights="init"),
            _job("acquire_model", 7.0, model="gpt2", weights="init"),
            _job("theorem_sweep", 20.0),  # an experiment in no group
        ],
    )
    jobs_a, jobs_b = bench.hooked_jobs(a), bench.hooked_jobs(b)
    models = bench.analysed_models(jobs_a) & bench.analysed_models(jobs_b)
    assert models == {"bert"}
    before, after = bench.by_group(jobs_a, models), bench.by_group(jobs_b, models)
    assert before == {
        "path-effectiveness training": (1, 10.0),
        "path evaluation": (0, 0.0),
        "circle (training, gathering)": (1, 2.0),
        "rank collapse": (1, 5.0),
        "acquisition, tokenisation, path products": (1, 1.0),
    }
    assert after == {
        "path-effectiveness training": (1, 9.0),
        "path evaluation": (1, 4.0),
        "circle (training, gathering)": (1, 1.0),
        "rank collapse": (1, 4.0),
        "acquisition, tokenisation, path products": (1, 0.5),
    }
    rows = bench.comparison_rows(before, after)
    assert rows[0] == {"group": "path-effectiveness training", "jobs_a": 1, "cpu_a_s": 10.0, "jobs_b": 1,
                       "cpu_b_s": 9.0, "change": pytest.approx(-0.1)}  # fmt: skip
    assert rows[1]["change"] is None  # no evaluation in run A: no change to state
    assert rows[-1]["group"] == "together" and (rows[-1]["cpu_a_s"], rows[-1]["cpu_b_s"]) == (18.0, 18.5)
    from san.report.benchmark_tables import BenchmarkCells

    cells = [BenchmarkCells().cell(c, {"commit_a": "A", "commit_b": "B", **row}) for _, c in bench.COLUMNS for row in
             (rows[0], rows[1], rows[-1])]  # fmt: skip
    assert cells[-3:] == ["-10.0%", "-", "+2.8%"]


def test_both_commits_are_required_arguments(monkeypatch, capsys):
    """No commit is built in: the script refuses to run without two."""
    monkeypatch.setattr(sys, "argv", ["bench_cpu_against.py", "HEAD"])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2 and "commit_b" in capsys.readouterr().err
