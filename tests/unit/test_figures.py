"""Every registered figure (san.figures) drawn from small data passes the figure check, and the check catches what a
reader stumbles on: a clipped label, a repeated legend entry, an unlabelled axis, a raw facet title, pseudo-TeX."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import xarray as xr

from san.core.plotting import apply_style, figure_problems
from san.figures import FIGURES, draw, gallery

DATA = Path(__file__).parents[1] / "data" / "figures"
CASES = json.loads((DATA / "cases.json").read_text())


def _load(spec: object) -> object:
    """A case's input: a file name, a list of them or a mapping of model -> file name, read as datasets."""
    if isinstance(spec, str):
        return xr.load_dataset(DATA / spec)
    if isinstance(spec, list):
        return [xr.load_dataset(DATA / s) for s in spec]
    return {k: xr.load_dataset(DATA / s) for k, s in spec.items()}


def test_every_registered_figure_has_small_data():
    assert sorted(CASES) == sorted(FIGURES), "tests/data/figures/make.py writes a case per registered figure"


def test_the_gallery_is_the_registrys_and_every_figure_has_its_caption():
    assert list(gallery()) == [n for n, f in FIGURES.items() if f.gallery]
    templates = Path(__file__).parents[2] / "workflow" / "report"
    assert all((templates / f"{f.caption or n}.rst").is_file() for n, f in FIGURES.items())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_registered_figure_passes_the_figure_check(name):
    apply_style({})
    case = CASES[name]
    inputs = {k: _load(v) for k, v in case["inputs"].items()}
    fig = draw(name, inputs, case.get("params", {}), case.get("wildcards", {}))
    try:
        assert figure_problems(fig) == []
    finally:
        plt.close(fig)


def _panel(xlabel: str = "layer $l$", ylabel: str = "relative residual") -> tuple[plt.Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    ax.plot([1, 2, 3], [1, 0.5, 0.2], label="SAN")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig, ax


@pytest.mark.slow
def test_a_well_made_panel_passes_and_a_clipped_label_fails():
    fig, ax = _panel()
    ax.legend()
    assert figure_problems(fig) == []
    ax.set_xlabel("a label far wider than the three-inch panel it labels, running off the figure's canvas")
    assert any("outside the figure" in p for p in figure_problems(fig))
    plt.close(fig)


@pytest.mark.slow
def test_repeated_legend_entries_unlabelled_axes_raw_facets_and_pseudo_tex_fail():
    fig, ax = _panel(xlabel="", ylabel="||res(X_l)||_{1,inf}")
    ax.plot([1, 2, 3], [1, 0.6, 0.3], label="SAN")
    ax.legend()
    ax.set_title("norm = none")
    problems = " | ".join(figure_problems(fig))
    assert "legend entries repeated: ['SAN']" in problems
    assert "x axis without a label" in problems
    assert "facet title 'norm = none'" in problems
    assert "TeX outside mathtext" in problems
    plt.close(fig)
