"""Snakemake entry: rank collapse and the first-token sink of every checkpoint of the offline series (Fig. 2's
measures with a revision dimension, san.rank_collapse.series.experiment), on the input sequences tokenised by the
series' own tokenizer (tokenize_inputs)."""

from pathlib import Path

from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.models.folders import recorded_family
from san.rank_collapse.series.experiment import run_series
from san.rank_collapse.series.spec import revisions

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    device = job_device(p.compute, snakemake.threads)
    names = revisions(p.series)
    series = {
        int(seed): {rev: Path(folder, rev) for rev in names}
        for seed, folder in zip(p.series["seeds"], snakemake.input.series, strict=True)
    }
    inputs = read_netcdf(snakemake.input.inputs)
    family, _ = recorded_family([f for checkpoints in series.values() for f in checkpoints.values()])
    ds = run_series(family, series, inputs, p.settings, device, log)
    log.info(
        "SAN at the last layer, mean over seeds and sequences, by step:\n%s",
        ds["residual_ratio"].sel(variant="SAN").isel(layer=-1).mean(("seed", "sample")).to_pandas().to_string(),
    )
    write_netcdf(ds, snakemake.output[0], {**p.settings, "series": p.series}, model="series", device=str(device))
