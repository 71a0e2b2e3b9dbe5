"""The light half of model acquisition: tokenizers of model folders (san.models.folders)."""

import json

import numpy as np
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from san.core.text import pydoc_documents, tokenize_documents
from san.models.folders import AcquisitionError, bundled_model_dir, load_tokenizer, verify_folder
from san.models.store import materialise

TINY_BERT = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16}


def test_the_generic_fast_tokenizer_gives_the_ids_of_the_model_specific_one():
    """load_tokenizer reads tokenizer.json with transformers' generic fast tokenizer (no torch import); the ids of
    the experiment's inputs, special tokens included, equal those of AutoTokenizer's model-specific class."""
    folder = bundled_model_dir()
    generic, specific = load_tokenizer(folder), AutoTokenizer.from_pretrained(folder)
    assert isinstance(generic, PreTrainedTokenizerFast)
    assert type(specific) is not PreTrainedTokenizerFast, "the comparison must be against the specific class"
    docs = pydoc_documents()
    a = tokenize_documents(generic, docs, 64, 6, seed=0)
    b = tokenize_documents(specific, docs, 64, 6, seed=0)
    np.testing.assert_array_equal(a, b)
    assert (a[:, 0] == specific.cls_token_id).all() and (a[:, -1] == specific.sep_token_id).all()
    assert len(generic) == len(specific)
    assert (generic.cls_token_id, generic.sep_token_id) == (specific.cls_token_id, specific.sep_token_id)


def test_a_folder_without_tokenizer_json_falls_back_to_the_specific_class(tmp_path):
    folder = tmp_path / "m"
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, folder)
    (folder / "tokenizer.json").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["sha256"]["tokenizer.json"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    tok = load_tokenizer(folder)
    assert type(tok) is not PreTrainedTokenizerFast
    assert (
        tok("a b c", add_special_tokens=False)["input_ids"]
        == load_tokenizer(bundled_model_dir())("a b c", add_special_tokens=False)["input_ids"]
    )


def test_verify_folder_without_weights_skips_only_the_weight_files(tmp_path):
    folder = tmp_path / "m"
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    verify_folder(folder, weights=False)
    with pytest.raises(AcquisitionError, match="sha256 of model.safetensors"):
        verify_folder(folder)
    weights.unlink()
    with pytest.raises(AcquisitionError, match="model.safetensors .* is missing"):
        verify_folder(folder, weights=False)
