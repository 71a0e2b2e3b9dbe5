"""Architecture variants of the paper's Sec. 4 / Fig. 2 as per-instance overrides of transformers layers.

Variants: ``SAN`` (no skip connection around attention, no MLP block), ``SAN+MLP`` (no skip around attention,
MLP block without its skip), ``SAN+skip`` (attention with its skip, no MLP block) and ``transformer`` (unchanged).

Post-norm blocks (BERT, RoBERTa, MPNet, ALBERT, XLNet) compute ``h = N(x + Attn(x))``, ``y = N(h + MLP(h))``; a
variant drops the ``x +`` / ``h +`` terms or the MLP sub-block, keeping every LayerNorm. Pre-norm blocks (GPT-2,
Llama, Qwen2, Qwen3, Mistral, Phi-3, Granite, ModernBERT) compute ``h = x + Attn(N1(x))``, ``y = h + MLP(N2(h))``, so
the variants are

- ``SAN``: ``Attn(N1(x))`` (no MLP),
- ``SAN+MLP``: ``MLP(N2(Attn(N1(x))))`` (no skips),
- ``SAN+skip``: ``x + Attn(N1(x))`` (no MLP),
- ``transformer``: unchanged.

Every norm and every multiplier inside a residual branch belongs to the branch and stays with it: the paper's SAN is
"attention layers only" (Sec. 2), and a branch's norms are part of its attention (or MLP) layer as trained.
Gemma-2's and Gemma-3's blocks also normalise each sub-block's output before the sum ("sandwich" norm:
``h = x + Na(Attn(N1(x)))``, ``y = h + Nm(MLP(N2(h)))``); their variants keep those norms: ``SAN`` is
``Na(Attn(N1(x)))``, ``SAN+MLP`` is ``Nm(MLP(N2(Na(Attn(N1(x))))))``, ``SAN+skip`` is ``x + Na(Attn(N1(x)))``.
OLMo-2 has only the norms after each sub-block (``h = x + Na(Attn(x))``): its ``SAN`` is ``Na(Attn(x))``, with no norm
before attention, as trained. Granite multiplies each branch by ``residual_multiplier`` ``m`` before the add
(``h = x + m Attn(N1(x))``); the multiplier stays on the branch in every variant (``SAN`` is ``m Attn(N1(x))``; a
hook on the attention module alone would miss it). Q/K norms (Qwen3, Gemma-3, OLMo-2), logit soft-caps (Gemma-2),
attention multipliers (Granite) and embedding scales sit inside the attention module or before the first block and
are never touched.

Mixture-of-experts blocks (Mixtral, Qwen2/Qwen3-MoE, OLMoE, gpt-oss, Phi-MoE, Granite-MoE with its multiplier,
DeepSeek-V3) are pre-norm blocks whose MLP is the expert layer module the family's parts name: the router, the chosen
experts, shared experts and their gates run as the model runs them, on whatever the variant feeds the MLP (in
SAN+MLP the router routes ``N2(Attn(N1(x)))``); gpt-oss's expert layer returns ``(output, router_scores)``, of which
the block uses the output, as transformers' does. A layer that the config makes dense holds a dense MLP under the
same name.

Parallel blocks (Phi-1/2 on one shared norm, GPT-NeoX when its config's ``use_parallel_residual`` is true) compute
``y = x + Attn(N1(x)) + MLP(N2(x))``. ``SAN`` and ``SAN+skip`` are as above; ``SAN+MLP`` feeds the attention output
to the MLP, ``MLP(N2(Attn(N1(x))))``, as in the paper's SAN+MLP where every path of the network passes through
attention: the parallel MLP reading ``x`` would be a (non-linear) path around attention, a skip connection by another
name. The variants of a parallel and a sequential GPT-NeoX are therefore the same; only the unmodified transformer
differs.

Masks are never touched: a decoder's SAN is a causal SAN, and the sliding-window layers of Gemma-2/3, Mistral, Qwen2
and Phi-3 and ModernBERT's local layers keep the window their config gives them (at the default 128 tokens Gemma-3's
512-token window covers the whole causal prefix, so both kinds of its layers attend alike). Grouped key/value heads
stay grouped, fused projections (Phi-3's ``qkv_proj`` and ``gate_up_proj``, GPT-NeoX's ``query_key_value``,
ModernBERT's ``Wqkv``) stay fused: a variant changes only how a block combines its branches. The final norm of a
pre-norm model is outside the blocks and is never applied to the measured residual stream (see
:mod:`san.rank_collapse.experiment`); residual dropouts are identities in evaluation and are not applied.

The encoder stacks of T5, mT5 and UMT5 are pre-norm blocks of two sub-layers, each adding its output to the stream
(``h = x + Attn(N1(x))``, ``y = h + MLP(N2(h))`` with RMSNorms): a variant overrides the sub-layers, not the block,
whose forward passes the relative position bias from the first block to the others (T5, mT5; UMT5's blocks have one
each). The bias belongs to attention and stays in every variant, as does the unscaled attention (no ``1/sqrt(d)``).
BART's encoder stack is post-norm, BERT's block with BART's names (``self_attn_layer_norm``, ``fc1``/``fc2``,
``final_layer_norm``): its variants are the post-norm ones.

The transformers layer objects stay in place (transformers 5 records hidden states and attentions with hooks on
them); only bound methods of individual module *instances* are overridden, and :func:`restore` removes them again.
ALBERT's paper ablation replaced the two FFN linear maps by identities, which leaves ``LayerNorm(gelu(x) + x)``;
``albert_no_mlp="remove"`` drops the FFN block and its residual instead.
"""

from __future__ import annotations

import inspect
import operator
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from transformers import PreTrainedModel

from san.models.spec import FAMILY_TABLE, VARIANTS, FamilyRow

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


# ---------------------------------------------------------------- MPNet (post-norm, relative position bias)
def _mpnet_attention_no_skip(
    self: nn.Module, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, **kwargs
):
    """MPNetAttention without the residual: ``LayerNorm(dropout(attn(h)))``."""
    out = self.attn(hidden_states, attention_mask, position_bias, output_attentions=output_attentions)
    return (self.LayerNorm(self.dropout(out[0])), *out[1:])


def _mpnet_layer_attention_only(
    self: nn.Module, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, **kwargs
):
    """MPNetLayer with the MLP block (and its residual) removed: the attention block's outputs."""
    return self.attention(
        hidden_states, attention_mask, position_bias=position_bias, output_attentions=output_attentions
    )


# ---------------------------------------------------------------- pre-norm blocks (GPT-2, Llama, Gemma, ...)
def _maybe(module: nn.Module, name: str | None, x: torch.Tensor) -> torch.Tensor:
    return x if name is None else getattr(module, name)(x)


def _first(out: torch.Tensor | tuple) -> torch.Tensor:
    """A sub-block's output tensor: gpt-oss's expert layer returns ``(output, router_scores)``, the others a
    tensor."""
    return out[0] if isinstance(out, tuple) else out


def _pre_norm_block(parts: tuple, attention_skip: bool, mlp: bool, scale: float = 1.0) -> Callable:
    """The forward of a pre-norm (or sandwich-norm, or post-sub-block-norm) block as a variant (module docstring):
    every branch is multiplied by ``scale`` (Granite's ``residual_multiplier``; 1 elsewhere); the attention receives
    every keyword the model passes to the block (mask, positions, rotary embeddings, cache flags); the MLP is the
    module the parts name, a mixture-of-experts layer whole (router, experts, shared experts and gates)."""
    norm_a, attn, post_a, norm_m, ffn, post_m = parts

    def branch(x: torch.Tensor) -> torch.Tensor:
        return x if scale == 1.0 else x * scale

    def block(self: nn.Module, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
        a, _ = getattr(self, attn)(hidden_states=_maybe(self, norm_a, hidden_states), **kwargs)
        a = branch(_maybe(self, post_a, a))
        h = hidden_states + a if attention_skip else a
        if not mlp:
            return h
        m = branch(_maybe(self, post_m, _first(getattr(self, ffn)(_maybe(self, norm_m, h)))))
        return h + m if attention_skip else m

    return block


def _gpt2_block(parts: tuple, attention_skip: bool, mlp: bool, scale: float = 1.0) -> Callable:
    """GPT2Block's forward as a variant; the model passes cache, mask and cross-attention inputs positionally."""
    inner = _pre_norm_block(parts, attention_skip, mlp, scale)

    def block(self, hidden_states, cache=None, attention_mask=None, encoder_hidden_states=None, **kwargs):
        if encoder_hidden_states is not None:
            raise ValueError("the GPT-2 variants are defined for decoder-only blocks (no cross-attention)")
        kwargs.pop("encoder_attention_mask", None)
        return inner(self, hidden_states, cache=cache, attention_mask=attention_mask, **kwargs)

    return block


def _vision_block(parts: tuple, attention_skip: bool, mlp: bool, scale: float = 1.0) -> Callable:
    """The forward of a vision transformer's pre-norm block (ViT, DeiT, DINOv2, SigLIP, CLIP) as a variant; the
    encoder passes the attention mask positionally. DINOv2's LayerScales sit in the parts' branch-output slots and
    multiply their branch in every variant."""
    inner = _pre_norm_block(parts, attention_skip, mlp, scale)

    def block(self, hidden_states, attention_mask=None, **kwargs):
        return inner(self, hidden_states, attention_mask=attention_mask, **kwargs)

    return block


# ---------------------------------------------------------------- encoder stacks of T5, mT5, UMT5
def _t5_attention_no_skip(self: nn.Module, hidden_states, attention_mask=None, position_bias=None, cache=None, **kw):
    """T5's self-attention sub-layer without ``hidden_states +``: ``dropout(Attn(N1(x)))``, with the relative position
    bias (computed by the first block, passed on to the others) and the attention weights as T5 returns them."""
    out = self.SelfAttention(
        self.layer_norm(hidden_states), mask=attention_mask, position_bias=position_bias, cache=cache, **kw
    )
    return (self.dropout(out[0]), *out[1:])


def _umt5_attention_no_skip(self: nn.Module, hidden_states, attention_mask=None, cache=None, **kw):
    """UMT5's self-attention sub-layer (a relative position bias of its own in every block) without the residual."""
    out = self.SelfAttention(self.layer_norm(hidden_states), attention_mask=attention_mask, cache=cache, **kw)
    return (self.dropout(out[0]), *out[1:])


def _t5_ff_no_skip(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    """T5's feed-forward sub-layer without ``hidden_states +``: ``dropout(MLP(N2(h)))``."""
    return self.dropout(self.DenseReluDense(self.layer_norm(hidden_states)))


def ablate_t5(model: PreTrainedModel, row: FamilyRow, attention_skip: bool, mlp: bool, albert_no_mlp: str) -> None:
    """Apply a variant to every block of a T5-like encoder stack by overriding its two sub-layers (the block's own
    forward, which passes the position bias on and clamps float16 overflows, stays): the self-attention sub-layer
    ``layer[0]`` loses its residual, the feed-forward sub-layer ``layer[-1]`` its residual or becomes the identity.
    The relative position bias belongs to attention and stays in every variant."""
    for block in operator.attrgetter(row.blocks)(model):
        attention, feed_forward = block.layer[0], block.layer[-1]
        if not attention_skip:
            own_bias = "position_bias" not in inspect.signature(type(attention).forward).parameters
            _override(attention, "forward", _umt5_attention_no_skip if own_bias else _t5_attention_no_skip)
        if not mlp:
            _override(feed_forward, "forward", _identity_chunk)
        elif not attention_skip:
            _override(feed_forward, "forward", _t5_ff_no_skip)


# ---------------------------------------------------------------- the encoder stack of BART (post-norm)
def _bart_layer(attention_skip: bool, mlp: bool) -> Callable:
    """BartEncoderLayer's forward as a variant: ``h = N1(x + Attn(x))``, ``y = N2(h + MLP(h))`` without the ``x +``
    / ``h +`` terms or the MLP sub-block; both LayerNorms stay (BERT's choice). Dropouts are identities in evaluation
    and are not applied; the float16 clamp of the layer is kept."""

    def layer(self: nn.Module, hidden_states: torch.Tensor, attention_mask=None, **kwargs) -> torch.Tensor:
        a, _ = self.self_attn(hidden_states, attention_mask=attention_mask, **kwargs)
        h = self.self_attn_layer_norm(hidden_states + a if attention_skip else a)
        if mlp:
            m = self.fc2(self.activation_fn(self.fc1(h)))
            h = self.final_layer_norm(h + m if attention_skip else m)
        if h.dtype == torch.float16 and not torch.isfinite(h).all():
            clamp = torch.finfo(h.dtype).max - 1000
            h = torch.clamp(h, min=-clamp, max=clamp)
        return h

    return layer


def ablate_bart(model: PreTrainedModel, row: FamilyRow, attention_skip: bool, mlp: bool, albert_no_mlp: str) -> None:
    """Apply a variant to every ``BartEncoderLayer`` of a BART encoder stack."""
    if attention_skip and mlp:
        return
    forward = _bart_layer(attention_skip, mlp)
    for layer in operator.attrgetter(row.blocks)(model):
        _override(layer, "forward", forward)


def branch_scale(model: PreTrainedModel, row: FamilyRow) -> float:
    """The scalar that multiplies each branch of ``model``'s blocks before the add: its config's value of the row's
    ``branch_multiplier`` key (Granite's ``residual_multiplier``), 1 for a family without one."""
    if row.branch_multiplier is None:
        return 1.0
    value = getattr(model.config, row.branch_multiplier, None)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"the model's config has no numeric {row.branch_multiplier!r} (got {value!r})")
    return float(value)


#: one method override of a post-norm layer: the sub-module (its dotted path from the layer, "" for the layer
#: itself), the method, and its replacement
Override = tuple[str, str, Callable]


def _ablate_post_norm(layers: str, attention: Override, mlp_removed: Override, mlp_no_skip: Override) -> Callable:
    """The ablation of a post-norm encoder (BERT, XLNet, MPNet), called like every entry of :data:`ABLATIONS`: in
    every layer of ``layers`` (a dotted path from the model), ``attention`` without the attention skip; without the
    MLP, ``mlp_removed``; with the MLP but without the skips, ``mlp_no_skip`` (the MLP block loses its own
    residual)."""

    def ablate(model: PreTrainedModel, row: FamilyRow, attention_skip: bool, mlp: bool, albert_no_mlp: str) -> None:
        chosen = [] if attention_skip else [attention]
        chosen += [mlp_removed] if not mlp else [] if attention_skip else [mlp_no_skip]
        for layer in operator.attrgetter(layers)(model):
            for path, method, replacement in chosen:
                _override(operator.attrgetter(path)(layer) if path else layer, method, replacement)

    return ablate


def _ablate_blocks(make: Callable[[tuple, bool, bool, float], Callable]) -> Callable[..., None]:
    """The ablation of a pre-norm model whose block forward ``make(parts, attention_skip, mlp, scale)`` builds: every
    block's forward replaced by its variant (none for the unmodified transformer)."""

    def ablate(model: PreTrainedModel, row: FamilyRow, attention_skip: bool, mlp: bool, albert_no_mlp: str) -> None:
        if attention_skip and mlp:
            return
        forward = make(row.pre_norm_parts, attention_skip, mlp, branch_scale(model, row))
        for layer in operator.attrgetter(row.blocks)(model):
            _override(layer, "forward", forward)

    return ablate


#: the ablations by the name a family's table row gives (``FamilyRow.ablation``), each called as
#: ``ablate(model, row, attention_skip, mlp, albert_no_mlp)``
ABLATIONS: dict[str, Callable[[PreTrainedModel, FamilyRow, bool, bool, str], None]] = {
    "bert": _ablate_post_norm(
        "encoder.layer",
        ("attention.output", "forward", _dense_dropout_norm_no_skip),
        ("", "feed_forward_chunk", _identity_chunk),
        ("output", "forward", _dense_dropout_norm_no_skip),
    ),
    "albert": lambda model, row, skip, mlp, albert_no_mlp: ablate_albert(model, skip, mlp, albert_no_mlp),
    "xlnet": _ablate_post_norm(
        "layer",
        ("rel_attn", "post_attention", _xlnet_post_attention_no_skip),
        ("", "ff_chunk", _identity_chunk),
        ("ff", "forward", _xlnet_ff_no_skip),
    ),
    "mpnet": _ablate_post_norm(
        "encoder.layer",  # the relative position bias is computed once by the encoder
        ("attention", "forward", _mpnet_attention_no_skip),
        ("", "forward", _mpnet_layer_attention_only),
        ("output", "forward", _dense_dropout_norm_no_skip),
    ),
    "gpt2": _ablate_blocks(_gpt2_block),
    "pre_norm": _ablate_blocks(_pre_norm_block),
    "vision": _ablate_blocks(_vision_block),
    "t5": ablate_t5,
    "bart": ablate_bart,
}


def apply_variant(model: PreTrainedModel, family: str, variant: str, albert_no_mlp: str = "identity_linears") -> None:
    """Turn ``model`` (of a registered ``family``) into ``variant`` in place (after undoing any earlier one)."""
    restore(model)
    attention_skip, mlp = variant_switches(variant)
    if family not in FAMILY_TABLE:
        raise ValueError(f"unknown family {family!r}; expected one of {sorted(FAMILY_TABLE)}")
    row = FAMILY_TABLE[family]
    ABLATIONS[row.ablation](model, row, attention_skip, mlp, albert_no_mlp)


@contextmanager
def variant(model: PreTrainedModel, family: str, name: str, albert_no_mlp: str = "identity_linears") -> Iterator:
    """Context manager: ``model`` is ``name`` inside the block and unmodified after it."""
    apply_variant(model, family, name, albert_no_mlp)
    try:
        yield model
    finally:
        restore(model)
