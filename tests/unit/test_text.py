"""Input text: prose extraction, passages, seeded choice, content hash."""

import numpy as np
import pytest

from san.core.text import content_hash, prose_paragraphs, pydoc_documents, tokenize_documents
from san.models.acquire import bundled_model_dir, load_tokenizer

DOC = """Title
*****

This paragraph is prose. It explains how the feature works in plain words and has sentences.

An example follows::

   for i in range(10):
       print(i, "is a number that we print here for the example")

>>> print("doctest lines are code, not prose, even when they are long enough")

Another paragraph of ordinary prose follows the code block. It is long enough to count as prose.
"""


def test_prose_paragraphs_drop_code_headings_and_doctests():
    paras = prose_paragraphs(DOC)
    assert paras[0].startswith("This paragraph is prose.")
    assert paras[-1].startswith("Another paragraph")
    assert not any("print" in p or "*****" in p for p in paras)


def test_pydoc_source_is_prose():
    docs = pydoc_documents()
    paras = [p for d in docs for p in d]
    assert len(paras) > 500
    assert not any(p.lstrip().startswith(">>>") for p in paras)
    assert sum(p.count(".") for p in paras) > len(paras)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(bundled_model_dir())


def test_tokenize_documents_shape_determinism_and_hash(tokenizer):
    docs = pydoc_documents()
    a = tokenize_documents(tokenizer, docs, 32, 5, seed=0)
    b = tokenize_documents(tokenizer, docs, 32, 5, seed=0)
    c = tokenize_documents(tokenizer, docs, 32, 5, seed=1)
    assert a.shape == (5, 32) and a.dtype == np.int64
    assert np.array_equal(a, b) and content_hash(a) == content_hash(b)
    assert content_hash(a) != content_hash(c)
    # no padding: every sequence is real text framed by [CLS] ... [SEP]
    assert (a[:, 0] == tokenizer.cls_token_id).all() and (a[:, -1] == tokenizer.sep_token_id).all()
    assert (a != tokenizer.pad_token_id).all()


def test_too_few_texts_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="n_sequences"):
        tokenize_documents(tokenizer, [["A short text."]], 16, 2, seed=0)
