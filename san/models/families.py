"""The registry of model families: the transformers classes and blocks of each row of the family table.

:mod:`san.models.spec` holds the facts of every family as data (torch-free); this module turns a row into the
objects a job uses: its transformers classes (imported on first use), its blocks (the residual stream is measured at
their outputs) and its norm and head names. Adding a family is one row of the table plus its ablation code.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import transformers
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from san.models.spec import FAMILY_TABLE, FamilyRow


def _transformers_class(name: str, config_module: str | None = None) -> type:
    """The transformers class ``name``, imported on first use: transformers imports a model's code only when one of
    its classes is asked for, so a job that runs one family does not import the other families' modelling code. A
    class transformers does not export (BART's ``BartEncoder``) is taken from the modelling module beside the row's
    config module."""
    if hasattr(transformers, name) or config_module is None:
        return getattr(transformers, name)
    folder, file = config_module.removesuffix(".py").rsplit("/", 1)
    module = importlib.import_module(
        f"transformers.{folder.replace('/', '.')}.{file.replace('configuration_', 'modeling_', 1)}"
    )
    return getattr(module, name)


@dataclass(frozen=True)
class Family:
    """One model family: its table row and the transformers classes and blocks it names."""

    row: FamilyRow

    @property
    def config_cls(self) -> type[PretrainedConfig]:
        return _transformers_class(self.row.config_class)

    @property
    def model_cls(self) -> type[PreTrainedModel]:
        return _transformers_class(self.row.model_class, self.row.config_module)

    @property
    def lm_cls(self) -> type[PreTrainedModel] | None:
        return None if self.row.lm_class is None else _transformers_class(self.row.lm_class)

    def model_cls_for(self, model_type: str | None) -> type[PreTrainedModel]:
        """The base-model class of a checkpoint of ``model_type`` recognised as this family: the row's own class
        for its config class's ``model_type``, else transformers' base model of that ``model_type`` (a class whose
        blocks compute this family's block, e.g. OLMo's for the Llama family)."""
        if model_type is None or model_type == self.config_cls.model_type:
            return self.model_cls
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

        return _transformers_class(MODEL_MAPPING_NAMES[model_type])

    def lm_cls_for(self, model_type: str | None) -> type[PreTrainedModel] | None:
        """The causal-LM class of a checkpoint of ``model_type`` recognised as this family (None: an encoder)."""
        if self.lm_cls is None or model_type is None or model_type == self.config_cls.model_type:
            return self.lm_cls
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        return _transformers_class(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])

    def layers(self, model: nn.Module) -> Sequence[nn.Module]:
        """The blocks of ``model`` whose outputs are the residual stream, in order."""
        return operator.attrgetter(self.row.blocks)(model)

    @property
    def head_prefixes(self) -> tuple[str, ...]:
        return self.row.head_prefixes

    @property
    def tokens_first(self) -> bool:
        return self.row.tokens_first

    @property
    def final_norm(self) -> str | None:
        return self.row.final_norm

    def parallel_residual(self, config: PretrainedConfig) -> bool:
        """Whether the blocks of a model with ``config`` add attention and MLP in parallel: the row's
        ``parallel_residual``, which is the family's fact or the config key that states it per checkpoint."""
        flag = self.row.parallel_residual
        return bool(getattr(config, flag)) if isinstance(flag, str) else flag

    @property
    def forward_kwargs(self) -> dict:
        """Keyword arguments of every forward pass on full-length sequences (e.g. no memories)."""
        return dict(self.row.forward_kwargs)


FAMILIES: dict[str, Family] = {name: Family(row) for name, row in FAMILY_TABLE.items()}


def family(name: str) -> Family:
    """The registry entry of family ``name``; ValueError naming the known families otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r}; expected one of {sorted(FAMILIES)}") from None


def of_model(model: PreTrainedModel) -> Family | None:
    """The registry entry whose config class built ``model`` (None for a model of no registered family)."""
    name = type(model.config).__name__
    return next((entry for entry in FAMILIES.values() if entry.row.config_class == name), None)
