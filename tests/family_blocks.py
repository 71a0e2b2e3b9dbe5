"""Building blocks of the references that tests/unit/models/test_families.py and tests/unit/models/test_ablations.py
recompute every family's residual stream from (plain torch on the weights; no transformers submodule's forward is
called), and the tiny perturbed float64 models they are checked on."""

import math

import torch

from san.models.families import FAMILIES

F32 = torch.float32  # what transformers computes in float32 even in a float64 model
TOL = {"rtol": 1e-10, "atol": 1e-10}


def perturbed_model(family, config):
    """A tiny float64 model of ``family`` with architecture ``config`` whose every parameter is perturbed (zero
    biases, unit or zero norm weights would let a wrong formula pass)."""
    config = FAMILIES[family].config_cls(**config, attn_implementation="eager", experts_implementation="eager")
    torch.manual_seed(0)
    model = FAMILIES[family].model_cls(config).double().eval()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def identity(x):
    return x


def lin(x, mod):
    y = x @ mod.weight.T
    return y if mod.bias is None else y + mod.bias


def conv1d(x, mod):
    """GPT-2's Conv1D: weight of shape (in, out)."""
    return x @ mod.weight + mod.bias


def ln(x, mod):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + mod.eps) * mod.weight
    return y if mod.bias is None else y + mod.bias


def rms_llama(x, mod):
    """``x / sqrt(mean(x^2) + eps) * weight``, the normalisation in float32."""
    xf = x.to(F32)
    return mod.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + mod.variance_epsilon)).to(x.dtype)


def rms_gemma(x, mod):
    """``x / sqrt(mean(x^2) + eps) * (1 + weight)``, all in float32."""
    xf = x.to(F32)
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + mod.eps) * (1.0 + mod.weight.to(F32))).to(x.dtype)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def heads(t, head_dim):
    """(batch, tokens, heads * head_dim) -> (batch, heads, tokens, head_dim)."""
    b, n, _ = t.shape
    return t.view(b, n, -1, head_dim).transpose(1, 2)


def attention(q, k, v, scaling, mask=None, bias=None, softmax_dtype=torch.float64, softcap=None):
    """Softmax attention of query heads ``q`` over key/value heads ``k``, ``v`` (fewer when grouped: each run of
    consecutive query heads shares one key/value head); ``mask`` (tokens, tokens) is True where a query may attend,
    ``bias`` is added to the scores, ``softcap`` caps them at ``softcap * tanh(scores / softcap)``. Returns (batch,
    tokens, heads * head_dim)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    p = torch.softmax(scores.to(softmax_dtype), dim=-1).to(q.dtype)
    b, _, n, _ = q.shape
    return (p @ v).transpose(1, 2).reshape(b, n, -1)


def causal_mask(n, window=None):
    i = torch.arange(n)
    d = i[:, None] - i[None, :]  # query position minus key position
    return (d >= 0) & (d < window) if window is not None else d >= 0


def rotary(theta, head_dim, n):
    """cos and sin of the rotary angles ``position * theta^(-2j/head_dim)`` (float32 as in transformers)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=F32) / head_dim))
    angles = torch.arange(n, dtype=F32)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().double(), angles.sin().double()


def rotate(x, cos, sin):
    """Rotary embedding, rotate-half convention: dimension j pairs with j + head_dim/2."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


#: the paper's four variants (Fig. 2), written out here rather than taken from the code under test:
#: ``(attention skip, MLP)``. SAN is the attention branch only; SAN+MLP is attention then the MLP, no skips;
#: SAN+skip is attention with its residual; transformer is the unmodified model
VARIANT_SWITCHES = {
    "SAN": (False, False),
    "SAN+MLP": (False, True),
    "SAN+skip": (True, False),
    "transformer": (True, True),
}
VARIANT_NAMES = tuple(VARIANT_SWITCHES)


def routed(x, weights, experts):
    """A mixture-of-experts layer's routed sum ``sum_e w_e(x) expert_e(x)``: ``weights`` (tokens, experts) holds each
    token's routing weight of every expert (zero for an expert not chosen); every expert runs on every token and
    the weights select (the references never gather tokens by expert, as transformers does)."""
    flat = x.reshape(-1, x.shape[-1])
    out = sum(weights[:, e, None] * expert(flat) for e, expert in enumerate(experts))
    return out.reshape(x.shape)


def top_k_weights(scores, indices, n_experts):
    """(tokens, experts): ``scores`` (tokens, k) placed at the chosen experts ``indices``, zeros elsewhere."""
    return torch.zeros(scores.shape[0], n_experts, dtype=scores.dtype).scatter(1, indices, scores)
