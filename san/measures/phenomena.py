"""Per-layer measures of what pretraining does to the residual stream: massive activations, high-norm tokens and the
spectral compression of the token matrix, each with one exact definition.

The literature defines these loosely and differently across papers; here each is one formula on one layer's token
matrix ``X`` (``T`` tokens x ``d`` dimensions, the residual stream of :mod:`san.rank_collapse.experiment`), computed in
float64 per sequence or image:

- Sun, Chen, Kolter & Liu (COLM 2024, "Massive activations in large language models", Sec. 2): a massive activation
  is one whose magnitude is far above the median magnitude of its layer's hidden state (about 1,000 times and above
  100 in their criterion). :func:`massive_activation` records the largest magnitude over the median magnitude, and
  the token and dimension that carry it.
- Darcet, Oquab, Mairal & Bojanowski (ICLR 2024, "Vision transformers need registers", Sec. 2, Fig. 3): a few
  high-norm tokens, far above the bulk of the token-norm distribution. :func:`norm_ratios` records the largest token
  norm over the median token norm.
- Queipo-de-Llano, Arroyo, Barbero, Dong, Bronstein, LeCun & Shwartz-Ziv (2025, arXiv:2510.06477, "Attention sinks
  and compression valleys in LLMs are two sides of the same coin"): the first (BOS) token's norm ``M = ||x_0||^2``
  bounds ``sigma_1^2 >= M + alpha R`` (their Theorem 1), so a massive first token makes ``X`` nearly rank one in the
  spectral sense: the anisotropy ``p_1 = sigma_1^2 / ||X||_F^2`` rises and the matrix-based entropy
  ``H(X) = -sum_j p_j log p_j`` with ``p_j = sigma_j^2 / ||X||_F^2`` falls (their Corollary 2). :func:`norm_ratios`
  records the first token's norm over the median token norm, :func:`spectrum_measures` ``p_1`` and ``H(X)``,
  normalised by its largest value ``log min(T, d)``.
- Dong, Cordonnier & Loukas (ICML 2021): one massive token makes ``X`` close to ``e_0 x_0^T``, low rank but not the
  token-uniform ``1 x^T`` of rank collapse; :func:`residual_without_massive` is the paper's relative residual over
  the tokens whose norm is at most a factor above the median token norm.

Image encoders also record, per image and patch, the mean cosine similarity of the patch's layer-0 token with its
4-neighbours on the patch grid (:func:`patch_neighbour_similarity`): Darcet et al.'s high-norm tokens appear in
patches that are redundant with their neighbours (their Fig. 5a).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from san.core.storage import Variable
from san.measures.residual import relative_residual

_SUN = "Sun, Chen, Kolter & Liu 2024, Massive activations in large language models (COLM 2024, arXiv:2402.17762)"
_DARCET = "Darcet, Oquab, Mairal & Bojanowski 2024, Vision transformers need registers (ICLR 2024, arXiv:2309.16588)"
_QUEIPO = (
    "Queipo-de-Llano, Arroyo, Barbero, Dong, Bronstein, LeCun & Shwartz-Ziv 2025, Attention sinks and compression "
    "valleys in LLMs are two sides of the same coin (arXiv:2510.06477)"
)
_DONG = "Dong, Cordonnier & Loukas 2021, Attention is not all you need (ICML 2021, arXiv:2103.03404)"
_LAYER = (
    "X: one sequence's (image's) token matrix at the layer, T tokens x d dimensions; layer 0 is the input of the "
    "first block, layer l the output of block l (no final norm); float64"
)

#: the measures of every layer and sequence (or image), in the order :func:`layer_phenomena` returns them, with
#: their definitions, formulas and the papers they follow (netCDF attributes ``description``, ``formula``,
#: ``references``)
PHENOMENA = {
    "massive_ratio": Variable(
        "largest activation magnitude over the median activation magnitude",
        "1",
        f"the massive-activation measure of Sun et al. 2024 (Sec. 2: a massive activation is far above the median "
        f"magnitude of its layer's hidden state); {_LAYER}",
        "max_{t,j} |X_tj| / median_{t,j} |X_tj|",
        _SUN,
    ),
    "massive_token": Variable(
        "token position of the largest activation magnitude",
        "1",
        f"t of argmax_{{t,j}} |X_tj| (the first in row-major order on a tie); {_LAYER}",
        "argmax_t max_j |X_tj|",
        _SUN,
    ),
    "massive_dim": Variable(
        "dimension of the largest activation magnitude",
        "1",
        f"j of argmax_{{t,j}} |X_tj| (the first in row-major order on a tie); {_LAYER}",
        "argmax_j max_t |X_tj|",
        _SUN,
    ),
    "token_norm_ratio": Variable(
        "largest token norm over the median token norm",
        "1",
        f"the high-norm token of Darcet et al. 2024 (Sec. 2, Fig. 3), Euclidean norms of the rows of X; {_LAYER}",
        "max_t ||x_t||_2 / median_t ||x_t||_2",
        _DARCET,
    ),
    "first_token_norm_ratio": Variable(
        "first token's norm over the median token norm",
        "1",
        f"the BOS norm spike of Queipo-de-Llano et al. 2025 (Fig. 1; M = ||x_0||^2 in their Theorem 1), the first "
        f"token being a decoder's start token or an encoder's class token; {_LAYER}",
        "||x_0||_2 / median_t ||x_t||_2",
        _QUEIPO,
    ),
    "sigma1_share": Variable(
        "share of the token matrix's energy in its first singular value",
        "1",
        f"the anisotropy p_1 of Queipo-de-Llano et al. 2025 (Corollary 2: p_1 >= (c + alpha) / (c + 1), c = M / R); "
        f"1 for a rank-one X; s_i the singular values of X (not centred), s_i^2 the eigenvalues of the smaller Gram "
        f"matrix; {_LAYER}",
        "s_1^2 / sum_i s_i^2",
        _QUEIPO,
    ),
    "matrix_entropy": Variable(
        "normalised matrix-based entropy of the token matrix",
        "1",
        f"Queipo-de-Llano et al. 2025's matrix-based entropy H(X) = -sum_j p_j log p_j, p_j = s_j^2 / ||X||_F^2 "
        f"(the von Neumann entropy of the trace-normalised Gram matrix X X^T, X not centred; their Corollary 2 "
        f"bounds it), divided by its largest value log min(T, d): 0 for a rank-one X, 1 for a flat spectrum; "
        f"0 log 0 = 0; natural logarithms; the s_j^2 are the eigenvalues of the smaller Gram matrix (X X^T or "
        f"X^T X), resolved to about 1e-15 ||X||_F^2; {_LAYER}",
        "-sum_j p_j ln p_j / ln min(T, d), p_j = s_j^2 / sum_i s_i^2",
        _QUEIPO,
    ),
    "residual_ratio_no_massive": Variable(
        "relative residual ||res(X')||_{1,inf} / ||X'||_{1,inf} without the massive tokens",
        "1",
        f"Dong et al. 2021's relative residual (res(X') = X' - 1 mean_tokens(X')) over the tokens X' whose norm is "
        f"at most massive_token_factor (the job's config key, stored in the file's config attribute) times the "
        f"median token norm of X; equal to residual_ratio where no token exceeds it; {_LAYER}",
        "||res(X')||_{1,inf} / ||X'||_{1,inf}, X' = {x_t : ||x_t||_2 <= factor median_s ||x_s||_2}",
        _DONG,
    ),
}

#: the patch-grid measure of image encoders (per weights, image and token)
PATCH_NEIGHBOUR_SIMILARITY = Variable(
    "mean cosine similarity of a patch's layer-0 token with its 4-neighbours",
    "1",
    "for each patch token of the layer-0 state (the embedding output, the input of the first block, of the first "
    "variant analysed: every variant shares it), the mean over its 2 to 4 neighbours on the patch grid (up, down, "
    "left, right; row-major patches) of the cosine similarity of the two tokens: Darcet et al. 2024's redundant "
    "patches (Fig. 5a); NaN at the tokens that are no patch (class, distillation, registers); float64",
    "mean_{q in N4(p)} <x_p, x_q> / (||x_p||_2 ||x_q||_2)",
    _DARCET,
)


def median(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The median along ``dim`` of a CPU tensor, the mean of the two middle values of an even count (numpy's
    selection, several times faster than a sort; torch's own median is the lower one)."""
    return torch.from_numpy(np.median(x.numpy(), axis=dim))


def massive_activation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sun et al.'s massive activation of token matrices ``x`` ``(..., T, d)``: the largest magnitude over the median
    magnitude, and the token and dimension of the largest magnitude (int64), each of shape ``(...)``."""
    flat = x.abs().flatten(-2)
    top, where = flat.max(dim=-1)
    return top / median(flat), where // x.shape[-1], where % x.shape[-1]


def norm_ratios(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest token norm and the first token's norm, each over the median token norm of ``x`` ``(..., T, d)``
    (Darcet et al.'s high-norm token, Queipo-de-Llano et al.'s BOS norm)."""
    norms = torch.linalg.vector_norm(x, dim=-1)
    mid = median(norms)
    return norms.amax(dim=-1) / mid, norms[..., 0] / mid


def spectrum_measures(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``sigma_1^2 / ||X||_F^2`` and the matrix-based entropy ``-sum_j p_j log p_j / log min(T, d)`` with ``p_j =
    sigma_j^2 / ||X||_F^2`` of token matrices ``x`` ``(..., T, d)`` (Queipo-de-Llano et al. 2025, Corollary 2). The
    ``sigma_j^2`` are the eigenvalues of the smaller Gram matrix (``X X^T`` or ``X^T X``, ``min(T, d)`` of them; the
    round-off's negative ones set to 0): the matrix-based entropy's own definition, and several times faster than
    the singular values."""
    gram = x.mT @ x if x.shape[-2] > x.shape[-1] else x @ x.mT
    energy = torch.linalg.eigvalsh(gram).flip(-1).clamp(min=0)
    p = energy / energy.sum(dim=-1, keepdim=True)
    entropy = -torch.special.xlogy(p, p).sum(dim=-1)
    return p[..., 0], entropy / np.log(min(x.shape[-2], x.shape[-1]))


def residual_without_massive(x: torch.Tensor, factor: float, whole: torch.Tensor) -> torch.Tensor:
    """Dong et al.'s relative residual of each sequence of ``x`` ``(sequences, T, d)`` over its tokens whose norm is
    at most ``factor`` times its median token norm; ``whole`` (the relative residual of all tokens, ``(sequences,)``)
    where no token exceeds it, so the two agree to the bit there."""
    norms = torch.linalg.vector_norm(x, dim=-1)
    kept = norms <= factor * median(norms)[..., None]
    out = whole.clone()
    for i in torch.nonzero(~kept.all(dim=-1)).flatten().tolist():
        out[i] = relative_residual(x[i, kept[i]])
    return out


def layer_phenomena(states: Sequence[torch.Tensor], factor: float, whole: torch.Tensor | None = None) -> np.ndarray:
    """The measures of :data:`PHENOMENA` for every state ``(sequences, T, d)`` of a residual stream: array
    ``(measures, layers + 1, sequences)`` in float64 (the token and dimension indices as whole numbers). ``whole``
    ``(layers + 1, sequences)`` is the relative residual of all tokens when already computed (else computed here)."""
    out = []
    for i, h in enumerate(states):
        h = h.detach().to("cpu", torch.float64)
        full = relative_residual(h) if whole is None else whole[i].to(torch.float64)
        ratio, token, dim = massive_activation(h)
        values = (ratio, token.double(), dim.double(), *norm_ratios(h), *spectrum_measures(h),
                  residual_without_massive(h, factor, full))  # fmt: skip
        out.append(torch.stack(values))
    return torch.stack(out, dim=1).numpy()


def patch_neighbour_similarity(patches: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Mean cosine similarity of each patch token with its 4-neighbours on the patch grid: ``patches`` ``(images,
    rows * columns, d)`` in row-major order -> ``(images, rows * columns)`` in float64 (Darcet et al.'s redundancy)."""
    rows, cols = grid
    if patches.shape[-2] != rows * cols:
        raise ValueError(f"{patches.shape[-2]} patch tokens do not fill a {rows} x {cols} grid")
    unit = torch.nn.functional.normalize(patches.to("cpu", torch.float64), dim=-1)
    unit = unit.reshape(-1, rows, cols, patches.shape[-1])
    total = torch.zeros(unit.shape[:3], dtype=torch.float64)
    count = torch.zeros(unit.shape[1:3], dtype=torch.float64)
    vertical = (unit[:, 1:] * unit[:, :-1]).sum(dim=-1)  # each patch with the one below it
    horizontal = (unit[:, :, 1:] * unit[:, :, :-1]).sum(dim=-1)  # each patch with the one right of it
    total[:, 1:] += vertical
    total[:, :-1] += vertical
    total[:, :, 1:] += horizontal
    total[:, :, :-1] += horizontal
    count[1:] += 1
    count[:-1] += 1
    count[:, 1:] += 1
    count[:, :-1] += 1
    return (total / count).reshape(-1, rows * cols)
