# The circle experiment (the paper's Fig. 3): one layer trained to step two point sequences along a circle, applied
# recurrently. One job per (variant, hidden dim, seed), gathered into results/circle.nc.
import re

from san.circle_config import check_config as check_circle_config
from san.circle_config import run_slice as circle_run_slice

CIRCLE = config["circle"]
check_circle_config(CIRCLE)
CIRCLE_DEVICE = CIRCLE["device"] or config["device"]

CIRCLE_VARIANT_RE = "|".join(re.escape(v) for v in CIRCLE["variants"])


CIRCLE_RUNS = expand(
    f"{RESULTS}/circle/{{circle_variant}}/d{{hidden_dim}}/seed{{seed}}.nc",
    circle_variant=list(CIRCLE["variants"]),
    hidden_dim=CIRCLE["hidden_dims"],
    seed=CIRCLE["seeds"],
)


# Train one layer of the circle experiment and roll it out recurrently (one cell and seed of Fig. 3).
rule circle_train:
    input:
        lib=lib("attention", "circle", "circle_results", "jobs"),
    output:
        f"{RESULTS}/circle/{{circle_variant}}/d{{hidden_dim}}/seed{{seed}}.nc",
    log:
        "logs/circle_train/{circle_variant}/d{hidden_dim}/seed{seed}.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_train/{{circle_variant}}/d{{hidden_dim}}/seed{{seed}}.tsv"
    wildcard_constraints:
        circle_variant=CIRCLE_VARIANT_RE,
        hidden_dim=r"\d+",
        seed=r"\d+",
    conda:
        "../../envs/torch.yaml"
    threads: CIRCLE["threads"]
    resources:
        mem_mb=1000,
        runtime=10,
        gpu=int(CIRCLE_DEVICE != "cpu"),
    params:
        run=lambda w: circle_run_slice(CIRCLE, w.circle_variant),
        device=CIRCLE_DEVICE,
    script:
        "../../scripts/circle_train.py"


# Gather every (variant, hidden dim, seed) of the circle experiment into one dataset.
rule circle_gather:
    input:
        runs=CIRCLE_RUNS,
        lib=lib("circle_results", "jobs"),
    output:
        f"{RESULTS}/circle.nc",
    log:
        "logs/circle_gather.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_gather.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        variants=list(CIRCLE["variants"]),
        hidden_dims=CIRCLE["hidden_dims"],
        seeds=CIRCLE["seeds"],
        settings={k: CIRCLE[k] for k in ("variants", "data", "model", "train", "rollout")},
        device=CIRCLE_DEVICE,
    script:
        "../../scripts/circle_gather.py"


# Token distance after the report steps and the number of collapsed seeds, per variant and hidden dim.
rule circle_table:
    input:
        data=rules.circle_gather.output[0],
        lib=lib("circle_results", "jobs"),
    output:
        report(
            f"{RESULTS}/tables/circle_collapse.csv",
            caption=caption("circle_table"),
            category="Circle (Fig. 3)",
            labels={"table": "collapse"},
        ),
    log:
        "logs/circle_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_table.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        report=CIRCLE["report"],
    script:
        "../../scripts/circle_table.py"


# Fig. 3 layout: trajectories of the recurrent rollout, rows variants, columns hidden dims (one seed).
rule plot_circle:
    input:
        data=rules.circle_gather.output[0],
        lib=lib("plots", "plots_circle", "jobs"),
    output:
        report(
            figures("circle"),
            caption=caption("circle"),
            category="Circle (Fig. 3)",
            labels={"figure": "trajectories"},
        ),
    log:
        "logs/plot_circle.log",
    benchmark:
        f"{RESULTS}/benchmarks/plot_circle.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
        plot=CIRCLE["plot"],
    script:
        "../../scripts/circle_plot.py"


# Token distance against recurrent step, over seeds, one line per variant and a panel per hidden dim.
rule plot_circle_distance:
    input:
        data=rules.circle_gather.output[0],
        lib=lib("plots", "plots_circle", "jobs"),
    output:
        report(
            figures("circle_distance"),
            caption=caption("circle_distance"),
            category="Circle (Fig. 3)",
            labels={"figure": "token distance"},
        ),
    log:
        "logs/plot_circle_distance.log",
    benchmark:
        f"{RESULTS}/benchmarks/plot_circle_distance.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
        collapse_threshold=CIRCLE["report"]["collapse_threshold"],
    script:
        "../../scripts/circle_plot_distance.py"


# Training loss per epoch, over seeds, one line per variant and a panel per hidden dim.
rule plot_circle_loss:
    input:
        data=rules.circle_gather.output[0],
        lib=lib("plots", "plots_circle", "jobs"),
    output:
        report(
            figures("circle_loss"),
            caption=caption("circle_loss"),
            category="Circle (Fig. 3)",
            labels={"figure": "training loss"},
        ),
    log:
        "logs/plot_circle_loss.log",
    benchmark:
        f"{RESULTS}/benchmarks/plot_circle_loss.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
    script:
        "../../scripts/circle_plot_loss.py"


TARGETS += [f"{RESULTS}/circle.nc", f"{RESULTS}/tables/circle_collapse.csv"]
TARGETS += figures("circle") + figures("circle_distance") + figures("circle_loss")
