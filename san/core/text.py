"""Input text for the rank-collapse experiment (Sec. 4): natural English prose, pinned by a content hash.

Offline source (``pydoc``): the prose paragraphs of Python's documentation, frozen in the repository
(``san/data/python-docs-prose.txt``, CPython 3.11.7's ``pydoc_data.topics`` with code blocks excluded, PSF License
Version 2; ``san/data/README.md``) and verified by sha256 before use, so every Python version and machine reads the
same bytes. Online source: the wiki_bio test split that the paper used, through the ``datasets`` package.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

#: Data files this module reads, relative to the ``san`` folder (inputs of every job that imports it, san.imports).
DATA_FILES = ("data/python-docs-prose.txt",)
#: The pinned offline corpus: one paragraph per line, documents separated by a blank line.
PROSE_FILE = Path(__file__).resolve().parent.parent / DATA_FILES[0]
#: Its sha256: the bytes every run reads, checked before use.
PROSE_SHA256 = "baaee6aa55692f2438ee08e77308f7c13d94a0f8b74ff92752f0970e37f6cfed"

_HEADING_UNDERLINE = re.compile(r"^([*=\-~^\"'`#+])\1{2,}\s*$")


def _is_prose(lines: Sequence[str]) -> bool:
    text = " ".join(line.strip() for line in lines)
    if any(line.lstrip().startswith((">>>", "...", "$ ")) for line in lines):
        return False
    if any(_HEADING_UNDERLINE.match(line.strip()) for line in lines):
        return False
    letters = sum(ch.isalpha() or ch.isspace() for ch in text)
    # code, grammar productions and tables are dominated by punctuation; prose has sentences
    return len(text) >= 80 and letters / len(text) > 0.85 and "." in text and not text.rstrip().endswith("::")


def prose_paragraphs(doc: str) -> list[str]:
    """Prose paragraphs of one reStructuredText-like document, each joined into a single line.

    Literal blocks (indented paragraphs after a paragraph ending in ``::``), doctest lines, headings and
    punctuation-heavy paragraphs (grammar, tables, signatures) are dropped.
    """
    paragraphs: list[str] = []
    literal_indent: int | None = None
    for block in re.split(r"\n\s*\n", doc):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        indent = min(len(line) - len(line.lstrip()) for line in lines)
        if literal_indent is not None:
            if indent > literal_indent:
                continue
            literal_indent = None
        if lines[-1].rstrip().endswith("::"):
            literal_indent = indent
        if _is_prose(lines):
            text = " ".join(line.strip() for line in lines)
            paragraphs.append(text.replace("::", ":"))
    return paragraphs


def interpreter_pydoc_documents() -> list[list[str]]:
    """The prose paragraphs of every topic of the running interpreter's ``pydoc_data``, topic by topic (sorted
    keys): how :data:`PROSE_FILE` was made (:func:`write_prose_corpus`); it differs between Python versions, so the
    workflow never reads it."""
    from pydoc_data.topics import topics

    docs = [prose_paragraphs(topics[key]) for key in sorted(topics)]
    return [d for d in docs if d]


def format_corpus(documents: Sequence[Sequence[str]]) -> str:
    """The corpus file's text: one paragraph per line, documents separated by a blank line."""
    if any("\n" in p or p != p.strip() or not p for d in documents for p in d):
        raise ValueError("corpus paragraphs must be non-empty single lines without surrounding white space")
    return "\n\n".join("\n".join(d) for d in documents) + "\n"


def write_prose_corpus(path: str | Path) -> str:
    """Write the running interpreter's documentation prose as a corpus file; returns its sha256 (the pin)."""
    data = format_corpus(interpreter_pydoc_documents()).encode("utf-8")
    Path(path).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def read_corpus(path: str | Path, sha256: str) -> list[list[str]]:
    """The documents of a corpus file, after checking its bytes against ``sha256`` (an error names the file)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RuntimeError(f"text corpus {path} cannot be read ({exc}); reinstall san") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise RuntimeError(f"text corpus {path} has sha256 {digest}, expected {sha256}: the file was changed")
    return [block.split("\n") for block in data.decode("utf-8").rstrip("\n").split("\n\n")]


def pydoc_documents() -> list[list[str]]:
    """The pinned prose of Python's documentation (:data:`PROSE_FILE`), document by document: the same bytes on
    every Python version and machine."""
    return read_corpus(PROSE_FILE, PROSE_SHA256)


def wiki_bio_documents(dataset: str, split: str, revision: str) -> list[list[str]]:
    """The wiki_bio biographies (``target_text``) as one-paragraph documents; needs network and ``datasets``.

    wiki_bio ships a loading script, which ``datasets`` 4 and later refuse to run; the hub's Parquet conversion of
    it lives on the revision ``refs/convert/parquet``, which loads as plain Parquet.
    """
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise RuntimeError("text.source: wiki_bio needs the `datasets` package (pip install 'san[online]')") from exc
    try:
        ds = datasets.load_dataset(dataset, split=split, revision=revision)
    except Exception as exc:  # noqa: BLE001 - any hub failure gets the same actionable message
        raise RuntimeError(dataset_error("text.wiki_bio", dataset, split, revision, exc)) from exc
    return [[t.strip()] for t in ds["target_text"] if t.strip()]


@functools.lru_cache
def hub_dataset_commit(dataset: str, revision: str) -> str | None:
    """The commit that a hub dataset's ``revision`` (branch, tag or commit) resolves to now, for the results'
    provenance beside the configured revision; None when the hub cannot be asked (offline, unreachable). Asked
    once per process."""
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(dataset, revision=revision).sha
    except Exception:  # noqa: BLE001 - provenance only: the data was already loaded (or came from the cache)
        return None


def hub_dataset_origin(dataset: str, revision: str) -> dict[str, str]:
    """Where hub text came from, for the results' provenance: the dataset, the configured revision and the commit
    it resolves to (``unresolved (offline)`` when the hub cannot be asked, :func:`hub_dataset_commit`)."""
    commit = hub_dataset_commit(dataset, revision)
    return {"dataset": dataset, "revision": revision, "commit": commit or "unresolved (offline)"}


def dataset_error(key: str, dataset: str, split: str, revision: str, exc: BaseException) -> str:
    """What went wrong loading a hub dataset through ``datasets`` and what to fix (``key``: its config entry)."""
    msg = f"could not load dataset {dataset!r} (split {split!r}, revision {revision!r}) from the hub: {exc}. "
    if "scripts are no longer supported" in str(exc):
        return msg + (
            f"The revision holds a loading script, which current `datasets` refuse to run: set {key}.revision to "
            "the hub's Parquet conversion, refs/convert/parquet."
        )
    return msg + f"Check {key} (dataset, split, revision); offline, use the default pydoc source."


def passages(documents: Iterable[list[str]], count_tokens, min_tokens: int) -> list[str]:
    """Group consecutive paragraphs of each document into passages of at least ``min_tokens`` tokens.

    Passages start at a paragraph boundary and never cross documents, so each is natural, contiguous prose.
    """
    out: list[str] = []
    for paragraphs in documents:
        current: list[str] = []
        n = 0
        for para in paragraphs:
            current.append(para)
            n += count_tokens(para)
            if n >= min_tokens:
                out.append(" ".join(current))
                current, n = [], 0
    return out


def choose(n_items: int, n: int, seed: int) -> np.ndarray:
    """Sorted indices of ``n`` of ``n_items`` items drawn without replacement with ``seed``."""
    if n_items < n:
        raise ValueError(f"only {n_items} texts are long enough, but text.n_sequences asks for {n}")
    return np.sort(np.random.default_rng(seed).choice(n_items, size=n, replace=False))


def tokenize_documents(tokenizer, documents, seq_len: int, n_sequences: int, seed: int) -> np.ndarray:
    """``n_sequences`` token-id rows of exactly ``seq_len`` (special tokens included) from documents (paragraph lists).

    Paragraphs are grouped into passages with at least ``seq_len`` tokens, a seeded subset is chosen and truncated.
    """

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    candidates = passages(documents, count, seq_len)
    idx = choose(len(candidates), n_sequences, seed)
    enc = tokenizer([candidates[i] for i in idx], truncation=True, max_length=seq_len, padding=False)
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    if ids.shape != (n_sequences, seq_len):
        raise ValueError(f"tokenised text has shape {ids.shape}, expected {(n_sequences, seq_len)}")
    return ids


def content_hash(ids: np.ndarray) -> str:
    """sha256 of the token ids (int64, C order): pins the input even when its source changes."""
    return hashlib.sha256(np.ascontiguousarray(ids, dtype=np.int64).tobytes()).hexdigest()
