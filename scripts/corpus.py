"""Snakemake entry: collect the prose documents of the configured text source."""

import json

from san.core.jobs import job_log
from san.core.text import PROSE_FILE, PROSE_SHA256, hub_dataset_origin, pydoc_documents, wiki_bio_documents

with job_log(snakemake.log[0]) as log:
    text = snakemake.params.text
    origin = {"source": text["source"]}
    if text["source"] == "pydoc":
        docs = pydoc_documents()
        origin |= {"dataset": f"san/data/{PROSE_FILE.name}", "sha256": PROSE_SHA256}
    else:
        wb = text["wiki_bio"]
        docs = wiki_bio_documents(wb["dataset"], wb["split"], wb["revision"])
        origin |= hub_dataset_origin(wb["dataset"], wb["revision"])
        log.info("dataset %s@%s: commit %s", wb["dataset"], wb["revision"], origin["commit"])
    log.info("source %s: %d documents, %d paragraphs", text["source"], len(docs), sum(map(len, docs)))
    with open(snakemake.output[0], "w") as fh:
        json.dump({**origin, "documents": docs}, fh)
