# Path effectiveness (the paper's Fig. 4): one training and one evaluation job per task, gathered into
# the figure; plus the distribution of path lengths C(L,k) H^k / (H+1)^L of common architectures.
from san.config import path_task_architectures, path_task_slices
from san.paths import depth_and_heads

PATHS = config["paths"]
PATHS_TASKS = PATHS["tasks"]
# Each task's config slice (seed, data, model, train and its task; a variant's changes applied), by name.
PATHS_SLICES = path_task_slices(PATHS, Path(workflow.basedir) / "workflow" / "schemas" / "paths.schema.yaml")
# Panel titles that the listed variants set (the figures' default: the task's title and the variant's name).
PATHS_TITLES = {t: PATHS["variants"][t]["title"] for t in PATHS_TASKS if "title" in PATHS["variants"].get(t, {})}
# Tiny models: CPU jobs unless the config reserves GPUs for them.
PATHS_DEVICE = config["device"] if PATHS["gpu"] > 0 else "cpu"
PATHS_TASK_RE = "|".join(PATHS_TASKS)


# The config slice of one task, the only config a task's jobs see.
paths_task_slice = lambda wildcards: PATHS_SLICES[wildcards.task]
# Library modules of a training job; only memorisation reads the prose text.
paths_train_lib = lambda wildcards: lib(
    "attention",
    "fused",
    "san_model",
    "tasks",
    "training",
    "jobs",
    *(["text"] if PATHS_SLICES[wildcards.task]["task"] == "memorization" else []),
)
# Architectures of the path-length distribution: the paper's list, the configured models, the tasks' SANs.
PATHS_ARCHITECTURES = (
    [{**a, "source": "paper"} for a in PATHS["architectures"]]
    + [
        dict(zip(("layers", "heads"), depth_and_heads(spec["family"], spec["init"]["config"])), name=name)
        | {"source": "config model"}
        for name, spec in config["models"].items()
    ]
    + [{**a, "source": "paths task"} for a in path_task_architectures(PATHS_SLICES)]
)


# Train the SAN of one task at the paper's settings; weights, the data it saw and the loss per epoch.
rule paths_train:
    input:
        lib=paths_train_lib,
    output:
        model=f"{RESULTS}/paths/{{task}}/model.safetensors",
        data=f"{RESULTS}/paths/{{task}}/data.npz",
        train_log=f"{RESULTS}/paths/{{task}}/train_log.tsv",
    log:
        "logs/paths/train/{task}.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths/train/{{task}}.tsv"
    wildcard_constraints:
        task=PATHS_TASK_RE,
    conda:
        "../../envs/torch.yaml"
    threads: PATHS["train_threads"]
    resources:
        mem_mb=3000,
        runtime=90,
        gpu=PATHS["gpu"],
    params:
        task=paths_task_slice,
        device=PATHS_DEVICE,
    script:
        "../../scripts/paths_train.py"


# Accuracy of sampled path sets by path length (all repeats), the full model and the chance level.
rule paths_evaluate:
    input:
        model=rules.paths_train.output.model,
        data=rules.paths_train.output.data,
        train_log=rules.paths_train.output.train_log,
        lib=lib("attention", "fused", "san_model", "tasks", "text", "paths", "jobs"),
    output:
        f"{RESULTS}/paths/{{task}}.nc",
    log:
        "logs/paths/evaluate/{task}.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths/evaluate/{{task}}.tsv"
    wildcard_constraints:
        task=PATHS_TASK_RE,
    conda:
        "../../envs/torch.yaml"
    threads: PATHS["eval_threads"]
    resources:
        mem_mb=int(PATHS["evaluation"]["memory_mb"] * 2 + 1000),
        runtime=60,
        gpu=PATHS["gpu"],
    params:
        task=paths_task_slice,
        evaluation=PATHS["evaluation"],
        device=PATHS_DEVICE,
    script:
        "../../scripts/paths_evaluate.py"


# Share of paths of each length, C(L,k) H^k / (H+1)^L, for the paper's architectures and the configured ones.
rule paths_counts:
    input:
        lib=lib("attention", "fused", "san_model", "paths", "jobs"),
    output:
        f"{RESULTS}/path_counts.nc",
    log:
        "logs/paths/counts.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths/counts.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        architectures=PATHS_ARCHITECTURES,
    script:
        "../../scripts/paths_counts.py"


# Per task: full-model and chance accuracy and the mean accuracy by path length for each number of paths.
rule paths_table:
    input:
        data=expand(f"{RESULTS}/paths/{{task}}.nc", task=PATHS_TASKS),
        lib=lib("plots", "plots_paths", "jobs"),
    output:
        f"{RESULTS}/paths/summary.csv",
    log:
        "logs/paths/table.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths/table.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../../scripts/paths_table.py"


# Fig. 4 layout: one panel per task, mean +- std over repeats by path length for each number of paths.
rule paths_plot:
    input:
        data=expand(f"{RESULTS}/paths/{{task}}.nc", task=PATHS_TASKS),
        lib=lib("plots", "plots_paths", "jobs"),
    output:
        report(
            figures("path_effectiveness"),
            caption=caption("paths_effectiveness"),
            category="Path effectiveness (Fig. 4)",
            labels={"figure": "accuracy by path length"},
        ),
    log:
        "logs/paths/plot.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths/plot.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
        titles=PATHS_TITLES,
    script:
        "../../scripts/paths_plot.py"


# Distribution of path lengths per architecture (log-scale path length).
rule paths_plot_counts:
    input:
        data=rules.paths_counts.output[0],
        lib=lib("plots", "plots_paths", "jobs"),
    output:
        report(
            figures("path_length_distribution"),
            caption=caption("paths_length_distribution"),
            category="Path effectiveness (Fig. 4)",
            labels={"figure": "path length distribution"},
        ),
    log:
        "logs/paths/plot_counts.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths/plot_counts.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
    script:
        "../../scripts/paths_plot_counts.py"


TARGETS += expand(f"{RESULTS}/paths/{{task}}.nc", task=PATHS_TASKS)
TARGETS += expand(f"{RESULTS}/paths/{{task}}/model.safetensors", task=PATHS_TASKS)
TARGETS += [f"{RESULTS}/path_counts.nc", f"{RESULTS}/paths/summary.csv"]
TARGETS += figures("path_effectiveness") + figures("path_length_distribution")
