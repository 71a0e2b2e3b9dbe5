"""Sanity checks of genuine pretrained weights, run when a model is acquired (``pretrained.check``): a causal LM's
greedy continuation of a prompt must contain the expected word; a sentence encoder's mean-pooled embeddings must put
a paraphrase closer to the anchor than an unrelated sentence. The result goes into the folder's manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, PreTrainedModel

from san.models.families import family as family_entry
from san.models.folders import AcquisitionError

#: the continuation check's defaults: the greedy continuation of a causal LM must contain the expected word
CONTINUATION_CHECK = {"prompt": "The capital of France is", "expect": "Paris", "new_tokens": 8}
#: the paraphrase check: a sentence encoder's mean-pooled embeddings must put the paraphrase closer to the anchor
#: than the unrelated sentence
PARAPHRASE_CHECK = {
    "anchor": "A man is playing a guitar on the stage.",
    "paraphrase": "On stage, a man plays the guitar.",
    "unrelated": "The stock market fell sharply on Monday.",
}


@torch.inference_mode()
def continuation_check(lm: PreTrainedModel, tokenizer, check: dict[str, Any]) -> dict[str, Any]:
    """A causal LM's greedy continuation of ``check['prompt']``, and whether it contains ``check['expect']``."""
    settings = {**CONTINUATION_CHECK, **check}
    ids = tokenizer(settings["prompt"], return_tensors="pt")
    out = lm.generate(**ids, max_new_tokens=int(settings["new_tokens"]), do_sample=False)
    text = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    return {**settings, "continuation": text, "passed": settings["expect"] in text}


@torch.inference_mode()
def paraphrase_check(model: PreTrainedModel, tokenizer) -> dict[str, Any]:
    """A sentence encoder's mean-pooled embeddings: the cosine similarity of the anchor to a paraphrase and to an
    unrelated sentence (:data:`PARAPHRASE_CHECK`); passes when the paraphrase is closer."""
    names = ("anchor", "paraphrase", "unrelated")
    enc = tokenizer([PARAPHRASE_CHECK[n] for n in names], padding=True, return_tensors="pt")
    hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    emb = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    sims = {n: float(emb[0] @ emb[i]) for i, n in enumerate(names) if i}
    return {"kind": "paraphrase", **PARAPHRASE_CHECK, "cosine": sims, "passed": sims["paraphrase"] > sims["unrelated"]}


def sanity_check(folder: Path, family: str, check: dict[str, Any] | None, lm: PreTrainedModel | None = None) -> dict:
    """Run the configured sanity check of genuine pretrained weights on a materialised folder (float32), refusing
    weights that fail it; the result goes into the manifest (``{"kind": "none"}`` when no check is configured)."""
    if not check or check.get("kind", "none") == "none":
        return {"kind": "none"}
    entry = family_entry(family)
    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if check["kind"] == "continuation":
        if lm is None:
            lm_cls = entry.lm_cls_for(model_type)
            if lm_cls is None:
                raise AcquisitionError(f"family {family!r} has no causal LM: use check kind 'paraphrase' or 'none'")
            lm = lm_cls.from_pretrained(folder, dtype=torch.float32, use_safetensors=True).eval()
        result = {"kind": "continuation", **continuation_check(lm, tokenizer, check)}
    elif check["kind"] == "paraphrase":
        model_cls = entry.model_cls_for(model_type)
        model = model_cls.from_pretrained(folder, dtype=torch.float32, use_safetensors=True).eval()
        result = paraphrase_check(model, tokenizer)
    else:
        raise AcquisitionError(f"unknown sanity check {check['kind']!r}; expected continuation, paraphrase or none")
    if not result["passed"]:
        raise AcquisitionError(
            f"{folder}: the pretrained weights fail their sanity check, so they are not the genuine model: {result}"
        )
    return result
