"""Snakemake entry: train one (variant, hidden dim) of the circle experiment for a group of seeds (Fig. 3)."""

from san.circle.experiment import run
from san.circle.spec import chunk_seeds
from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import write_netcdf

with job_log(snakemake.log[0]) as log:
    w, settings = snakemake.wildcards, snakemake.params.run
    hidden_dim, seeds = int(w.hidden_dim), chunk_seeds(w.seeds)
    device = job_device(snakemake.params.compute, snakemake.threads, train=True)
    ds = run(settings, hidden_dim, seeds, device)
    for seed in seeds:
        dist = ds["token_distance"].sel(seed=seed).values
        log.info(
            "%s d=%d seed=%d on %s in %.2f CPU s: loss %.3g -> %.3g; token distance %.3g (step 0) -> %.3g (step %d)",
            w.circle_variant,
            hidden_dim,
            seed,
            device,
            ds.attrs["train_seconds"][seed],
            float(ds["init_loss"].sel(seed=seed)),
            float(ds["final_loss"].sel(seed=seed)),
            dist[0],
            dist[-1],
            len(dist) - 1,
        )
    write_netcdf(
        ds, snakemake.output[0], {**settings, "hidden_dim": hidden_dim}, variant=w.circle_variant, device=str(device)
    )
