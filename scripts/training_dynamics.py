"""Snakemake entry: the training-dynamics figure of the offline series (rank collapse, the pretrained phenomena
and the first-token sink against the training step, seed bands)."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.rank_collapse.series.plots import training_dynamics_figure

with job_log(snakemake.log[0]) as log:
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    ds = read_netcdf(snakemake.input.data)
    save(
        training_dynamics_figure(ds, "offline series", snakemake.params.share_threshold),
        snakemake.output,
        fig_cfg["dpi"],
    )
    log.info("drew %d revisions of %d seeds", ds.sizes["revision"], ds.sizes["seed"])
