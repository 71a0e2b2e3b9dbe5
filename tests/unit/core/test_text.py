"""Input text: prose extraction, passages, seeded choice, content hash."""

import numpy as np
import pytest

from san.core.text import (
    PROSE_FILE,
    PROSE_SHA256,
    content_hash,
    format_corpus,
    prose_paragraphs,
    pydoc_documents,
    read_corpus,
    tokenize_documents,
)
from san.models.folders import bundled_model_dir, load_tokenizer

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


@pytest.mark.slow
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


def test_default_text_is_the_pinned_file_not_the_interpreter():
    """The offline corpus is a file of the repository checked by sha256: the same bytes on every Python, never the
    running interpreter's pydoc_data (which differs between versions)."""
    import hashlib

    assert hashlib.sha256(PROSE_FILE.read_bytes()).hexdigest() == PROSE_SHA256
    docs = pydoc_documents()
    assert len(docs) == 78 and sum(map(len, docs)) == 1209
    assert format_corpus(docs).encode("utf-8") == PROSE_FILE.read_bytes()


def test_default_token_ids_are_pinned(tokenizer):
    """The token ids of the default input (32 sequences of 128 tokens, seed 0) for all-MiniLM-L6-v2's tokenizer:
    a changed corpus, passage grouping or seeded choice moves this hash, and every Fig. 2 number with it."""
    ids = tokenize_documents(tokenizer, pydoc_documents(), 128, 32, seed=0)
    assert content_hash(ids) == "9ff13bbe703d7884b332709ca585af05815f2a06de97b3968c459992f21bf533"


def test_a_changed_corpus_file_is_refused(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("One paragraph of prose.\n\nAnother document.\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match=r"corpus\.txt has sha256 .* expected 0+: the file was changed"):
        read_corpus(path, "0" * 64)
    with pytest.raises(RuntimeError, match="cannot be read"):
        read_corpus(tmp_path / "missing.txt", PROSE_SHA256)


def test_corpus_round_trip(tmp_path):
    import hashlib

    docs = [["First paragraph.", "Second paragraph."], ["Another document."]]
    path = tmp_path / "c.txt"
    path.write_bytes(format_corpus(docs).encode())
    assert read_corpus(path, hashlib.sha256(path.read_bytes()).hexdigest()) == docs
    with pytest.raises(ValueError, match="single lines"):
        format_corpus([["two\nlines"]])
