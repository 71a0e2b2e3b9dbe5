"""Every family of the parametrised family suite named by its hub id alone: for each text family with a case in
tests/family_blocks.py, a tiny random checkpoint built from the family's transformers config class (saved as its
causal LM, an encoder as its base model) is served by the local hub, and one workflow run per group (the dense
families, the mixture-of-experts families) builds Fig. 2 for all of them from entries that give only
``pretrained: {source: hub, repo_id, revision}``: the acquisition recognises each family from config.json, the init
weights are a random initialisation of the same architecture, and every result records the family and how it was
recognised."""

from __future__ import annotations

import json

import numpy as np
import pytest
import transformers
from family_blocks import CASES

from san.core.phenomena import PHENOMENA
from san.core.storage import read_netcdf
from san.models.spec import FAMILY_TABLE

from helpers import copy_workflow, snakemake, tiny_config, write_config
from hub_repos import checkpoint_repo, tiny_checkpoint

#: the families run by hub id, one workflow run per group: every family of the table with a case of its own in the
#: family suite (the case named by the family), dense or mixture-of-experts as its row says
BY_ID = {
    group: [name for name, row in FAMILY_TABLE.items() if name in CASES and bool(row.experts_key) == experts]
    for group, experts in (("dense", False), ("experts", True))
}


@pytest.mark.parametrize("group", list(BY_ID))
def test_each_family_named_by_its_hub_id_builds_fig2(tmp_path, default_config, hub_server, group):
    repos = {}
    for family in BY_ID[group]:
        arch = dict(CASES[family][1])
        row = FAMILY_TABLE[family]
        config = getattr(transformers, row.config_class)(**arch)
        saved_as = getattr(transformers, row.lm_class or row.model_class)  # a decoder's LM, an encoder's base model
        folder = tiny_checkpoint(config, tmp_path / "built" / family, seed=1, model_class=saved_as)
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
        for name in PHENOMENA:  # the per-layer measures of massive activations, norms and compression
            assert ds[name].dims == ("weights", "variant", "layer", "sample") and np.isfinite(ds[name]).all(), name
        recognition = json.loads(ds.attrs["recognition"])
        assert (recognition["family"], recognition["by"]) == (family, "architectures"), recognition
        assert json.loads(ds.attrs["config"])["family"] == family
        assert (wf / f"results/figures/rank_collapse_model_by-id-{family}.{fmt}").stat().st_size > 0
