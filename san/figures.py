"""The workflow's figures, registered once (torch-free): what each draws from, how, its caption and its place.

One entry per figure, as :mod:`san.experiments` registers the wings' tables: its draw function (``module:function``,
imported only when the figure is drawn, so the workflow parses without matplotlib), the inputs of its rule that it
reads (each a result dataset, a list of them, or a mapping by model), the rule params it takes besides, its caption
template (``workflow/report/<caption>.rst``, filled by the summary rule), its category in ``snakemake --report`` and,
for the figures the README shows, the gallery's alt text. The one figure script (``scripts/figure.py``) draws every
figure of a rule from this table, the rules take their report category and caption from it
(``figure_report`` in ``workflow/rules/common.smk``), and ``python -m san.report.readme`` writes the README's
gallery block and publishes the gallery's figures in its order. Every draw function returns a
:class:`matplotlib.figure.Figure` in the project's style (:mod:`san.core.plotting`), so the figure check
(:func:`san.core.plotting.figure_problems`) runs on each one before it is saved.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIG2 = "Rank collapse (Fig. 2)"
FIG3 = "Circle (Fig. 3)"
FIG4 = "Path effectiveness (Fig. 4)"
PRODUCTS = "Chained attention along paths (appendix)"
THEOREM = "Theorem 2.2 vs its bound"
PROPAGATION = "Signal propagation (beyond the paper)"
VISION = "Rank collapse in image encoders (beyond the paper)"
SERIES = "Rank collapse along training"
PHENOMENA = "Pretrained phenomena (beyond the paper)"


@dataclass(frozen=True)
class Figure:
    """One figure: ``draw`` (``module:function``) called with the rule's inputs named in ``inputs``, in their order
    (``"one"``: a dataset; ``"list"``: a list of datasets; ``"by_model"``: datasets keyed by the rule's
    ``params.models``), then as keyword arguments the rule params named in ``params`` (``"a.b"``: ``params.a["b"]``,
    passed as ``b``), the wildcards named in ``wildcards`` and ``fixed``."""

    draw: str
    category: str
    inputs: Mapping[str, str] = field(default_factory=lambda: {"data": "one"})
    params: tuple[str, ...] = ()
    wildcards: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    caption: str | None = None
    subcategory: str | None = None
    gallery: str | None = None

    def resolve(self) -> Callable[..., Any]:
        """The draw function (imports its module)."""
        module, function = self.draw.split(":")
        return getattr(importlib.import_module(module), function)


FIGURES: dict[str, Figure] = {
    "rank_collapse_overview": Figure(
        "san.rank_collapse.plots:rank_collapse_overview_figure",
        FIG2,
        {"data": "by_model"},
        gallery="Fig. 2: the relative residual per layer of every model, four variants each, encoders and decoders "
        "at initialisation and pretrained",
    ),
    "rank_collapse_pretrained": Figure(
        "san.rank_collapse.plots:pretrained_collapse_figure",
        FIG2,
        {"data": "by_model"},
        gallery="Pretrained models against relative depth, three token-uniformity measures",
    ),
    "rank_collapse_model": Figure(
        "san.rank_collapse.plots:rank_collapse_figure",
        FIG2,
        wildcards=("model",),
        subcategory="{model}",
    ),
    "rank_collapse_model_log": Figure(
        "san.rank_collapse.plots:rank_collapse_figure",
        FIG2,
        wildcards=("model",),
        fixed={"log_scale": True},
        subcategory="{model}",
    ),
    "attention_products_model": Figure(
        "san.rank_collapse.plots:attention_products_figure",
        PRODUCTS,
        wildcards=("model",),
        gallery="Chained attention along paths: the rank-1 residual of products of attention matrices by path length",
    ),
    "circle": Figure(
        "san.circle.plots:trajectory_figure",
        FIG3,
        params=("plot.seed", "plot.axis_limit"),
        gallery="Fig. 3: two tokens on the circle under a recurrently applied layer",
    ),
    "circle_distance": Figure("san.circle.plots:distance_figure", FIG3, params=("collapse_threshold",)),
    "circle_loss": Figure("san.circle.plots:loss_figure", FIG3),
    "path_effectiveness": Figure(
        "san.paths.plots:path_effectiveness_figure",
        FIG4,
        {"data": "list"},
        params=("titles",),
        gallery="Fig. 4: accuracy of sampled path sets by path length",
    ),
    "path_length_distribution": Figure("san.paths.plots:path_length_distribution_figure", FIG4),
    "path_decomposition": Figure(
        "san.paths.plots:path_decomposition_figure",
        FIG4,
        {"exact": "list", "sampled": "list"},
        params=("titles",),
        gallery="The exact path-length decomposition of every trained SAN",
    ),
    "theorem_bound": Figure(
        "san.theory.plots:plot_theorem",
        THEOREM,
        gallery="The measured residual against the theorem's bound",
    ),
    "propagation_depth": Figure("san.propagation.plots:plot_depth", PROPAGATION, {"depth": "one"}),
    "propagation_qk_variance": Figure("san.propagation.plots:plot_qk_variance", PROPAGATION, {"qk_variance": "one"}),
    "propagation_masks": Figure(
        "san.propagation.plots:plot_masks",
        PROPAGATION,
        {"masks": "one"},
        gallery="Masks and LayerNorm at initialisation (Wu et al., Fig. 2): the token spread and the relative "
        "residual against depth",
    ),
    "propagation_sequence_length": Figure(
        "san.propagation.plots:plot_sequence_length",
        PROPAGATION,
        {"sequence_length": "one"},
    ),
    "vision": Figure(
        "san.rank_collapse.vision.plots:vision_figure",
        VISION,
        {"data": "by_model"},
        gallery="Image encoders: the patch tokens' high-frequency share per layer, four variants each",
    ),
    "training_dynamics": Figure(
        "san.rank_collapse.series.plots:training_dynamics_figure",
        SERIES,
        params=("share_threshold",),
        fixed={"model": "the offline series (a small decoder trained here)"},
        gallery="Rank collapse along training: the relative residual and the phenomena against the training step",
    ),
    "training_dynamics_model": Figure(
        "san.rank_collapse.series.plots:training_dynamics_figure",
        SERIES,
        params=("share_threshold",),
        wildcards=("model",),
    ),
    "phenomena": Figure(
        "san.phenomena.plots:phenomena_figure",
        PHENOMENA,
        gallery="The pretrained phenomena: each judged claim's verdict on each model, with its statistic",
    ),
}
"""Every figure of the workflow by name (its file stem in ``results/figures/``); the gallery's in README order."""


def gallery() -> dict[str, str]:
    """The README gallery: figure name -> alt text, in the registry's order."""
    return {name: f.gallery for name, f in FIGURES.items() if f.gallery}


def gallery_markdown(folder: str = "docs/figures") -> str:
    """The README gallery block: one image per gallery figure, in the registry's order, its alt text the registry's."""
    return "".join(f"![{alt}]({folder}/{name}.png)\n" for name, alt in gallery().items())


def gallery_source(figures: Path, name: str) -> Path:
    """The PNG of gallery figure ``name`` in a run's ``figures`` folder: ``<name>.png``, or for a figure drawn per
    model (a ``model`` wildcard) the first model's ``<name>_<model>.png`` (a missing file is returned as named)."""
    if "model" not in FIGURES[name].wildcards or (figures / f"{name}.png").is_file():
        return figures / f"{name}.png"
    found = sorted(p for p in figures.glob(f"{name}_*.png") if not p.stem.endswith("_log"))
    return found[0] if found else figures / f"{name}_<model>.png"


def caption_name(name: str) -> str:
    """The caption template of figure ``name`` (``workflow/report/<it>.rst``)."""
    return FIGURES[name].caption or name


def figure_names(rule: str, outputs: Sequence[str] = ()) -> list[str]:
    """The registered figures a figure rule draws: its output keys, or, for a rule of one figure, the figure its rule
    is named after; a workflow that imports this one as a module renames the rule with a prefix (``san_vision``), so
    the longest registered name the rule's name ends with is taken."""
    if outputs:
        return list(outputs)
    if rule in FIGURES:
        return [rule]
    ends = [n for n in FIGURES if rule.endswith("_" + n)]
    if not ends:
        raise KeyError(f"rule {rule} draws no registered figure (san.figures.FIGURES)")
    return [max(ends, key=len)]


def draw(name: str, inputs: Mapping[str, Any], params: Mapping[str, Any], wildcards: Mapping[str, str]) -> Any:
    """Draw figure ``name`` from its rule's datasets (``inputs``, already read), params and wildcards."""
    figure = FIGURES[name]
    args = [inputs[k] for k in figure.inputs]
    kwargs = {key.split(".")[-1]: _dotted(params, key) for key in figure.params}
    kwargs |= {k: wildcards[k] for k in figure.wildcards}
    return figure.resolve()(*args, **kwargs, **figure.fixed)


def _dotted(params: Mapping[str, Any], key: str) -> Any:
    """``params["a"]["b"]`` for ``key`` ``"a.b"``."""
    value: Any = params
    for part in key.split("."):
        value = value[part]
    return value
