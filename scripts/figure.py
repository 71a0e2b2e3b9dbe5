"""Snakemake entry of every figure rule: draws each figure the rule outputs (named by its output key, or the rule's
name for a rule of one figure) from the figure registry (san.figures), checks it and writes it in every format."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, figure_problems, save
from san.core.storage import read_netcdf
from san.figures import FIGURES, draw, figure_names


def _read(paths, kind, models):
    """One input of the rule as the figure reads it: a dataset, a list of them, or a mapping by model."""
    if kind == "one":
        return read_netcdf(paths)
    datasets = [read_netcdf(p) for p in paths]
    return dict(zip(models, datasets, strict=True)) if kind == "by_model" else datasets


with job_log(snakemake.log[0]) as log:
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    names = figure_names(snakemake.rule, list(snakemake.output.keys()))
    params = dict(snakemake.params.items())
    for name in names:
        figure = FIGURES[name]
        models = params.get("models", [])
        inputs = {k: _read(snakemake.input[k], kind, models) for k, kind in figure.inputs.items()}
        fig = draw(name, inputs, params, dict(snakemake.wildcards.items()))
        # what a reader would stumble on (overlapping text, unlabelled axes), in the log: the figure is still
        # written, as the data of another run may crowd a layout that fits this project's; text beyond the canvas is
        # not among them, as save() crops the file to its content
        for problem in figure_problems(fig):
            if not problem.endswith("lies outside the figure"):
                log.warning("figure %s: %s", name, problem)
        paths = snakemake.output[name] if len(names) > 1 or snakemake.output.keys() else snakemake.output
        save(fig, list(paths), fig_cfg["dpi"])
        log.info("figure %s: %s", name, ", ".join(map(str, paths)))
