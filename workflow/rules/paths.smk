# Path effectiveness (the paper's Fig. 4): one training and one evaluation job per task, gathered into
# the figure; plus the distribution of path lengths C(L,k) H^k / (H+1)^L of common architectures.
from san.paths.spec import priorities, task_architectures
from san.models.entries import depth_and_heads, explicit_architecture

PATHS = config["paths"]
PATHS_TASKS = PATHS["tasks"]
# Each task's config slice (seed, data, model, train and its task; a derived task's changes applied), by name.
PATHS_SLICES = CHECKED["paths"]
# Panel titles that the listed derived tasks set (the figures' default: the task's title and the derived task's name).
PATHS_TITLES = {
    t: PATHS["derived_tasks"][t]["title"] for t in PATHS_TASKS if "title" in PATHS["derived_tasks"].get(t, {})
}
PATHS_TASK_RE = "|".join(PATHS_TASKS)
# The costliest training + evaluation chains start first (priority: rank by their arithmetic, from the config).
PATHS_PRIORITY = priorities(PATHS_SLICES, PATHS["evaluation"]["n_paths"], PATHS["evaluation"]["n_repeats"])


# The config slice of one task, the only config a task's jobs see.
paths_task_slice = lambda wildcards: PATHS_SLICES[wildcards.task]
# Architectures of the path-length distribution: the paper's list, the configured models whose architecture the
# config states (not those taken from downloaded weights), the tasks' SANs.
PATHS_ARCHITECTURES = (
    [{**a, "source": "paper"} for a in PATHS["architectures"]]
    + [
        dict(zip(("layers", "heads"), depth_and_heads(*explicit_architecture(spec))), name=name)
        | {"source": "config model"}
        for name, spec in config["models"].items()
        if explicit_architecture(spec) is not None
    ]
    + [{**a, "source": "paths task"} for a in task_architectures(PATHS_SLICES)]
)


rule paths_train:
    """Train the SAN of one task at the paper's settings; weights, the data it saw and the loss per epoch."""
    output:
        model=f"{RESULTS}/paths/{{task}}/model.safetensors",
        data=f"{RESULTS}/paths/{{task}}/data.npz",
        train_log=f"{RESULTS}/paths/{{task}}/train_log.tsv",
    log:
        "logs/paths_train/{task}.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths_train/{{task}}.tsv"
    wildcard_constraints:
        task=PATHS_TASK_RE,
    priority: lambda w: PATHS_PRIORITY[w.task]
    conda:
        TORCH_ENV
    threads: compute_threads("paths_train")
    resources:
        **resources("paths_train", gpu=compute_gpu("paths_train")),
    params:
        task=paths_task_slice,
        compute=compute_params("paths_train"),
        # resume state of a killed job: outside the outputs, so Snakemake keeps it; removed with the outputs written
        checkpoint=lambda w: f"{RESULTS}/checkpoints/paths_train/{w.task}.pt",
        checkpoint_minutes=PATHS["checkpoint_minutes"],
    script:
        "../../scripts/paths_train.py"


rule paths_evaluate:
    """Accuracy of sampled path sets by path length (all repeats), the full model and the chance level."""
    input:
        model=rules.paths_train.output.model,
        data=rules.paths_train.output.data,
        train_log=rules.paths_train.output.train_log,
    output:
        RESULT["paths"],
    log:
        "logs/paths_evaluate/{task}.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths_evaluate/{{task}}.tsv"
    wildcard_constraints:
        task=PATHS_TASK_RE,
    priority: lambda w: PATHS_PRIORITY[w.task]
    conda:
        TORCH_ENV
    threads: compute_threads("paths_evaluate")
    resources:
        **resources(
            "paths_evaluate",
            mem_mb=max(RESOURCES["paths_evaluate"]["mem_mb"], int(PATHS["evaluation"]["memory_mb"] * 2 + 1000)),
            gpu=compute_gpu("paths_evaluate"),
        ),
    params:
        task=paths_task_slice,
        evaluation=PATHS["evaluation"],
        compute=compute_params("paths_evaluate"),
    script:
        "../../scripts/paths_evaluate.py"


rule paths_counts:
    """Share of paths of each length, C(L,k) H^k / (H+1)^L, for the paper's architectures and the configured ones."""
    output:
        f"{RESULTS}/path_counts.nc",
    log:
        "logs/paths_counts.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths_counts.tsv"
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("paths_counts"),
    params:
        architectures=PATHS_ARCHITECTURES,
    script:
        "../../scripts/paths_counts.py"


rule paths_table:
    """Per task: full-model and chance accuracy and the mean accuracy by path length for each number of paths."""
    input:
        data=expand(RESULT["paths"], task=PATHS_TASKS),
    output:
        f"{RESULTS}/paths/summary.csv",
    log:
        "logs/paths_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths_table.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("paths_table"),
    script:
        "../../scripts/paths_table.py"


rule path_effectiveness:
    """Fig. 4 layout: one panel per task, mean over seeds and repeats by path length with the seeds' range."""
    input:
        data=expand(RESULT["paths"], task=PATHS_TASKS),
    output:
        figure_report("path_effectiveness", labels={"figure": "accuracy by path length"}),
    log:
        "logs/path_effectiveness.log",
    benchmark:
        f"{RESULTS}/benchmarks/path_effectiveness.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("path_effectiveness"),
    params:
        figures=config["figures"],
        titles=PATHS_TITLES,
    script:
        "../../scripts/figure.py"


rule path_length_distribution:
    """Distribution of path lengths per architecture (log-scale path length)."""
    input:
        data=rules.paths_counts.output[0],
    output:
        figure_report("path_length_distribution", labels={"figure": "path length distribution"}),
    log:
        "logs/path_length_distribution.log",
    benchmark:
        f"{RESULTS}/benchmarks/path_length_distribution.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("path_length_distribution"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


FIG4 = expand(RESULT["paths"], task=PATHS_TASKS)
FIG4 += expand(f"{RESULTS}/paths/{{task}}/model.safetensors", task=PATHS_TASKS)
FIG4 += [f"{RESULTS}/path_counts.nc", f"{RESULTS}/paths/summary.csv"]
FIG4 += figures("path_effectiveness") + figures("path_length_distribution")
TARGETS += FIG4
# What the wing's claims read (san.paths.claims); the paths summary is the data its documents table reads.
SUMMARY_INPUTS.update(paths=expand(RESULT["paths"], task=PATHS_TASKS))
SUMMARY_PARAMS.update(tasks=PATHS_TASKS)
TABLE_INPUTS += [rules.paths_table.output[0]] if PATHS_TASKS else []


rule fig4:
    """Target: Fig. 4 (path effectiveness per task) and the path-length distribution, with their data."""
    input:
        FIG4,
