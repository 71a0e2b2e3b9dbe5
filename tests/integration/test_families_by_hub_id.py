"""Every family of the parametrised family suite named by its hub id alone: for each text family with a case in
tests/family_blocks.py, a tiny random checkpoint built from the family's transformers config class (saved as its
causal LM, an encoder as its base model) is served by the local hub and taken through what the workflow's jobs run
for an entry that gives only ``pretrained: {source: hub, repo_id, revision}``: the acquisition through the real
client (:func:`san.models.store.materialise`) recognises the family from config.json, the init weights are a random
initialisation of the same architecture, and Fig. 2's measures (:func:`san.rank_collapse.experiment.run`) record
the family and how it was recognised. One process for all of them: the workflow around these calls (acquisition,
tokenised inputs, the rank-collapse job and its figure as jobs) is the same for every family and runs end to end
for a model named by its hub id in tests/integration/test_online.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import transformers
import xarray as xr
from family_blocks import CASES

from san.measures.phenomena import PHENOMENA
from san.models.entries import init_entry
from san.models.folders import recorded_family
from san.models.spec import FAMILY_TABLE
from san.models.store import materialise
from san.rank_collapse.experiment import run

from helpers import tiny_config
from hub_repos import checkpoint_repo, tiny_checkpoint

pytestmark = pytest.mark.slow

#: the families run by hub id: every family of the table with a case of its own in the family suite (the case named
#: by the family), dense and mixture-of-experts alike
BY_ID = [name for name in FAMILY_TABLE if name in CASES]


def _inputs(vocab: int, n: int, tokens: int) -> xr.Dataset:
    """Token ids of ``n`` sequences of ``tokens`` drawn on a CPU generator (the tokenised inputs' job is the same for
    every family)."""
    ids = np.random.default_rng(0).integers(5, vocab, size=(n, tokens))
    return xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": "0" * 64})


@pytest.mark.parametrize("family", BY_ID)
def test_each_family_named_by_its_hub_id_is_recognised_and_measured(tmp_path, default_config, hub, family):
    arch = dict(CASES[family][1])
    row = FAMILY_TABLE[family]
    config = getattr(transformers, row.config_class)(**arch)
    saved_as = getattr(transformers, row.lm_class or row.model_class)  # a decoder's LM, an encoder's base model
    built = tiny_checkpoint(config, tmp_path / "built", seed=1, model_class=saved_as)
    repo_id = f"tiny-org/{family}"
    hub.add(checkpoint_repo(repo_id, built))
    name = f"by-id-{family}"
    entry = {"pretrained": {"source": "hub", "repo_id": repo_id, "revision": "main"}}
    folders = {"pretrained": tmp_path / "models" / "pretrained", "init": tmp_path / "models" / "init"}
    materialise(name, None, "pretrained", entry["pretrained"], folders["pretrained"])
    materialise(name, None, "init", init_entry(entry), folders["init"], folders["pretrained"])
    recognised, recognition = recorded_family(list(folders.values()))
    assert (recognised, recognition["by"]) == (family, "architectures"), recognition
    cfg = tiny_config(default_config)
    settings = {k: v for k, v in cfg["rank_collapse"].items() if k != "models"}
    inputs = _inputs(config.vocab_size, 2, cfg["text"]["seq_len"])
    ds = run(recognised, {w: str(f) for w, f in folders.items()}, dict.fromkeys(folders, inputs), settings)
    assert sorted(map(str, ds["weights"].values)) == ["init", "pretrained"]
    assert list(ds["variant"].values) == ["SAN", "SAN+MLP", "SAN+skip", "transformer"]
    ratio = ds["residual_ratio"].values
    assert np.isfinite(ratio).all() and (ratio >= 0).all()
    for measure in PHENOMENA:  # the per-layer measures of massive activations, norms and compression
        assert ds[measure].dims == ("weights", "variant", "layer", "sample") and np.isfinite(ds[measure]).all()
    manifests = ds.attrs["manifests"]  # written to the result as JSON
    manifests = json.loads(manifests) if isinstance(manifests, str) else manifests
    assert manifests["pretrained"]["source"] == "hub" and manifests["pretrained"]["repo_id"] == repo_id
