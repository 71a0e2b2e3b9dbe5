"""Snakemake entry: train one seed's offline series and save its checkpoints as model folders
(san.rank_collapse.series.train)."""

import torch

from san.core.jobs import job_log
from san.core.text import pydoc_documents
from san.rank_collapse.series.train import train

with job_log(snakemake.log[0]) as log:
    torch.set_num_threads(snakemake.threads)
    seed = int(snakemake.wildcards.seed)
    result = train(snakemake.params.settings, seed, pydoc_documents(), snakemake.output[0], log)
    log.info(
        "seed %d: %d checkpoints, loss %.4f over the last tenth of the steps, unigram baseline %.4f",
        seed, len(result["steps"]), result["final_loss"], result["unigram_loss"],
    )  # fmt: skip
