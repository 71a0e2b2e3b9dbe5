"""Snakemake entry: one model's page: the tidy per-layer measures (CSV beside its rank-collapse netCDF), the figure
and the Markdown page with the verdicts that apply to it."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.report.model_plots import model_figure
from san.report.model_report import measures_table, page

with job_log(snakemake.log[0]) as log:
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    model = snakemake.wildcards.model
    measures = measures_table(read_netcdf(snakemake.input.data), model)
    measures.to_csv(snakemake.output.measures, index=False, float_format="%.6g")
    verdicts = json.loads(Path(snakemake.input.verdicts).read_text())
    save(model_figure(measures, model, verdicts), snakemake.output.figure, fig_cfg["dpi"])
    page_dir = Path(snakemake.output.page).parent
    figure = Path(snakemake.output.figure[-1]).relative_to(page_dir)
    csv = Path(snakemake.output.measures)
    text = page(model, measures, verdicts, str(figure)).replace(f"`{model}.csv` beside this page", f"`{csv}`")
    Path(snakemake.output.page).write_text(text)
    log.info("%d measure rows; page %s", len(measures), snakemake.output.page)
