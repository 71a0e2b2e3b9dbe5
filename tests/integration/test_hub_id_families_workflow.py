"""Modern architectures named by their hub id alone: for each family added to the paper's (Qwen2, Qwen3, Mistral,
Phi-3, Gemma-2, OLMo-2, GPT-NeoX, Phi, Granite, ModernBERT and the mixture-of-experts families Mixtral, Qwen2-MoE,
Qwen3-MoE, OLMoE, gpt-oss, Phi-MoE, Granite-MoE, DeepSeek-V3), a tiny random checkpoint built from the family's
transformers config class is served by the local hub, and one workflow run builds Fig. 2 for all of them from
entries that give only ``pretrained: {source: hub, repo_id, revision}``: the acquisition recognises each family from
config.json, the init weights are a random initialisation of the same architecture, and every result records the
family and how it was recognised."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import transformers

from san.core.storage import read_netcdf
from san.models.spec import FAMILY_TABLE

from helpers import copy_workflow, snakemake, tiny_config, write_config
from hub_repos import checkpoint_repo, tiny_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "models"))
from test_families import CASES  # noqa: E402 - the tiny architectures of the family tests

#: the families run by hub id, one workflow run per group: the dense ones, every mixture-of-experts family
BY_ID = {
    "dense": ["qwen2", "qwen3", "mistral", "phi3", "gemma2", "olmo2", "gpt_neox", "phi", "granite", "modernbert"],
    "experts": [name for name, row in FAMILY_TABLE.items() if row.experts_key],
}


@pytest.mark.parametrize("group", list(BY_ID))
def test_each_new_family_named_by_its_hub_id_builds_fig2(tmp_path, default_config, hub_server, group):
    repos = {}
    for family in BY_ID[group]:
        arch = dict(CASES[family][1])
        config = getattr(transformers, FAMILY_TABLE[family].config_class)(**arch)
        folder = tiny_checkpoint(config, tmp_path / "built" / family, seed=1)
        repo_id = f"tiny-org/{family}"
        hub_server.add(checkpoint_repo(repo_id, folder))
        repos[family] = repo_id
    wf = copy_workflow(tmp_path / "wf")
    cfg = tiny_config(default_config)
    for family, repo_id in repos.items():
        cfg["models"][f"by-id-{family}"] = {"pretrained": {"source": "hub", "repo_id": repo_id, "revision": "main"}}
    cfg["rank_collapse"]["models"] = [f"by-id-{f}" for f in repos]
    cfg["attention_products"]["models"] = []
    write_config(wf, cfg)
    fmt = cfg["figures"]["formats"][0]
    targets = [f"results/rank_collapse/by-id-{f}.nc" for f in repos]
    targets += [f"results/figures/rank_collapse_model_by-id-{f}.{fmt}" for f in repos]
    env = {"HF_ENDPOINT": hub_server.endpoint, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    snakemake(wf, *targets, "--cores", "2", env=env)
    for family in repos:
        ds = read_netcdf(wf / f"results/rank_collapse/by-id-{family}.nc")
        assert list(ds["weights"].values) == ["init", "pretrained"], family
        assert list(ds["variant"].values) == ["SAN", "SAN+MLP", "SAN+skip", "transformer"], family
        ratio = ds["residual_ratio"].values
        assert np.isfinite(ratio).all() and (ratio >= 0).all(), family
        recognition = json.loads(ds.attrs["recognition"])
        assert (recognition["family"], recognition["by"]) == (family, "architectures"), recognition
        assert json.loads(ds.attrs["config"])["family"] == family
        assert (wf / f"results/figures/rank_collapse_model_by-id-{family}.{fmt}").stat().st_size > 0
