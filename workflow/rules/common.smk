# Shared helpers: config validation, per-job config slices, library dependencies, resources and target lists.
# Parsing the workflow imports only torch-free modules (san.core.config and the wings' registry, san.experiments:
# their `spec`, `claims` and `tables` modules).
import os
import re
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import validate

from san.core.gpus import visible_gpus
from san.core.memory import declared_mem_mb, gpu_model_for
from san.core.config import load_config_file, load_yaml
from san.experiments import check_config, rules_files
from san.figures import FIGURES as FIGURE_REGISTRY, caption_name as figure_caption, figure_names
from san.imports import PACKAGE, library_inputs
from san.models.disk import declared_disk_mb, footprint, pinned_files
from san.models.entries import explicit_architecture, init_entry, weight_sets
from san.rank_collapse.spec import attention_product_models, model_priorities, variant_dtypes
from san.rank_collapse.series.spec import MODEL as SERIES_MODEL
from san.report.model_report import is_decoder, resolve_model

# The workflow's own files are found from its folder (WORKFLOW_DIR, the Snakefile's), never from the working directory.
SCHEMAS = WORKFLOW_DIR / "schemas"

# Fail on a bad config before any job is scheduled, with a message naming the key: the schema (defaults filled in)
# and every experiment's cross-checks, once; then Snakemake's own validation against the same schema. (The schema's
# folder itself, not workflow.source_path's cached copy of one file, so its $refs to sibling schema files resolve.)
# Every mapping's keys are put in the order of CONFIG_FILE: a job's params, which Snakemake compares by their text,
# then depend on the config's values only, not on the order in which an overlay (--configfile, --config) wrote them.
# The model of the model_report target (config `model`): a name under `models`, or a local folder whose entry is added
# there (pinned) before the check (san.report.model_report.resolve_model).
MODEL = resolve_model(config)
CHECKED = check_config(
    config, SCHEMAS, reference=load_config_file(CONFIG_FILE) if Path(CONFIG_FILE).is_file() else None
)
validate(config, "../schemas/config.schema.yaml")
# The rules files of the wings (san.experiments.WINGS), which the Snakefile includes after this file.
WING_RULES = rules_files()

# glibc's malloc hands freed blocks above its mmap threshold back to the kernel and page-faults them in again on the
# next forward pass; jobs inherit these settings and keep such blocks in the heap instead (less time per forward
# pass, the same memory peaks). A value already in the environment wins.
os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 * 2**20))
os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(16 * 2**30))
# The project's folder (above workflow/), where the conda environments' post-deploy scripts install the package from
# (envs/*.post-deploy.sh), whatever the working directory (a module import runs in the importing workflow's).
os.environ.setdefault("SAN_PROJECT", str(WORKFLOW_DIR.parent))

RESULTS = "results"
# Every result file that several rules read, spelled once (its pattern, with wildcards model, task, sweep or wing);
# the rules that write, read and target it expand this table.
RESULT = {
    "model": f"{RESULTS}/models/{{model}}/{{weights}}",
    "inputs": f"{RESULTS}/inputs/{{model}}/{{weights}}.nc",
    "pixels": f"{RESULTS}/pixels/{{model}}/{{weights}}.nc",
    "rank_collapse": f"{RESULTS}/rank_collapse/{{model}}.nc",
    "attention_products": f"{RESULTS}/attention_products/{{model}}.nc",
    "circle_collapse": f"{RESULTS}/tables/circle_collapse.csv",
    "paths": f"{RESULTS}/paths/{{task}}.nc",
    "paths_exact": f"{RESULTS}/paths/{{task}}_exact.nc",
    "theorem": f"{RESULTS}/theorem.nc",
    "propagation": f"{RESULTS}/propagation/{{sweep}}.nc",
    "vision": f"{RESULTS}/vision/{{model}}.nc",
    "sink_context": f"{RESULTS}/phenomena/context/{{model}}.nc",
    "quantisation": f"{RESULTS}/phenomena/quantisation/{{model}}.nc",
    "hub_series": f"{RESULTS}/rank_collapse_series/{{model}}.nc",
    "series": f"{RESULTS}/series/seed{{seed}}",
    "wing_summary": f"{RESULTS}/summary/{{wing}}.json",
}
# Conda environment of the torch rules (`snakemake --sdm conda`): envs/torch.yaml (CPU build) or envs/torch-cuda.yaml
# (config `torch_env`), relative to the rules files.
TORCH_ENV = f"../../envs/{config['torch_env']}.yaml"
FIGURE_FORMATS = config["figures"]["formats"]
# Memory, disk and wall time of every rule, in one table (a cluster profile submits what the rules declare).
RESOURCES = load_yaml(Path(WORKFLOW_DIR, "resources.yaml"))
# The maker of the GPUs a GPU job asks for: Kubernetes' executor requests `<maker>.com/gpu` from it (CUDA: nvidia).
GPU_MANUFACTURER = "nvidia"


def resources(rule, **extra):
    """The resources of ``rule``: its row of workflow/resources.yaml (``mem_mb``, ``disk_mb``, ``runtime``) and
    ``extra`` (e.g. a GPU request). ``disk_mb`` grows by what the job reads (:func:`input_disk`). A job that reserves
    a GPU (``gpu`` > 0, the key of SLURM's executor and of local runs) also names the GPU's maker
    (``gpu_manufacturer``, which Kubernetes' executor needs with ``gpu``); ``gpu`` 0 is left out."""
    out = {**RESOURCES[rule], "disk_mb": input_disk(RESOURCES[rule]["disk_mb"]), **extra}
    gpu = out.pop("gpu", 0)
    if gpu:
        out.update(gpu=gpu, gpu_manufacturer=GPU_MANUFACTURER)
    return out


def input_disk(base, extra=None):
    """A ``disk_mb`` function: ``base`` (a model job's ``models.<name>.disk_mb`` replaces it) plus the size of the
    job's inputs, its library aside, where they are all on the scheduling host (model folders, results: a job on a
    node without a shared filesystem downloads them there), plus ``extra(wildcards)`` MB when given."""

    def disk_mb(wildcards, input):
        floor = config["models"].get(wildcards.get("model"), {}).get("disk_mb", base)
        lib = set(input.get("lib", []))
        floor += extra(wildcards) if extra is not None else 0
        return declared_disk_mb([f for f in input if f not in lib], 1, floor)

    return disk_mb


# Where each torch rule's jobs run (config `compute:`): one entry per rule, named by the rule, {device, threads}.
COMPUTE = config["compute"]


def compute_threads(rule):
    """CPU threads of one job of ``rule`` (``compute.<rule>.threads``)."""
    return COMPUTE[rule]["threads"]


def compute_gpu(rule):
    """GPUs one job of ``rule`` reserves: one unless its device is the CPU."""
    return int(COMPUTE[rule]["device"] != "cpu")


def memory_budget_of(rule, model):
    """The memory budget (MB) of a job of ``rule`` on ``model`` (None: no model) and the config key that sets it: the
    model's own ``models.<name>.memory_budget_mb``, else ``compute.<rule>.memory_budget_mb`` (None: the whole model
    is held)."""
    own = config["models"].get(model, {}).get("memory_budget_mb") if model else None
    if own is not None:
        return own, f"models.{model}.memory_budget_mb"
    return COMPUTE[rule].get("memory_budget_mb"), f"compute.{rule}.memory_budget_mb"


def compute_params(rule):
    """Param function: the ``compute`` param of a job of ``rule``: its device, the config key that sets it (for
    messages), whether it reserved a GPU (san.core.device.job_device reads it) and its memory budget with its key
    (model jobs, :func:`memory_budget_of`: a model's own budget changes only its jobs' params)."""

    def params(w):
        out = {"device": COMPUTE[rule]["device"], "key": f"compute.{rule}.device", "gpu": compute_gpu(rule)}
        budget, key = memory_budget_of(rule, w.get("model"))
        if budget is not None:
            out.update(memory_budget_mb=budget, memory_budget_key=key)
        return out

    return params


# A local run on a GPU node never starts more GPU jobs than there are GPUs: without `--resources gpu=N`, the limit
# is the number of GPUs visible here (each job then claims its own, san.core.gpus). Cluster jobs are limited by
# their allocation instead.
VISIBLE_GPUS = visible_gpus()
if workflow.local_exec and VISIBLE_GPUS and "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", len(VISIBLE_GPUS))
    logger.info(f"GPU jobs: at most {len(VISIBLE_GPUS)} at a time, one per visible GPU (--resources gpu=N to change)")


# Scheduling priority of each analysed model's jobs, in (0, 1): the costliest models first, below the
# path-effectiveness chains (san.rank_collapse.spec.model_priorities).
MODEL_PRIORITY = model_priorities(config)


def model_priority(w):
    """Priority of a job of model ``w.model``; acquiring pretrained weights comes before every analysis."""
    first = 0.5 if w.get("weights") == "pretrained" and w.model in MODEL_PRIORITY else 0.0
    return MODEL_PRIORITY.get(w.model, 0.0) + first


def model_resources(rule, **extra):
    """:func:`resources` of a job that acquires or loads one model, whose ``models.<name>.mem_mb`` (when set)
    replaces the table's memory; acquiring pretrained weights (wildcard ``weights``) adds to the disk what the
    acquisition writes from its source's pinned files (san.models.disk; nothing for a hub download, whose size
    ``models.<name>.disk_mb`` states)."""
    default = RESOURCES[rule]["mem_mb"]

    def acquired_mb(w):
        source = config["models"][w.model].get("pretrained") if w.get("weights") == "pretrained" else None
        return declared_disk_mb(pinned_files(source), footprint(source), 0) if source else 0

    def mem_mb(w):
        return config["models"][w.model].get("mem_mb", default)

    return resources(rule, mem_mb=mem_mb, disk_mb=input_disk(RESOURCES[rule]["disk_mb"], acquired_mb), **extra)


SAID = set()


def said_once(message):
    """Log ``message`` the first time it comes (resources are evaluated again for every job and attempt)."""
    if message not in SAID:
        SAID.add(message)
        logger.info(message)


def analysis_resources(rule, section):
    """:func:`resources` of a job of ``rule`` that runs one model's forward passes (config ``section``: its dtype;
    ``rank_collapse.batch_size`` sequences of ``text.seq_len`` tokens a batch): ``mem_mb`` follows from the acquired
    model's parameters and shape, the dtypes, the batch and the job's memory budget (:func:`memory_budget_of`;
    san.core.memory.declared_mem_mb; at least ``models.<name>.mem_mb`` when set), raised with each attempt
    (``--retries``); a GPU job also declares ``gpu_mem_mb``, the device memory it needs, and ``gpu_model``, the
    smallest of a site's ``SAN_SLURM_GPU_MODELS`` that holds it (a SLURM profile's GPU model, when set, wins)."""
    default = RESOURCES[rule]["mem_mb"]
    seq_len, batch = config["text"]["seq_len"], config["rank_collapse"]["batch_size"]
    # the attention products keep every layer's attention matrices of their sequences
    kept = config[section].get("n_sequences", 0) if section == "attention_products" else 0

    def dtypes(w):
        dtype = config["models"][w.model].get("dtype", config[section]["dtype"])
        variants = config["rank_collapse"]["variants"]
        return sorted(set(variant_dtypes(dtype, variants).values())) if isinstance(dtype, dict) else [dtype]

    def mem_mb(wildcards, input, attempt):
        if not all(Path(f, "config.json").is_file() for f in input.models):
            said_once(
                f"{rule}: the memory of a model whose folder is not on this host (not acquired yet, or in a storage "
                f"bucket) is {default} MB (workflow/resources.yaml) or its models.<name>.mem_mb, times the attempt"
            )
        budget = memory_budget_of(rule, wildcards.model)[0]
        need = declared_mem_mb(input.models, dtypes(wildcards), seq_len, batch, budget, attempt, default, False, kept)
        return max(need, config["models"][wildcards.model].get("mem_mb", 0) * attempt)

    def gpu_mem_mb(wildcards, input, attempt):
        budget = memory_budget_of(rule, wildcards.model)[0]
        return declared_mem_mb(input.models, dtypes(wildcards), seq_len, batch, budget, attempt, 0, True, kept)

    def gpu_model(wildcards, input, attempt):
        return gpu_model_for(gpu_mem_mb(wildcards, input, attempt), os.environ.get("SAN_SLURM_GPU_MODELS", ""))

    extra = {"gpu": compute_gpu(rule)}
    if compute_gpu(rule):
        extra.update(gpu_mem_mb=gpu_mem_mb, gpu_model=gpu_model)
    return resources(rule, mem_mb=mem_mb, **extra)


def shipped(path):
    """``path`` (a file that ships with the workflow or its library: a module, a report template) as a rule input,
    relative to the working directory and ``local()``: with a default storage provider (`--default-storage-provider`,
    no shared filesystem) it is read where it is, not sought in the bucket."""
    return local(os.path.relpath(path))


def add_library_inputs(rules):
    """Give each of ``rules`` that runs a script the library modules the script runs as inputs (named ``lib``), that
    is every ``san`` module the script imports, directly or through other modules, with the package ``__init__``
    files on the way, read from the files' syntax trees (san.imports) of the ``san`` package that this process
    imports and the jobs run (san.imports.PACKAGE: a clone or an installed copy). Editing a module then reruns
    exactly the jobs whose scripts import it. Called once, after every rule is defined (the end of the Snakefile);
    only this workflow's own rules are given them, once (a workflow that imports it as a module keeps its rules)."""
    for one in rules:
        own = Path(one.basedir.get_path_or_uri(secret_free=True)).resolve().is_relative_to(WORKFLOW_DIR.resolve())
        if one.script is not None and own and "lib" not in one.input.keys():
            script = Path(one.basedir.join(one.script).get_path_or_uri(secret_free=True))
            # a script that calls the `run` of the experiment its rule names (params.experiment) runs that module too
            runs = [value for name, value in one.params.items() if name == "experiment"]
            # the figure script draws with the registry's draw functions (san.figures), imported by name
            if script.name == "figure.py":
                drawn = figure_names(one.name, list(one.output.keys()))
                runs += [FIGURE_REGISTRY[n].draw.split(":")[0] for n in drawn]
            one.input_modifier = one.input_modifier or workflow.modifier.path_modifier  # a rule without inputs
            one.set_input(lib=[shipped(p) for p in library_inputs(script, PACKAGE, runs)])


def figures(stem):
    """Paths of one figure in every configured format."""
    return expand(f"{RESULTS}/figures/{stem}.{{ext}}", ext=FIGURE_FORMATS)


def model_figure(name, suffix=""):
    """Paths of figure ``name`` of one model (the ``{model}`` wildcard) in every configured format."""
    return expand(f"{RESULTS}/figures/{name}_{{{{model}}}}{suffix}.{{ext}}", ext=FIGURE_FORMATS)


def figure_report(name, paths=None, labels=None):
    """Figure ``name`` of the figure registry (san.figures) as a rule's report output: its files (``paths``, default
    :func:`figures`), its caption, category and subcategory from the registry."""
    entry = FIGURE_REGISTRY[name]
    return report(
        paths or figures(name),
        caption=caption(figure_caption(name)),
        category=entry.category,
        subcategory=entry.subcategory,
        labels=labels,
    )


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
        return {"pretrained": RESULT["model"].format(model=wildcards.model, weights="pretrained")}
    return {}


def model_settings(section, drop=()):
    """Input function: the config section ``section`` without the keys ``drop``, with the model's own ``dtype``
    (``models.<name>.dtype``) in place of the section's when set."""

    def settings(w):
        out = {k: v for k, v in config[section].items() if k not in drop}
        return {**out, "dtype": config["models"][w.model].get("dtype", out["dtype"])}

    return settings


def tokenizer_model(w):
    """tokenize_inputs' model: the folder of the acquired model's weight set, or, for the offline training series
    (the model SERIES_MODEL, weights a checkpoint), its first seed's checkpoints (series.smk), which share one
    tokenizer."""
    if w.model == SERIES_MODEL:
        return rules.series_train.output[0].format(seed=config["series"]["seeds"][0])
    return RESULT["model"].format(**w)


def one_of(models):
    """A wildcard constraint matching exactly ``models`` (nothing for none)."""
    return "|".join(map(re.escape, models)) if models else "^$"


def model_inputs(kind):
    """Input function: one of RESULT's files of every weight set of the job's model: its folders ('model'), tokenised
    inputs ('inputs') or pixel values ('pixels')."""
    return lambda w: expand(RESULT[kind], model=w.model, weights=model_weights(w.model))


# Report captions: templates in workflow/report/ that the summary rule fills with this run's numbers.
# (relative paths: an absolute path would make a moved or copied workspace rerun the summary)
REPORT_TEMPLATES = [shipped(p) for p in sorted(Path(WORKFLOW_DIR, "report").glob("*.rst"))]


def caption(name):
    """Path of a caption written by the summary rule for ``snakemake --report``, in the working directory's results
    (absolute: Snakemake resolves a relative caption against the rules file's folder)."""
    return os.path.abspath(f"{RESULTS}/report/captions/{name}.rst")


# Final results; each rules file appends its own targets (rule all requests them all) and defines a target rule
# per paper figure (fig2, fig3, fig4) that builds just that figure's results.
TARGETS = []
# The wings' summaries' inputs and params (report.smk): each wing's rules file registers the files and values that
# claims read, by name; each wing's summary job takes those its registry entry names (san.experiments.WINGS).
SUMMARY_INPUTS = {}
SUMMARY_PARAMS = {}
# The run's data besides summary.json that the wings' documents tables read (san.experiments.table_data), registered
# by the rules file that writes it; the readme_tables rule takes them all.
TABLE_INPUTS = []


# ---- One model's report (model_report.smk; config `model`, MODEL above).


def model_context(w):
    """The context-length run of model ``w.model`` when it is a decoder with pretrained weights (none otherwise)."""
    return [RESULT["sink_context"].format(model=w.model)] if is_decoder(config, w.model) else []


def model_report_inputs(wildcards):
    """The page of config `model` (a missing `model` is named)."""
    if MODEL is None:
        raise WorkflowError(
            "target model_report: config key 'model' is not set; give the model on the command line: "
            "snakemake --cores all model_report --config model=<folder or name under models>"
        )
    return f"{RESULTS}/model_report/{MODEL}/README.md"
