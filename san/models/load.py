"""Loading a materialised model folder: its files verified against its manifest, its config.json recognised as the
family asked for, its weights read from safetensors only and required to fill exactly the model's parameters, in
eval mode with eager attention (the attention matrices are returned). A checkpoint is loaded by transformers, or
tensor by tensor by the stream loader when it is to be converted or streamed under a memory budget
(:mod:`san.models.stream`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from san.models.families import family as family_entry
from san.models.folders import AcquisitionError, verify_folder
from san.models.recognise import recognise_folder
from san.models.stream import checkpoint_dtypes, load_tensorwise


def load_model(
    folder: str | Path,
    family: str,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    budget_mb: float | None = None,
    budget_key: str = "memory_budget_mb",
) -> PreTrainedModel:
    """Load a materialised model in eval mode with eager attention (attention matrices are returned) on ``device``,
    with eager experts (a mixture-of-experts layer loops over its experts, in float64 too).

    The folder's files must match its manifest (:func:`verify_folder`), its config.json must be of ``family``
    (:func:`recognise_folder`), weights come from safetensors only and must fill exactly the model's parameters.
    A checkpoint in ``dtype`` without a budget is loaded by transformers (its tensors mapped from the file); another
    dtype, or a memory budget ``budget_mb`` (MB of weights; ``budget_key`` names its config key in errors), is loaded
    tensor by tensor, each converted as it is read, and the blocks beyond the budget are streamed from the
    checkpoint as the forward pass reaches them (:mod:`san.models.stream`). A checkpoint whose tensors transformers
    renames or fuses on loading (no one-to-one map onto the model's) goes to transformers' loader without a budget,
    and is refused, naming ``budget_key``, with one.
    """
    folder = Path(folder)
    verify_folder(folder)
    found = recognise_folder(folder, str(folder), family)
    entry = family_entry(family)
    model_cls = entry.model_cls_for(found.model_type)

    def one_to_one(info: dict[str, Any]) -> None:
        problems = _loading_problems(family, info)
        if problems and budget_mb is not None:
            raise AcquisitionError(
                f"{budget_key}: the tensors of {folder}'s checkpoint do not map one to one onto the model's "
                f"({'; '.join(problems)}), which streaming it block by block needs; set {budget_key} to null"
            )
        if problems:
            raise _NotOneToOne

    if budget_mb is not None or not checkpoint_dtypes(folder) <= {dtype}:
        try:
            model, streaming = load_tensorwise(
                model_cls, folder, entry.layers, dtype, device, budget_mb, budget_key, check=one_to_one
            )
        except _NotOneToOne:
            pass  # a layout transformers converts on loading (renamed or fused tensors): its loader below
        else:
            model.san_streaming = streaming  # None when every block is held
            return model
    model, info = model_cls.from_pretrained(
        folder,
        attn_implementation="eager",
        experts_implementation="eager",  # mixture-of-experts layers: the loop over experts, in any dtype
        use_safetensors=True,
        trust_remote_code=False,
        dtype=dtype,
        output_loading_info=True,
    )
    _check_loading_info(folder, family, info)
    return model.to(dtype).to(device).eval()


def _loading_problems(family: str, info: dict[str, Any]) -> list[str]:
    """What does not fit between weights and model in a loading report: a parameter the file lacks (left at
    random), a file weight the model has no place for (outside the family's pretraining or LM head), a shape
    mismatch, transformers' own errors."""
    optional = family_entry(family).row.optional_prefixes  # e.g. a ViT classification checkpoint has no pooler
    missing = sorted(k for k in info.get("missing_keys") or [] if not (optional and k.startswith(optional)))
    heads = family_entry(family).head_prefixes
    unexpected = sorted(k for k in info.get("unexpected_keys") or [] if not k.startswith(heads))
    mismatched = sorted(str(k[0] if isinstance(k, tuple) else k) for k in info.get("mismatched_keys") or [])
    problems = [
        f"{len(keys)} {what} (e.g. {keys[:3]})"
        for what, keys in (
            ("model weights missing from the file", missing),
            ("file weights the model has no place for", unexpected),
            ("weights of the wrong shape", mismatched),
        )
        if keys
    ]
    return problems + [str(msg) for msg in info.get("error_msgs") or []]


def _check_loading_info(folder: Path, family: str, info: dict[str, Any]) -> None:
    """Refuse weights that do not fit the model (:func:`_loading_problems`), naming the folder's files."""
    problems = _loading_problems(family, info)
    if problems:
        raise AcquisitionError(
            f"{folder}/model.safetensors does not match the architecture of {folder}/config.json: "
            + "; ".join(problems)
        )


class _NotOneToOne(Exception):
    """The checkpoint's tensors do not map one to one onto the model's (a layout transformers converts)."""
