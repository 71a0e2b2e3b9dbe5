"""Figures of the propagation sweeps in the project style (:mod:`san.core.plotting`), read from the
``results/propagation/<sweep>.nc`` datasets only; panel titles and legends in words."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from san.core.plotting import DOUBLE_IN, PALETTE
from san.propagation.results import fixed_params, predicted_critical_beta
from san.propagation.spec import PARAMS


def _at_largest(ds: xr.Dataset, keep: Sequence[str]) -> xr.Dataset:
    """Select the last (largest) value of every grid dimension not in ``keep`` (and not layer/seed); a dimension of
    ``keep`` that the sweep fixed instead of sweeping comes back with its one fixed value, so every panel layout
    works for any grid of the config."""
    fixed = {**PARAMS, **fixed_params(ds)}
    missing = {d: [fixed[d]] for d in keep if d not in ds.dims}
    ds = ds.expand_dims(missing) if missing else ds
    sel = {d: ds[d].values[-1] for d in ds.dims if d not in (*keep, "layer", "seed")}
    return ds.sel(sel)


NORM_WORDS = {"none": "no normalisation", "post_ln": "post-LN", "pre_ln": "pre-LN", "rmsnorm": "pre-RMSNorm"}
"""Each normalisation (:data:`san.propagation.spec.NORMS`) in words, for panel titles and legends."""
MASK_WORDS = {
    "full": "complete",
    "causal": "causal",
    "sliding": r"sliding window $|i-j| \leq w$",
    "sliding_causal": r"one-directional window $0 \leq i-j \leq w$",
}
"""Each attention mask (:data:`san.propagation.spec.MASKS`) in words."""
RESIDUAL_WORDS = {"pure": "pure attention", "skip": "skip connection", "inv_sqrt_depth": r"branch $1/\sqrt{L}$"}
"""The default residual scalings in words (a config's own scaling keeps its name)."""
INPUT_WORDS = {"gaussian": "Gaussian input", "isometric": "isometric input", "prose": "prose input"}


def _words(table: dict[str, str], value: object) -> str:
    return table.get(str(value), str(value).replace("_", " "))


def _grid(rows: int, cols: int, aspect: float = 0.75) -> tuple[plt.Figure, np.ndarray]:
    """A figure of ``rows`` x ``cols`` panels spanning the page, laid out to fit its canvas."""
    width = DOUBLE_IN
    height = min(9.0, 0.9 + rows * aspect * width / max(cols, 2))
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False, layout="constrained")
    return fig, axes


def _band(ax: plt.Axes, x: np.ndarray, da: xr.DataArray, style: dict, label: str) -> None:
    """Mean over seeds as a line with markers, the seeds' min-max as a band (nothing where there is one seed)."""
    mean = da.mean("seed") if "seed" in da.dims else da
    ax.plot(x, mean, label=label, ms=3.5, lw=1.2, **style)
    if "seed" in da.dims and da.sizes["seed"] > 1:
        ax.fill_between(x, da.min("seed"), da.max("seed"), color=style.get("color"), alpha=0.18, lw=0)


def _style(i: int) -> dict:
    return {"color": PALETTE[i % len(PALETTE)], "marker": "osD^v<>p"[i % 8], "ls": ("-", "--", "-.", ":")[i % 4]}


def _depth_axis(ax: plt.Axes, layers: np.ndarray, log: bool) -> None:
    """Depth on the x axis: log scale with the layer numbers as ticks (1, 2, 5, 10, 20, 50...) where ``log``."""
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(layers.min(), layers.max())
    ax.set_xlabel("layer $l$")


def plot_depth(ds: xr.Dataset) -> plt.Figure:
    """Token cosine against depth, a panel per residual scaling (rows) x normalisation (columns), a colour per
    :math:`\\beta`, at the largest width and sequence length; the seeds' range as bands; dashed: the Giorlandino &
    Goldt recursion (post-LN) in the same colour."""
    sub = _at_largest(ds, ("residual", "norm", "beta"))
    residuals, norms = list(sub["residual"].values), list(sub["norm"].values)
    fig, axes = _grid(len(residuals), len(norms), aspect=0.6)
    layers = sub["layer"].values
    for (i, res), (j, norm) in ((a, b) for a in enumerate(residuals) for b in enumerate(norms)):
        ax = axes[i, j]
        for k, beta in enumerate(sub["beta"].values):
            style = _style(k)
            point = sub.sel(residual=res, norm=norm, beta=beta)
            _band(ax, layers, point["cosine"], style, rf"simulation, $\beta = {beta:g}$")
            curve = point["theory_cosine"]
            if np.isfinite(curve).any():
                ax.plot(layers, curve, ls="--", color=style["color"], lw=1, label=rf"recursion, $\beta = {beta:g}$")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"{_words(RESIDUAL_WORDS, res)}, {_words(NORM_WORDS, norm)}")
        _depth_axis(ax, layers, log=False)
        ax.set_ylabel("mean token cosine")
    size = ", ".join(f"{k} {ds[k].values[-1]}" for k in ("width", "seq_len") if k in ds.dims)
    size = size.replace("seq_len", "sequence length $T$").replace("width", "width $d$")
    fig.suptitle(f"Token cosine against depth ({size})")
    _legend(fig, axes)
    return fig


def _legend(fig: plt.Figure, axes: np.ndarray, ncol: int = 4) -> None:
    """One legend below the panels with every label once."""
    entries: dict[str, object] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=min(ncol, len(entries)),
               frameon=False)  # fmt: skip


def plot_qk_variance(ds: xr.Dataset) -> plt.Figure:
    """Last-layer cosine and attention participation against :math:`\\beta` (log x), a colour per sequence length
    :math:`T`: simulation (mean, min-max over seeds), dashed the recursion at the same finite :math:`T`, dotted the
    infinite-:math:`T` recursion; the vertical line is the infinite-:math:`T` critical :math:`\\beta^*` at this
    depth (largest :math:`T`)."""
    depth = int(ds.sizes["layer"] - 1)
    if "seq_len" not in ds.dims:
        ds = ds.expand_dims(seq_len=[int({**PARAMS, **fixed_params(ds)}["seq_len"])])
    last = ds.isel(layer=-1)
    fig, axes = _grid(1, 2, aspect=0.7)
    axes = axes[0]
    betas = ds.beta.values
    for ax, var, curves in (
        (axes[0], "cosine", ("finite_cosine", "theory_cosine")),
        (axes[1], "attention_overlap", ("finite_recursion_overlap", "recursion_overlap")),
    ):
        for k, seq_len in enumerate(ds.seq_len.values):
            style = _style(k)
            _band(ax, betas, last[var].sel(seq_len=seq_len), {**style, "ls": "-"}, f"simulation, $T = {seq_len}$")
            for curve, ls, what in zip(curves, ("--", ":"), ("recursion at this $T$", r"recursion, $T \to \infty$"),
                                       strict=True):  # fmt: skip
                if curve in last:
                    ax.plot(betas, last[curve].sel(seq_len=seq_len), ls=ls, color=style["color"], lw=1,
                            label=f"{what}" + (f", $T = {seq_len}$" if ls == "--" else ""))  # fmt: skip
        ax.set_xscale("log")
        ax.set_xticks(betas, [f"{b:g}" for b in betas])
        ax.minorticks_off()
        ax.set_xlabel(r"query-key scale $\beta$")
    crit = predicted_critical_beta(ds.isel(seq_len=-1))
    if np.isfinite(crit):
        for ax in axes:
            ax.axvline(crit, color="black", lw=0.8, ls="-.", label=r"critical $\beta^*$ ($T \to \infty$)")
    axes[0].set_ylabel(f"mean token cosine at layer {depth}")
    axes[1].set_ylabel(rf"$\frac{{1}}{{T}}\sum_{{i,j}} A_{{ij}}^2$ at layer {depth}")
    axes[0].set_title("token cosine")
    axes[1].set_title("attention participation")
    _legend(fig, axes[None, :], ncol=2)
    return fig


def plot_masks(ds: xr.Dataset) -> plt.Figure:
    """Wu et al.'s Fig. 2 at random init: against depth on log-log axes, a colour, marker and line style per mask
    (complete, causal, sliding, one-directional sliding), a column per normalisation; top row the token spread
    :math:`\\mu(X) = \\|X - \\mathbf{1}\\bar{x}^\\top\\|_F` as the paper defines it (absolute: it also falls when the
    token norms shrink), bottom row the scale-free relative residual
    :math:`\\|res(X_l)\\|_{1,\\infty}/\\|X_l\\|_{1,\\infty}` (falls only when the tokens become equal); the seeds'
    min-max as bands; a column per input kind too where the sweep varies it."""
    inputs = list(ds["input"].values) if "input" in ds.dims else [None]
    sub = _at_largest(ds.isel(layer=slice(1, None)), ("mask", "norm") + (("input",) if inputs[0] is not None else ()))
    norms, masks = list(sub["norm"].values), list(sub["mask"].values)
    quantities = [(v, label) for v, label in (
        ("mu", r"token spread $\mu(X_l)$"),
        ("relative_residual", "relative residual"),
    ) if v in sub]  # fmt: skip
    columns = [(n, i) for i in inputs for n in norms]
    fig, axes = _grid(len(quantities), len(columns), aspect=0.75)
    layers = sub["layer"].values
    for r, (var, label) in enumerate(quantities):
        for c, (norm, kind) in enumerate(columns):
            ax = axes[r, c]
            point = sub.sel(norm=norm, **({"input": kind} if kind is not None else {}))
            for k, mask in enumerate(masks):
                _band(ax, layers, point[var].sel(mask=mask), _style(k), _words(MASK_WORDS, mask))
            ax.set_yscale("log")
            _depth_axis(ax, layers, log=True)
            title = _words(NORM_WORDS, norm) + (f"\n{_words(INPUT_WORDS, kind)}" if kind is not None else "")
            ax.set_title(title, fontsize="small")
            ax.set_ylabel(label if c == 0 else "")
            if c:
                ax.sharey(axes[r, 0])
                ax.tick_params(labelleft=False)
            else:
                ax.yaxis.label.set_fontsize("small")
    fig.suptitle("Attention masks and LayerNorm at initialisation (pure attention): top "
                 r"$\mu(X_l) = \|X_l - \mathbf{1}\bar{x}_l^\top\|_F$, bottom "
                 r"$\|res(X_l)\|_{1,\infty} / \|X_l\|_{1,\infty}$", fontsize="small")  # fmt: skip
    _legend(fig, axes)
    return fig


def plot_sequence_length(ds: xr.Dataset) -> plt.Figure:
    """Stable rank after the last layer against :math:`T`, :math:`A` versus :math:`A - \\mathbf{1}\\mathbf{1}^\\top/T`,
    a panel per residual x norm (Mind the Gap); the seeds' min-max as bands."""
    last = _at_largest(ds.isel(layer=-1), ("seq_len", "centred", "residual", "norm"))
    residuals, norms = list(last["residual"].values), list(last["norm"].values)
    fig, axes = _grid(len(residuals), len(norms), aspect=0.7)
    seq = last["seq_len"].values
    for (i, res), (j, norm) in ((a, b) for a in enumerate(residuals) for b in enumerate(norms)):
        ax = axes[i, j]
        for k, (centred, what) in enumerate(((0, "$A$"), (1, r"$A - \mathbf{1}\mathbf{1}^\top/T$"))):
            _band(ax, seq, last["stable_rank"].sel(residual=res, norm=norm, centred=centred), _style(k), what)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length $T$")
        ax.set_ylabel("stable rank")
        ax.set_title(f"{_words(RESIDUAL_WORDS, res)}, {_words(NORM_WORDS, norm)}")
    fig.suptitle(f"Stable rank after {int(ds.sizes['layer'] - 1)} layers ($d = T$)")
    _legend(fig, axes)
    return fig
