"""Shared figure style and output for every experiment's seaborn figures.

Figure functions only read xarray datasets (the ``.nc`` results); restyling never reruns compute. Figures are sized
for a journal page: :data:`COLUMN_IN` (one column) or :data:`DOUBLE_IN` (the full text width) wide, via
:func:`figsize`; PDFs embed TrueType fonts (``pdf.fonttype 42``), which journals and editors accept as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.text import Text  # noqa: E402

COLUMN_IN = 3.5
"""Width of a one-column figure in inches (two-column journal layouts such as ICML: 3.25-3.5 in)."""
DOUBLE_IN = 7.2
"""Width of a figure spanning both columns in inches (text width of a two-column page: 6.75-7.2 in)."""

# Fonts embedded as TrueType (42) instead of Type 3 outlines, in PDF and PostScript output.
FONT_RC = {"pdf.fonttype": 42, "ps.fonttype": 42}


def apply_style(figures: dict[str, Any]) -> None:
    """Apply the config's seaborn style and context, and embed TrueType fonts in PDF/PS output."""
    sns.set_theme(style=figures.get("style", "whitegrid"), context=figures.get("context", "paper"), palette=PALETTE)
    matplotlib.rcParams.update(FONT_RC)


def figsize(
    n_cols: int = 1, n_rows: int = 1, *, width: float | None = None, aspect: float = 0.8, max_height: float = 9.0
) -> tuple[float, float]:
    """Figure size ``(width, height)`` in inches for a grid of ``n_rows`` x ``n_cols`` panels.

    ``width`` defaults to :data:`COLUMN_IN` for a single panel and :data:`DOUBLE_IN` for several; each panel is
    ``aspect`` times as high as it is wide, and the height is capped at ``max_height`` (a journal page).
    """
    if width is None:
        width = COLUMN_IN if n_cols == 1 else DOUBLE_IN
    height = min(max_height, n_rows * aspect * width / n_cols)
    return width, height


def save(fig: plt.Figure, paths: Sequence[str | Path], dpi: int = 150) -> None:
    """Write ``fig`` to every path (format from the suffix) and close it."""
    for path in paths:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def legend_below(fig: plt.Figure, ax: plt.Axes, ncol: int | None = None) -> None:
    """Replace ``ax``'s legend (if any) by one figure legend centred below the panels, in ``ncol`` columns (default:
    one row), so that the figure keeps its page width; the figure is laid out (constrained) to hold it."""
    legend = ax.get_legend()
    if legend is None:
        return
    handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
    legend.remove()
    fig.set_layout_engine("constrained")
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol or len(labels), frameon=False)


def legend_of_panels(
    fig: plt.Figure, axes: Sequence[plt.Axes], ncol: int = 4, where: str = "lower", **kwargs: Any
) -> None:
    """One figure legend below (``where="lower"``) or above (``"upper"``) the panels holding every label of ``axes``
    once (their own legends removed); the figure is laid out (constrained) to hold it."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if not label.startswith("_"):
                entries.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.set_layout_engine("constrained")
    fig.legend(list(entries.values()), list(entries), loc=f"outside {where} center", ncol=min(ncol, len(entries)) or 1,
               frameon=False, **kwargs)  # fmt: skip


def variant_palette(variants: Sequence[str]) -> dict[str, str]:
    """Seaborn's ``palette`` for a ``hue`` of variants: each its fixed colour (:data:`VARIANT_STYLE`)."""
    return {str(v): variant_style(v)["color"] for v in variants}


OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}
"""Okabe & Ito's colour-blind-safe palette (Color Universal Design), the project's one palette."""
PALETTE = [OKABE_ITO[c] for c in ("blue", "orange", "bluish green", "vermillion", "reddish purple", "sky blue",
                                  "yellow", "black")]  # fmt: skip
"""The palette in the order figures take colours for categories without a fixed colour."""
VARIANT_STYLE = {
    "SAN": {"color": OKABE_ITO["blue"], "marker": "o", "ls": "-", "ms": 6.5, "zorder": 2},
    "SAN+MLP": {"color": OKABE_ITO["orange"], "marker": "s", "ls": "--", "ms": 3.0, "zorder": 3},
    "SAN+skip": {"color": OKABE_ITO["bluish green"], "marker": "^", "ls": "-.", "ms": 7.0, "zorder": 2},
    "transformer": {"color": OKABE_ITO["vermillion"], "marker": "D", "ls": ":", "ms": 3.0, "zorder": 3},
}
"""Colour, marker, marker size and line style of each of the paper's four variants, the same in every figure. The
variants whose curves often coincide (SAN and SAN+MLP; SAN+skip and transformer) pair a large marker drawn below
with a small one drawn above and distinct dash patterns, so both stay visible where one lies on the other."""


def variant_style(variant: str) -> dict[str, str]:
    """Matplotlib line keywords of ``variant`` (:data:`VARIANT_STYLE`; an unknown name: grey, solid)."""
    return VARIANT_STYLE.get(str(variant), {"color": "0.4", "marker": "x", "ls": "-", "ms": 4.0, "zorder": 2})


RAW_FACET = re.compile(r"^\s*[A-Za-z_][\w.]* = \S")
"""A facet title of the form ``name = value`` (seaborn's default), which names a data variable, not a quantity."""


def _text_artists(fig: plt.Figure) -> list[Text]:
    """Every text artist of ``fig`` that is drawn: titles, labels, legends, annotations, and the tick labels of the
    ticks inside their axis's view (matplotlib keeps the others, undrawn)."""
    undrawn: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            drawn = {id(t) for tick in axis._update_ticks() for t in (tick.label1, tick.label2)} if ax.axison else set()
            undrawn |= {id(t) for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                        for t in (tick.label1, tick.label2) if id(t) not in drawn}  # fmt: skip
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in undrawn]
    return [t for t in texts if t.axes is None or t.axes.get_visible()]


def _titles(fig: plt.Figure) -> list[Text]:
    """The titles of ``fig``: its own texts (suptitle) and each axes' titles and annotations (seaborn's margin
    titles)."""
    out = list(fig.texts)
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax._right_title, *ax.texts]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def figure_problems(fig: plt.Figure) -> list[str]:
    """What a reader would stumble on in ``fig``, each as a sentence (empty: none): a text artist outside the figure's
    canvas (clipped when saved without cropping, or a label wider than the figure), two legend entries of one
    legend with the same label, an axes with data but no x or y label (its own, or the figure's shared
    ``supxlabel``/``supylabel``), a title of the form ``name = value`` (a raw identifier, seaborn's default facet
    title), an unrendered pseudo-TeX label (``_{`` or ``^{`` outside ``$...$``)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox.padded(1.0)
    problems = []
    for text in _text_artists(fig):
        extent = text.get_window_extent(renderer)
        inside = box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1
        if extent.width and not inside:
            problems.append(f"text {text.get_text()!r} lies outside the figure")
        plain = re.sub(r"\$[^$]*\$", "", text.get_text())
        if re.search(r"[_^]\{|\\[a-z]+", plain):
            problems.append(f"text {text.get_text()!r} holds TeX outside mathtext ($...$)")
    problems += _overlaps(fig, renderer)
    legends = [a.get_legend() for a in fig.axes if a.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        labels = [t.get_text() for t in legend.get_texts()]
        doubled = sorted({lab for lab in labels if labels.count(lab) > 1})
        if doubled:
            problems.append(f"legend entries repeated: {doubled}")
    shared_x = fig._supxlabel is not None and fig._supxlabel.get_text()
    shared_y = fig._supylabel is not None and fig._supylabel.get_text()
    for ax in fig.axes:
        if not ax.get_visible() or not ax.has_data() or not ax.axison:
            continue
        title = " ".join(t.get_text() for t in (ax.title, ax._left_title, ax._right_title))
        name = title.strip() or "an untitled panel"
        if ax.xaxis.get_visible() and not ax.get_xlabel() and not shared_x and _has_tick_labels(ax.xaxis):
            problems.append(f"{name}: x axis without a label")
        if ax.yaxis.get_visible() and not ax.get_ylabel() and not shared_y and _has_tick_labels(ax.yaxis):
            problems.append(f"{name}: y axis without a label")
    for text in _titles(fig):
        if RAW_FACET.match(text.get_text()):
            problems.append(f"facet title {text.get_text()!r} names a raw identifier (name = value)")
    return problems


def _overlaps(fig: plt.Figure, renderer: Any) -> list[str]:
    """Labels, titles and legend texts drawn over one another (a label wider than its panel running into the next
    panel's, a legend over a shared axis label); tick labels are left to matplotlib's own spacing."""
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in axis.get_ticklabels(which="both")}
    texts = [t for t in _text_artists(fig) if id(t) not in ticks]
    boxes = [(t, t.get_window_extent(renderer).shrunk(0.98, 0.9)) for t in texts]
    out = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            if box_a.width and box_b.width and box_a.overlaps(box_b):
                out.append(f"texts {a.get_text()!r} and {b.get_text()!r} overlap")
    return out


def _has_tick_labels(axis: Any) -> bool:
    """Whether ``axis`` prints tick labels (an axis of a shared grid without them needs no label of its own)."""
    return any(t.get_visible() and t.get_text() for t in axis.get_ticklabels())


def check_figure(fig: plt.Figure, name: str) -> None:
    """Raise ``ValueError`` naming figure ``name`` and its :func:`figure_problems`, if any."""
    problems = figure_problems(fig)
    if problems:
        raise ValueError(f"figure {name}: " + "; ".join(problems))
