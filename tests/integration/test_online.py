"""The paper's online configuration end to end against a local hub (tests/hub_server.py): `snakemake --configfile
config/paper.yaml` with ``HF_ENDPOINT`` pointing at the fixture, which serves a tiny BERT under paper.yaml's
repository name and wiki_bio's Parquet conversion; the real rules, huggingface_hub and datasets clients. Then the
acquisition rule offline from the cache, and with a misspelt repository. And a model named by its hub id alone,
recognised from its config.json."""

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from san.core.storage import read_netcdf
from san.models.folders import bundled_model_dir, load_tokenizer

from helpers import copy_workflow, snakemake, tiny_config, write_config
from hub_repos import BY_HUB_ID, PARQUET_BRANCH, WIKI_BIO

MODEL, REPO = "bert-base-cased", "google-bert/bert-base-cased"
RESULT = f"results/rank_collapse/{MODEL}.nc"
#: laid over config/paper.yaml: only its BERT, and that model's init shrunk to the tiny config's size
OVERLAY = {
    "rank_collapse": {"models": [MODEL]},
    "models": {MODEL: {"init": {"config": {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                                           "intermediate_size": 32}}}},
}  # fmt: skip


def hub_env(hub_server, home) -> dict[str, str]:
    return {"HF_ENDPOINT": hub_server.endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}


@pytest.fixture(scope="module")
def run(tmp_path_factory, default_config, hub_server):
    root = tmp_path_factory.mktemp("online")
    wf = copy_workflow(root / "wf")
    cfg = tiny_config(default_config)
    write_config(wf, cfg)
    write_config(wf, OVERLAY, "online.yaml")
    env = hub_env(hub_server, root / "hf_home")
    snakemake(wf, RESULT, "--cores", "2", "--configfile", "config/paper.yaml", "online.yaml", env=env)
    return wf, cfg, root


def test_the_paper_config_builds_rank_collapse_from_the_hub_and_records_the_commit(run, hub_server):
    wf, _, _ = run
    commit = hub_server.repos[("model", REPO)].commit("main")
    manifest = json.loads((wf / f"results/models/{MODEL}/pretrained/manifest.json").read_text())
    assert manifest["source"] == "hub" and manifest["repo_id"] == REPO and manifest["commit"] == commit
    ds = read_netcdf(wf / RESULT)
    assert list(ds["weights"].values) == ["init", "pretrained"]
    assert json.loads(ds.attrs["manifests"])["pretrained"]["commit"] == commit
    assert np.isfinite(ds["residual_ratio"].values).all()


def test_the_wiki_bio_windows_match_an_independent_computation(run, hub_server):
    wf, cfg, _ = run
    corpus = json.loads((wf / "results/text/corpus.json").read_text())
    commit = hub_server.repos[("dataset", WIKI_BIO)].commit(PARQUET_BRANCH)
    assert corpus["source"] == "wiki_bio" and corpus["revision"] == PARQUET_BRANCH and corpus["commit"] == commit
    served = hub_server.repos[("dataset", WIKI_BIO)].branches[PARQUET_BRANCH]["default/test/0000.parquet"]
    texts = [t.strip() for t in pq.read_table(io.BytesIO(served))["target_text"].to_pylist()]
    n, seq_len, seed = (cfg["text"][k] for k in ("n_sequences", "seq_len", "seed"))
    tok = load_tokenizer(bundled_model_dir())  # the tiny served BERT carries the bundled WordPiece tokenizer
    long = [t for t in texts if len(tok(t, add_special_tokens=False)["input_ids"]) >= seq_len]
    chosen = np.sort(np.random.default_rng(seed).choice(len(long), n, replace=False))
    want = [tok(long[i], truncation=True, max_length=seq_len)["input_ids"] for i in chosen]
    for weights in ("init", "pretrained"):
        ds = read_netcdf(wf / f"results/inputs/{MODEL}/{weights}.nc")
        assert ds["input_ids"].values.tolist() == want, weights
        assert (ds.attrs["text_dataset"], ds.attrs["text_commit"]) == (WIKI_BIO, commit), weights


def test_acquisition_offline_from_the_cache_and_a_misspelt_repository(run, hub_server, tmp_path):
    _, cfg, root = run
    wf = copy_workflow(tmp_path / "wf")
    write_config(wf, cfg)
    write_config(wf, OVERLAY, "online.yaml")
    target = f"results/models/{MODEL}/pretrained"
    offline = {**hub_env(hub_server, root / "hf_home"), "HF_HUB_OFFLINE": "1"}
    snakemake(wf, target, "--cores", "1", "--configfile", "config/paper.yaml", "online.yaml", env=offline)
    commit = hub_server.repos[("model", REPO)].commit("main")
    assert json.loads((wf / target / "manifest.json").read_text())["commit"] == commit
    typo = {"models": {MODEL: {"pretrained": {"repo_id": "google-bert/bert-base-casd"}}}}
    (wf / "typo.yaml").write_text(yaml.safe_dump(typo))
    args = (target, "--cores", "1", "--configfile", "config/paper.yaml", "online.yaml", "typo.yaml")
    proc = snakemake(wf, *args, check=False, env=hub_env(hub_server, tmp_path / "hf_home"))
    log = (wf / f"logs/acquire_model/{MODEL}/pretrained.log").read_text()
    assert proc.returncode != 0 and "no such repository" in log and f"models.{MODEL}.pretrained.repo_id" in log
    folder = wf / f"results/models/{MODEL}"  # no partial folder (Snakemake also removes the emptied parent)
    assert not (wf / target).exists() and (not folder.exists() or not any(folder.iterdir()))


def test_a_model_named_by_its_hub_id_alone_builds_rank_collapse(tmp_path, default_config, hub_server):
    """``models: {m: {pretrained: {source: hub, repo_id, revision}}}``: the acquisition recognises the family
    from config.json, the init weights are a random initialisation of the same architecture, and every result
    records the family, how it was recognised and the structural facts."""
    wf = copy_workflow(tmp_path / "wf")
    cfg = tiny_config(default_config)
    cfg["models"]["by-id"] = {"pretrained": {"source": "hub", "repo_id": BY_HUB_ID, "revision": "main"}}
    cfg["rank_collapse"]["models"] = ["by-id"]
    write_config(wf, cfg)
    targets = ["results/rank_collapse/by-id.nc", "results/attention_products/by-id.nc"]
    snakemake(wf, *targets, "--cores", "2", env=hub_env(hub_server, tmp_path / "hf_home"))
    commit = hub_server.repos[("model", BY_HUB_ID)].commit("main")
    ds = read_netcdf(wf / targets[0])
    assert list(ds["weights"].values) == ["init", "pretrained"] and ds.sizes["layer"] == 4
    assert np.isfinite(ds["residual_ratio"].values).all()
    assert json.loads(ds.attrs["config"])["family"] == "llama"
    recognition = json.loads(ds.attrs["recognition"])
    assert (recognition["family"], recognition["by"], recognition["model_type"]) == ("llama", "architectures", "olmo")
    assert recognition["facts"]["kv_heads"] == 2 and recognition["facts"]["norms"] == "pre"
    manifests = json.loads(ds.attrs["manifests"])
    assert manifests["pretrained"]["commit"] == commit
    assert manifests["init"]["architecture_sha256"] == manifests["pretrained"]["sha256"]["config.json"]
    assert json.loads(read_netcdf(wf / targets[1]).attrs["recognition"])["family"] == "llama"
