# Shared helpers: config validation, per-job config slices, library dependencies and target lists.
import json
import os
from pathlib import Path

from snakemake.utils import validate

from san.config import validate_config

# Fail on a bad config before any job is scheduled, with a message naming the key; then Snakemake's own validation.
# The schema's folder itself (not workflow.source_path's cached copy of one file), so its $refs to sibling schema
# files resolve.
validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
validate(config, "../schemas/config.schema.yaml")

RESULTS = "results"
FIGURE_FORMATS = config["figures"]["formats"]


def lib(*modules):
    """Library modules a rule's script imports, as inputs: editing one reruns exactly the jobs that use it."""
    return [f"san/{m}.py" for m in ("__init__", "provenance", "storage", "device") + modules]


def figures(stem):
    """Paths of one figure in every configured format."""
    return expand(f"{RESULTS}/figures/{stem}.{{ext}}", ext=FIGURE_FORMATS)


def model_weights(model):
    """Weight sets of a model: 'init' always, 'pretrained' when the config defines a source for it."""
    spec = config["models"][model]
    return ["init"] + (["pretrained"] if spec.get("pretrained") else [])


def model_slice(wildcards):
    """The config slice that determines a model folder: family plus the chosen weights' entry."""
    spec = config["models"][wildcards.model]
    return {
        "name": wildcards.model,
        "family": spec["family"],
        "weights": wildcards.weights,
        "source": spec["init"] if wildcards.weights == "init" else spec["pretrained"],
    }


# Report captions: templates in workflow/report/ that the summary rule fills with this run's numbers.
# (relative paths: an absolute path would make a moved or copied workspace rerun the summary)
REPORT_TEMPLATES = sorted(os.path.relpath(p) for p in Path(workflow.basedir, "workflow", "report").glob("*.rst"))


def caption(name):
    """Path (relative to a rules file) of a caption written by the summary rule for ``snakemake --report``."""
    return f"../../{RESULTS}/report/captions/{name}.rst"


# Final results; each rules file appends its own targets (rule all requests them all).
TARGETS = []
