"""Names and config helpers of the signal-propagation study, free of torch.

Random transformer blocks at initialisation, forward only, against published theory: Noci et al. (NeurIPS 2022,
1/sqrt(L) residual branches), Giorlandino & Goldt (ICLR 2026, the post-LN correlation recursion), Wu et al.
(NeurIPS 2024, masks and LayerNorm) and Nait Saada, Naderi & Tanner (ICML 2025, "Mind the Gap", centred attention).
The one place that names the sweeps, the block options and the parameters a sweep can vary; the schema's enums, the
simulator, the figures and the claims read them from here. The workflow imports it while it parses the rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.claims import verdicts as V
from san.claims.record import Settings
from san.core.config import ConfigError
from san.models.spec import PROSE_EMBEDDING_FAMILY

#: the papers the wing's claims cite
NOCI, GG, WU = "Noci et al. 2022", "Giorlandino & Goldt 2026", "Wu et al. 2024"
NAIT_SAADA = "Nait Saada, Naderi & Tanner 2025"
#: the config section of the wing's thresholds and control settings
SECTION = "report.propagation"

#: the four sweeps of the study (config keys under ``propagation.sweeps`` and the ``{sweep}`` wildcard)
SWEEPS = ("depth", "qk_variance", "masks", "sequence_length")
#: where the normalisation sits: none; post-LN ``x <- LN(a x + b f(x))``; pre-LN ``x <- a x + b f(LN(x))``;
#: pre-RMSNorm ``x <- a x + b f(RMS(x))``. LayerNorm and RMSNorm carry no affine parameters.
NORMS = ("none", "post_ln", "pre_ln", "rmsnorm")
#: attention masks (Wu et al.'s Fig. 2): every key (complete graph); keys j <= i (causal); keys |i - j| <= window
#: (sliding, symmetric band); keys 0 <= i - j <= window (one-directional sliding window)
MASKS = ("full", "causal", "sliding", "sliding_causal")
#: input tokens: Gaussian with a set pairwise correlation; orthonormal rows scaled to norm sqrt(d) (Mind the Gap's
#: isometric input); the prose embeddings of the rank-collapse experiment (BERT's embedding output)
INPUTS = ("gaussian", "isometric", "prose")
#: the branch weight ``b = 1 / sqrt(L)`` (Noci et al.) is written as this string in a residual scaling
INV_SQRT_DEPTH = "1/sqrt(L)"
#: residual scalings by name: skip weight ``a`` and branch weight ``b`` of ``x <- a x + b f(x)``, for both the
#: attention and the MLP sub-block. With ``mlp`` false/true, ``pure`` and ``skip`` give the paper's four variants
#: (SAN, SAN+MLP, SAN+skip, transformer).
DEFAULT_RESIDUALS = {
    "pure": {"skip": 0.0, "branch": 1.0},
    "skip": {"skip": 1.0, "branch": 1.0},
    "inv_sqrt_depth": {"skip": 1.0, "branch": INV_SQRT_DEPTH},
}
#: the parameters of a simulation and their defaults; a sweep's ``grid`` varies some (each becomes a dimension of
#: the result, named after the key), its ``fixed`` sets others
PARAMS: dict[str, Any] = {
    "residual": "skip",  # a name from propagation.residuals
    "mlp": True,  # an MLP sub-block after attention
    "norm": "post_ln",  # one of NORMS
    "mask": "full",  # one of MASKS
    "window": 4,  # half-width w of the sliding mask
    "beta": 1.0,  # attention inverse temperature: logits have std beta * sqrt(log T) for unit-variance tokens
    "centred": False,  # use A - 1 1^T / T (row-wise: minus the uniform row over the allowed keys)
    "seq_len": 64,  # tokens T
    "width": 128,  # model width d (ignored for prose input: the embeddings' width)
    "width_ratio": 0.0,  # if > 0, the width is round(width_ratio * T) (Mind the Gap: d = T / gamma)
    "heads": 1,  # attention heads H (d divisible by H)
    "input": "gaussian",  # one of INPUTS
    "input_correlation": 0.2,  # pairwise correlation of the Gaussian input tokens
    "var_v": 0.2,  # value weights ~ N(0, var_v / d) (Giorlandino & Goldt's Fig. 1: 0.2)
    "var_b": 4e-4,  # value and MLP biases ~ N(0, var_b) (theirs: 4e-4)
    "var_w": 0.2,  # MLP weights ~ N(0, var_w / fan_in) (theirs: 0.2)
    "mlp_ratio": 1.0,  # MLP hidden width / d
}
#: the Monte Carlo of the finite-T softmax overlaps (``propagation.finite_size``): draws of T logit pairs, and the
#: seed of their CPU generator
FINITE_SIZE = {"draws": 1000, "seed": 0}
#: Wu et al.'s LayerNorm construction (``propagation.sweeps.masks.construction``, see ``construction.py``)
CONSTRUCTION = {"tokens": 8, "width": 8, "rest": 0.1, "perturbation": 0.1, "draws": 64, "seed": 0}
#: the normalisations of the construction: the paper's sphere normalisation, mean-centred LayerNorm, none
CONSTRUCTION_NORMS = ("sphere", "layer_norm", "none")
#: the metrics stored per layer
METRICS = ("cosine", "relative_residual", "mu", "stable_rank", "stable_rank_gram", "attention_overlap")
#: LayerNorm / RMSNorm epsilon (BERT's; float64 runs)
NORM_EPS = 1e-12


def check_sweep(
    name: str, sweep: Mapping[str, Any], residuals: Mapping[str, Any], prose_tokens: int | None = None
) -> None:
    """Cross-checks of one ``propagation.sweeps.<name>`` section that its schema cannot express (a parameter both
    swept and fixed, an unknown residual name, widths not divisible by the heads or below 1, an isometric input
    longer than wide, a prose input longer than the ``prose_tokens`` tokens of the rank-collapse input, which the
    simulator would silently cut); raises :class:`ConfigError`."""
    where = f"propagation.sweeps.{name}"
    if "construction" in sweep and name != "masks":
        raise ConfigError(f"config key '{where}.construction': only the masks sweep carries Wu et al.'s construction")
    if "depths" in sweep and name != "depth":
        raise ConfigError(f"config key '{where}.depths': only the depth sweep judges Noci et al.'s claim over depths")
    built = sweep.get("construction") or {}
    if built and (built["tokens"] < 3 or built["width"] < 3):
        raise ConfigError(
            f"config key '{where}.construction': tokens and width must be at least 3 (a rank-2 configuration of "
            f"centred tokens in the plane orthogonal to the all-ones vector), got tokens {built['tokens']}, "
            f"width {built['width']}"
        )
    both = set(sweep.get("grid", {})) & set(sweep.get("fixed", {}))
    if both:
        raise ConfigError(f"config key '{where}': {sorted(both)} are both in grid and in fixed")
    for point in grid_points(sweep):
        p = point_params(sweep, point)
        at = f" (grid point {dict(point)})" if point else ""
        if p["residual"] not in residuals:
            raise ConfigError(f"config key '{where}': residual {p['residual']!r}{at} is not one of {sorted(residuals)}")
        if p["input"] == "prose":
            if prose_tokens is not None and p["seq_len"] > prose_tokens:
                raise ConfigError(
                    f"config key '{where}': seq_len {p['seq_len']}{at} exceeds the {prose_tokens} tokens of the "
                    "prose input (text.seq_len)"
                )
            continue  # the width is the prose embeddings'
        width = p["width"] if p["width_ratio"] <= 0 else round(p["width_ratio"] * p["seq_len"])
        if width < 1:
            raise ConfigError(f"config key '{where}': width_ratio {p['width_ratio']}{at} gives width {width} < 1")
        if width % p["heads"]:
            raise ConfigError(f"config key '{where}': width {width}{at} is not divisible by heads = {p['heads']}")
        if p["input"] == "isometric" and p["seq_len"] > width:
            raise ConfigError(
                f"config key '{where}': isometric input needs seq_len <= width, got seq_len {p['seq_len']} and "
                f"width {width}{at}"
            )


def grid_points(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the swept values, in grid order (the last key varies fastest)."""
    grid = sweep.get("grid", {})
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def point_params(sweep: Mapping[str, Any], point: Mapping[str, Any]) -> dict[str, Any]:
    """All parameters of one sweep point: the defaults, then the sweep's ``fixed``, then the point's values."""
    return {**PARAMS, **sweep.get("fixed", {}), **point}


def branch_weight(branch: float | str, depth: int) -> float:
    """The branch weight ``b``: a number, or ``1/sqrt(L)`` for a model of ``depth`` layers (Noci et al.)."""
    if branch == INV_SQRT_DEPTH:
        return depth**-0.5
    return float(branch)


def uses_prose(sweep: Mapping[str, Any]) -> bool:
    """Whether a sweep needs the prose embeddings (and so the rank-collapse model and token ids)."""
    return any(point_params(sweep, p)["input"] == "prose" for p in grid_points(sweep))


def check_config(config: Mapping[str, Any], schemas: Path) -> None:
    """Cross-checks of the ``propagation`` section: every sweep (:func:`check_sweep`), and the prose model is a
    defined bert model when a sweep uses prose input; raises :class:`ConfigError` naming the key."""
    section = config["propagation"]
    prose_tokens = config.get("text", {}).get("seq_len")
    for name, sweep in section["sweeps"].items():
        check_sweep(name, sweep, section["residuals"], prose_tokens)
    if any(uses_prose(sweep) for sweep in section["sweeps"].values()):
        name, models = section["prose_model"], config.get("models", {})
        if models.get(name, {}).get("family") != PROSE_EMBEDDING_FAMILY:
            raise ConfigError(
                f"config key 'propagation.prose_model': {name!r} is not a {PROSE_EMBEDDING_FAMILY} model defined under "
                f"'models' (defined: {sorted(models)})"
            )


def check(key: str, paper: str, statement: str, form: str, source: str, **kwargs: Any) -> dict[str, Any]:
    """A scientific row of this wing (:func:`san.claims.verdicts.check`), its statement and source naming the paper;
    ``kwargs``: ``test``, ``statistic``, ``threshold``, ``wrong`` and ``detail``."""
    return V.check(key, f"{paper}: {statement}", form=form, source=f"{paper}, {source}", **kwargs)


def settings(t: Mapping[str, Any]) -> Settings:
    """The thresholds and control settings of config ``report.propagation`` (``t``), each read by its name with its
    full key (:class:`san.claims.record.Settings`: ``threshold(name, above=..., sigmas="sigmas")`` widens a
    threshold by the seed spread's standard errors, ``wrong(name, reference)`` the near-miss reference,
    ``note(name)`` the disclosure of a threshold set after a result was seen)."""
    return Settings(SECTION, t)
