"""What a source hands over after its one trip: the files of a model folder and what the manifest records of their
origin (:class:`Fetched`), taken from there by :func:`san.models.store.store`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel

#: what a source's ``derive`` returns: the manifest's record of the files it wrote, and the LM it loaded (or None)
Derived = tuple[dict[str, Any], PreTrainedModel | None]


@dataclass
class Fetched:
    """What a source hands to :func:`san.models.store.store`: its files and what the manifest records of their
    origin.

    ``copy``: files to copy into the model folder (name -> path at the source); ``placed``: files the source has
    written into the folder itself (a download, an archive's members); ``digests``: the sha256 of what the source
    read but does not hand over (a reassembled archive), by the name its pin has. All of them are checked against
    ``pins`` in one check before anything is copied or read (``require_all``: every one must have a pin).
    ``extractions``: the steps that make a model folder of the checked files (a tower, an encoder stack), by the
    manifest key that records each; ``derive`` writes the folder's files made from them (an init's weights, a GGUF
    file's dequantisation) and returns what the manifest records of that and the LM it loaded (or None);
    ``pickles``: pickle checkpoints to convert to safetensors; ``family``: the family the folder must be of (None:
    recognised from its config.json); ``check``: the sanity check to run and record (None: none recorded);
    ``recognition``: a recognition the manifest records instead of the folder's own (an init of a pretrained folder
    keeps the pretrained model's)."""

    source: str
    where: str
    record: dict[str, Any]
    family: str | None
    copy: dict[str, Path] = field(default_factory=dict)
    placed: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    pins: dict[str, str] | None = None
    require_all: bool = False
    extractions: dict[str, Callable[[Path], dict[str, Any]]] = field(default_factory=dict)
    derive: Callable[[Path], Derived] | None = None
    pickles: list[str] = field(default_factory=list)
    check: dict[str, Any] | None = None
    recognition: dict[str, Any] | None = None
