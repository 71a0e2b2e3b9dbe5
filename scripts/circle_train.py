"""Snakemake entry: train one (variant, hidden dim, seed) of the circle experiment and roll it out (Fig. 3)."""

import time

from san.circle import Variant, run_circle
from san.circle_results import describe_variables
from san.device import resolve_device, resolve_dtype, set_threads
from san.jobs import job_log
from san.storage import write_netcdf

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    run = snakemake.params.run
    w = snakemake.wildcards
    variant, hidden_dim, seed = Variant.from_config(run["variant"]), int(w.hidden_dim), int(w.seed)
    device = resolve_device(snakemake.params.device)
    data, model, train, rollout = run["data"], run["model"], run["train"], run["rollout"]
    start = time.perf_counter()
    ds = run_circle(
        variant,
        hidden_dim,
        seed,
        n_points=data["n_points"],
        radius=data["radius"],
        n_heads=model["n_heads"],
        init_std=model["init_std"],
        mlp_ratio=model.get("mlp_ratio", 1.0),
        ln_eps=model["ln_eps"],
        epochs=train["epochs"],
        batch_size=train["batch_size"],
        lr=train["lr"],
        train_dtype=resolve_dtype(train["dtype"]),
        steps=rollout["steps"],
        rollout_dtype=resolve_dtype(rollout["dtype"]),
        device=device,
    )
    seconds = time.perf_counter() - start
    dist = ds["token_distance"].values
    log.info(
        "%s d=%d seed=%d on %s in %.2f s: loss %.3g -> %.3g; token distance %.3g (step 0) -> %.3g (step %d)",
        w.circle_variant,
        hidden_dim,
        seed,
        device,
        seconds,
        float(ds["init_loss"]),
        float(ds["final_loss"]),
        dist[0],
        dist[-1],
        len(dist) - 1,
    )
    ds = describe_variables(ds, data["n_points"], data["radius"])
    write_netcdf(
        ds,
        snakemake.output[0],
        {**run, "hidden_dim": hidden_dim},
        seed=seed,
        variant=w.circle_variant,
        device=str(device),
        train_seconds=seconds,
    )
