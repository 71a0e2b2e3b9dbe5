# Shared helpers: config validation, per-job config slices, library dependencies, resources and target lists.
# Parsing the workflow imports only torch-free modules (san.core.config and the experiments' `spec` modules).
import os
from pathlib import Path

import yaml
from snakemake.utils import validate

from san.experiments import check_config
from san.models.spec import explicit_architecture, init_entry, weight_sets
from san.rank_collapse.spec import model_priorities

SCHEMAS = Path(workflow.basedir) / "workflow" / "schemas"

# Fail on a bad config before any job is scheduled, with a message naming the key: the schema (defaults filled in)
# and every experiment's cross-checks, once; then Snakemake's own validation against the same schema. (The schema's
# folder itself, not workflow.source_path's cached copy of one file, so its $refs to sibling schema files resolve.)
CHECKED = check_config(config, SCHEMAS)
validate(config, "../schemas/config.schema.yaml")

# glibc's malloc hands freed blocks above its mmap threshold back to the kernel and page-faults them in again on the
# next forward pass; jobs inherit these settings and keep such blocks in the heap instead (less time per forward
# pass, the same memory peaks). A value already in the environment wins.
os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 * 2**20))
os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(16 * 2**30))

RESULTS = "results"
FIGURE_FORMATS = config["figures"]["formats"]
# Memory and wall time of every rule, in one table (a cluster profile submits what the rules declare).
RESOURCES = yaml.safe_load(Path(workflow.basedir, "workflow", "resources.yaml").read_text())


def resources(rule, **extra):
    """The resources of ``rule`` from workflow/resources.yaml, plus ``extra`` (e.g. a GPU request)."""
    return {**RESOURCES[rule], **extra}


# Scheduling priority of each analysed model's jobs, in (0, 1): the costliest models first, below the
# path-effectiveness chains (san.rank_collapse.spec.model_priorities).
MODEL_PRIORITY = model_priorities(config)


def model_priority(w):
    """Priority of a job of model ``w.model``; acquiring pretrained weights comes before every analysis."""
    first = 0.5 if w.get("weights") == "pretrained" and w.model in MODEL_PRIORITY else 0.0
    return MODEL_PRIORITY.get(w.model, 0.0) + first


def model_resources(rule, **extra):
    """:func:`resources` of a job that loads one model, whose ``models.<name>.mem_mb`` (when set) replaces the
    table's memory."""
    default = RESOURCES[rule]["mem_mb"]
    return resources(rule, mem_mb=lambda w: config["models"][w.model].get("mem_mb", default), **extra)


# Modules every script imports: the job log, result storage and its provenance.
CORE = ("__init__", "core/__init__", "core/jobs", "core/storage", "core/provenance", "core/config")


# Library modules that import others: lib() adds what they import, transitively (tests/unit/test_structure.py
# keeps each entry equal to the module's own imports outside san/core).
LIB_DEPENDS = {
    "models/acquire": (
        "models/folders",
        "models/families",
        "models/gguf",
        "models/checks",
        "models/hub",
        "models/recognise",
    ),
    "models/recognise": ("models/folders", "models/spec"),
    "models/hub": ("models/folders",),
    "models/gguf": ("models/folders", "models/families"),
    "models/checks": ("models/folders", "models/families", "models/spec"),
    "models/families": ("models/spec",),
    "models/ablations": ("models/spec",),
    "rank_collapse/spec": ("models/spec",),
    "theory/spec": ("models/spec",),
    "propagation/spec": ("models/spec",),
    "paths/plots": ("paths/spec", "paths/table"),
    "paths/table": ("paths/spec",),
}


def lib(*modules):
    """Library modules a rule's script imports (paths below san/ without .py), as inputs: editing one reruns
    exactly the jobs that use it. A module's package __init__ and the modules it imports (LIB_DEPENDS) are added
    with it."""
    todo, closed = list(modules), []
    while todo:
        name = todo.pop(0)
        if name not in closed:
            closed.append(name)
            todo += LIB_DEPENDS.get(name, ())
    packages = {f"{m.split('/')[0]}/__init__" for m in closed if "/" in m}
    return [f"san/{m}.py" for m in dict.fromkeys(CORE + tuple(sorted(packages)) + tuple(closed))]


def figures(stem):
    """Paths of one figure in every configured format."""
    return expand(f"{RESULTS}/figures/{stem}.{{ext}}", ext=FIGURE_FORMATS)


# Models of the rank-collapse experiment (and of every experiment that reads its inputs).
def model_weights(model):
    """Weight sets of a model: 'init' unless `init: null`, 'pretrained' when the config defines a source for it."""
    return weight_sets(config["models"][model])


def model_slice(wildcards):
    """The config slice that determines a model folder: the family (None: recognised from the model's config.json)
    plus the chosen weights' entry."""
    spec = config["models"][wildcards.model]
    return {
        "name": wildcards.model,
        "family": spec.get("family"),
        "weights": wildcards.weights,
        "source": init_entry(spec) if wildcards.weights == "init" else spec["pretrained"],
    }


def init_origin(wildcards):
    """Input function: the pretrained folder whose config.json architecture the init weights take (an entry
    without `init.config`), else nothing."""
    spec = config["models"][wildcards.model]
    if wildcards.weights == "init" and explicit_architecture(spec) is None:
        return {"pretrained": f"{RESULTS}/models/{wildcards.model}/pretrained"}
    return {}


def model_settings(section, drop=()):
    """Input function: the config section ``section`` without the keys ``drop``, with the model's own ``dtype``
    (``models.<name>.dtype``) in place of the section's when set."""

    def settings(w):
        out = {k: v for k, v in config[section].items() if k not in drop}
        return {**out, "dtype": config["models"][w.model].get("dtype", out["dtype"])}

    return settings


def model_inputs(kind):
    """Input function: the model folders (kind 'models') or tokenised inputs ('inputs') of every weight set."""
    pattern = {"models": "models/{model}/{weights}", "inputs": "inputs/{model}/{weights}.nc"}[kind]
    return lambda w: expand(f"{RESULTS}/{pattern}", model=w.model, weights=model_weights(w.model))


# Report captions: templates in workflow/report/ that the summary rule fills with this run's numbers.
# (relative paths: an absolute path would make a moved or copied workspace rerun the summary)
REPORT_TEMPLATES = sorted(os.path.relpath(p) for p in Path(workflow.basedir, "workflow", "report").glob("*.rst"))


def caption(name):
    """Path (relative to a rules file) of a caption written by the summary rule for ``snakemake --report``."""
    return f"../../{RESULTS}/report/captions/{name}.rst"


# Final results; each rules file appends its own targets (rule all requests them all) and defines a target rule
# per paper figure (fig2, fig3, fig4) that builds just that figure's results.
TARGETS = []
