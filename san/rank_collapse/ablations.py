"""Architecture variants of the paper's Sec. 4 / Fig. 2 as per-instance overrides of transformers layers.

Variants: ``SAN`` (no skip connection around attention, no MLP block), ``SAN+MLP`` (no skip around attention,
MLP block without its skip), ``SAN+skip`` (attention with its skip, no MLP block) and ``transformer`` (unchanged).

The transformers layer objects stay in place (transformers 5 records hidden states and attentions with hooks on
them); only bound methods of individual module *instances* are overridden, and :func:`restore` removes them again.
ALBERT's paper ablation replaced the two FFN linear maps by identities, which leaves ``LayerNorm(gelu(x) + x)``;
``albert_no_mlp="remove"`` drops the FFN block and its residual instead.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from transformers import PreTrainedModel

from san.rank_collapse.spec import VARIANTS

OVERRIDDEN = ("forward", "feed_forward_chunk", "ff_chunk", "post_attention")


def variant_switches(variant: str) -> tuple[bool, bool]:
    """``(attention_skip, mlp)`` of a variant name; the MLP of a no-skip variant also loses its skip."""
    table = {"SAN": (False, False), "SAN+MLP": (False, True), "SAN+skip": (True, False), "transformer": (True, True)}
    try:
        return table[variant]
    except KeyError:
        raise ValueError(f"unknown variant {variant!r}; expected one of {list(VARIANTS)}") from None


def _override(module: nn.Module, name: str, fn: Callable) -> None:
    """Bind ``fn`` as method ``name`` of this one module instance (the class is untouched)."""
    object.__setattr__(module, name, types.MethodType(fn, module))


def restore(model: nn.Module) -> None:
    """Remove every per-instance override, returning ``model`` to the unmodified architecture."""
    for module in model.modules():
        for name in OVERRIDDEN:
            module.__dict__.pop(name, None)


# ---------------------------------------------------------------- BERT (and BERT-like, e.g. MiniLM)
def _dense_dropout_norm_no_skip(self: nn.Module, hidden_states: torch.Tensor, input_tensor: torch.Tensor):
    """``LayerNorm(dropout(dense(h)))``: BertSelfOutput / BertOutput without ``+ input_tensor``."""
    return self.LayerNorm(self.dropout(self.dense(hidden_states)))


def _identity_chunk(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return x


def ablate_bert(model: PreTrainedModel, attention_skip: bool, mlp: bool) -> None:
    """Apply a variant to every ``BertLayer`` of ``model.encoder``."""
    for layer in model.encoder.layer:
        if not attention_skip:
            _override(layer.attention.output, "forward", _dense_dropout_norm_no_skip)
        if not mlp:
            _override(layer, "feed_forward_chunk", _identity_chunk)
        elif not attention_skip:
            _override(layer.output, "forward", _dense_dropout_norm_no_skip)


# ---------------------------------------------------------------- ALBERT
def _albert_attention_no_skip(self: nn.Module, hidden_states: torch.Tensor, attention_mask=None, **kwargs):
    """AlbertAttention without the residual: ``LayerNorm(dropout(dense(softmax(QK^T/sqrt(d)) V)))``."""
    from transformers.models.albert.modeling_albert import ALL_ATTENTION_FUNCTIONS, eager_attention_forward

    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.attention_head_size)
    query = self.query(hidden_states).view(*hidden_shape).transpose(1, 2)
    key = self.key(hidden_states).view(*hidden_shape).transpose(1, 2)
    value = self.value(hidden_states).view(*hidden_shape).transpose(1, 2)
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
    attn_output, attn_weights = interface(
        self,
        query,
        key,
        value,
        attention_mask,
        dropout=0.0 if not self.training else self.attention_dropout.p,
        scaling=self.scaling,
        **kwargs,
    )
    attn_output = self.output_dropout(self.dense(attn_output.reshape(*input_shape, -1).contiguous()))
    return self.LayerNorm(attn_output), attn_weights


def _albert_ffn_identity_linears(self: nn.Module, attention_output: torch.Tensor) -> torch.Tensor:
    """The paper's ALBERT no-MLP: both FFN linear maps are identities, leaving ``activation(x)``."""
    return self.activation(attention_output)


def _albert_layer_attention_only(self: nn.Module, hidden_states, attention_mask=None, **kwargs):
    """AlbertLayer with the FFN block and its residual removed: the attention block's output."""
    attention_output, _ = self.attention(hidden_states, attention_mask, **kwargs)
    return attention_output


def _albert_layer_mlp_no_skip(self: nn.Module, hidden_states, attention_mask=None, **kwargs):
    """AlbertLayer whose FFN loses its residual: ``LayerNorm(ffn(a))``."""
    attention_output, _ = self.attention(hidden_states, attention_mask, **kwargs)
    return self.full_layer_layer_norm(self.ff_chunk(attention_output))


def ablate_albert(model: PreTrainedModel, attention_skip: bool, mlp: bool, no_mlp: str = "identity_linears") -> None:
    """Apply a variant to every (shared) ``AlbertLayer``."""
    for group in model.encoder.albert_layer_groups:
        for layer in group.albert_layers:
            if not attention_skip:
                _override(layer.attention, "forward", _albert_attention_no_skip)
            if not mlp:
                if no_mlp == "identity_linears":
                    _override(layer, "ff_chunk", _albert_ffn_identity_linears)
                elif no_mlp == "remove":
                    _override(layer, "forward", _albert_layer_attention_only)
                else:
                    raise ValueError(f"albert_no_mlp must be identity_linears or remove, not {no_mlp!r}")
            elif not attention_skip:
                _override(layer, "forward", _albert_layer_mlp_no_skip)


# ---------------------------------------------------------------- XLNet
def _xlnet_post_attention_no_skip(self: nn.Module, h, attn_vec, residual: bool = True):
    """XLNetRelativeAttention.post_attention with the residual always off."""
    return type(self).post_attention(self, h, attn_vec, residual=False)


def _xlnet_ff_no_skip(self: nn.Module, inp: torch.Tensor) -> torch.Tensor:
    """XLNetFeedForward without ``+ inp``."""
    out = self.dropout(self.layer_2(self.dropout(self.activation_function(self.layer_1(inp)))))
    return self.layer_norm(out)


def ablate_xlnet(model: PreTrainedModel, attention_skip: bool, mlp: bool) -> None:
    """Apply a variant to every ``XLNetLayer``."""
    for layer in model.layer:
        if not attention_skip:
            _override(layer.rel_attn, "post_attention", _xlnet_post_attention_no_skip)
        if not mlp:
            _override(layer, "ff_chunk", _identity_chunk)
        elif not attention_skip:
            _override(layer.ff, "forward", _xlnet_ff_no_skip)


def apply_variant(model: PreTrainedModel, family: str, variant: str, albert_no_mlp: str = "identity_linears") -> None:
    """Turn ``model`` (of ``family`` bert/albert/xlnet) into ``variant`` in place (after undoing any earlier one)."""
    restore(model)
    attention_skip, mlp = variant_switches(variant)
    if family == "bert":
        ablate_bert(model, attention_skip, mlp)
    elif family == "albert":
        ablate_albert(model, attention_skip, mlp, albert_no_mlp)
    elif family == "xlnet":
        ablate_xlnet(model, attention_skip, mlp)
    else:
        raise ValueError(f"unknown family {family!r}; expected bert, albert or xlnet")


@contextmanager
def variant(model: PreTrainedModel, family: str, name: str, albert_no_mlp: str = "identity_linears") -> Iterator:
    """Context manager: ``model`` is ``name`` inside the block and unmodified after it."""
    apply_variant(model, family, name, albert_no_mlp)
    try:
        yield model
    finally:
        restore(model)
