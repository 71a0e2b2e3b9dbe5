"""The registry of model families: one entry per transformers architecture the rank-collapse experiment runs.

An entry says which transformers classes build the model (config, base model, causal LM for the acquisition's
sanity check), where its blocks are (the residual stream is measured at their outputs), how its variants are made
(:mod:`san.models.ablations`) and which checkpoint weights belong to a head the base model does not load.
Adding a family is one entry here, its names in :mod:`san.rank_collapse.spec` (depth/heads/width keys, norm
placement, causal or not) and its variants' test (tests/unit/test_families.py recomputes every variant from the
weights).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import transformers
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from san.models import ablations
from san.rank_collapse.spec import ARCHITECTURE_KEYS


def _transformers_class(name: str) -> type:
    """The transformers class ``name``, imported on first use: transformers imports a model's code only when one of
    its classes is asked for, so a job that runs one family does not import the other families' modelling code
    (about 1.3 s of every job's start-up for the eight families)."""
    return getattr(transformers, name)


@dataclass(frozen=True)
class Family:
    """One model family: its transformers classes (by name, see :func:`_transformers_class`), its blocks and its
    variants."""

    #: names of the transformers config and base-model classes
    config_name: str
    model_name: str
    #: the blocks whose outputs are the residual stream, in order (a shared block appears once: ALBERT's group runs
    #: ``num_hidden_layers`` times and is measured at every run)
    layers: Callable[[nn.Module], Sequence[nn.Module]]
    #: ``ablate(model, attention_skip, mlp)``: overrides that turn the unmodified model into a variant
    ablate: Callable[..., None]
    #: prefixes of checkpoint weights outside the base model (pretraining or LM heads; not loaded, not an error)
    head_prefixes: tuple[str, ...] = ()
    #: name of the causal-LM class (decoders: the continuation sanity check of pretrained weights)
    lm_name: str | None = None
    #: whether the blocks pass hidden states as ``(tokens, sequences, width)`` (XLNet) instead of
    #: ``(sequences, tokens, width)``
    tokens_first: bool = False
    #: the base model's norm after the last block (decoders), which transformers applies to the last hidden state
    final_norm: str | None = None

    @property
    def config_cls(self) -> type[PretrainedConfig]:
        return _transformers_class(self.config_name)

    @property
    def model_cls(self) -> type[PreTrainedModel]:
        return _transformers_class(self.model_name)

    @property
    def lm_cls(self) -> type[PreTrainedModel] | None:
        return None if self.lm_name is None else _transformers_class(self.lm_name)


FAMILIES: dict[str, Family] = {
    "bert": Family("BertConfig", "BertModel", lambda m: m.encoder.layer, ablations.ablate_bert, ("cls.",)),
    "albert": Family(
        "AlbertConfig",
        "AlbertModel",
        lambda m: [g for g in m.encoder.albert_layer_groups],
        ablations.ablate_albert,
        ("predictions.", "sop_classifier."),
    ),
    "xlnet": Family(
        "XLNetConfig", "XLNetModel", lambda m: m.layer, ablations.ablate_xlnet, ("lm_loss.",), tokens_first=True
    ),
    "roberta": Family("RobertaConfig", "RobertaModel", lambda m: m.encoder.layer, ablations.ablate_bert, ("lm_head.",)),
    "mpnet": Family("MPNetConfig", "MPNetModel", lambda m: m.encoder.layer, ablations.ablate_mpnet, ("lm_head.",)),
    "gpt2": Family(
        "GPT2Config",
        "GPT2Model",
        lambda m: m.h,
        ablations.ablate_pre_norm("gpt2"),
        ("lm_head.",),
        "GPT2LMHeadModel",
        final_norm="ln_f",
    ),
    "llama": Family(
        "LlamaConfig",
        "LlamaModel",
        lambda m: m.layers,
        ablations.ablate_pre_norm("llama"),
        ("lm_head.",),
        "LlamaForCausalLM",
        final_norm="norm",
    ),
    "gemma3": Family(
        "Gemma3TextConfig",
        "Gemma3TextModel",
        lambda m: m.layers,
        ablations.ablate_pre_norm("gemma3"),
        ("lm_head.",),
        "Gemma3ForCausalLM",
        final_norm="norm",
    ),
}

if set(FAMILIES) != set(ARCHITECTURE_KEYS):  # the registry and the torch-free names stay in step
    raise ImportError(f"families {sorted(FAMILIES)} differ from spec.ARCHITECTURE_KEYS {sorted(ARCHITECTURE_KEYS)}")


def family(name: str) -> Family:
    """The registry entry of family ``name``; ValueError naming the known families otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r}; expected one of {sorted(FAMILIES)}") from None
