"""Snakemake entry: materialise one model's weights into its folder (see san.models.store)."""

from san.core.jobs import job_log
from san.models.store import materialise

with job_log(snakemake.log[0]) as log:
    spec = snakemake.params.model
    pretrained = snakemake.input.get("pretrained")
    manifest = materialise(
        spec["name"], spec["family"], spec["weights"], spec["source"], snakemake.output[0], pretrained
    )
    log.info("materialised %s/%s: %s", spec["name"], spec["weights"], manifest)
