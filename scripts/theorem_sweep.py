"""Snakemake entry: Theorem 2.2's bound against the measured residual of pure SANs over the sweep."""

from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.theory.experiment import run
from san.theory.inputs import prose_embeddings

with job_log(snakemake.log[0]) as log:
    cfg = snakemake.params.settings
    emb = prose_embeddings(snakemake.input.model, snakemake.input.inputs, cfg["n_sequences"], cfg["tokens"])
    log.info("prose embeddings %s; sweep %s", emb.shape, {k: cfg[k] for k in ("d_qk", "scales", "layernorm")})
    ds = run(cfg, prose_embeddings=emb)
    counts = {k: int((ds["verdict"] == v).sum()) for k, v in (("respects", 1), ("undecided", 0), ("violates", -1))}
    log.info("verdicts of (sample, layer) pairs against the nominal bound: %s", counts)
    write_netcdf(ds, snakemake.output[0], cfg, seed=cfg["seed"])
