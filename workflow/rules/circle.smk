# The circle experiment (the paper's Fig. 3): one layer trained to step two point sequences along a circle, applied
# recurrently. One job per (variant, hidden dim, group of circle.seeds_per_job seeds), gathered into
# results/circle.nc.
import re

from san.circle.spec import chunk_label, run_slice as circle_run_slice, seed_chunks

CIRCLE = config["circle"]

CIRCLE_VARIANT_RE = "|".join(re.escape(v) for v in CIRCLE["variants"])
# (variant, hidden dim, seed group) of every job, in the order of the gathered dataset.
CIRCLE_JOBS = [
    (v, d, chunk_label(seeds))
    for v in CIRCLE["variants"]
    for d in CIRCLE["hidden_dims"]
    for seeds in seed_chunks(CIRCLE["seeds"], CIRCLE["seeds_per_job"])
]
CIRCLE_RUNS = [f"{RESULTS}/circle/{v}/d{d}/seeds{s}.nc" for v, d, s in CIRCLE_JOBS]


rule circle_train:
    """Train one layer of the circle experiment and roll it out recurrently (one cell of Fig. 3, a group of seeds)."""
    output:
        f"{RESULTS}/circle/{{circle_variant}}/d{{hidden_dim}}/seeds{{seeds}}.nc",
    log:
        "logs/circle_train/{circle_variant}/d{hidden_dim}/seeds{seeds}.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_train/{{circle_variant}}/d{{hidden_dim}}/seeds{{seeds}}.tsv"
    wildcard_constraints:
        circle_variant=CIRCLE_VARIANT_RE,
        hidden_dim=r"\d+",
        seeds=r"\d+(_\d+)*",
    conda:
        TORCH_ENV
    threads: compute_threads("circle_train")
    resources:
        **resources("circle_train", gpu=compute_gpu("circle_train")),
    params:
        run=lambda w: circle_run_slice(CIRCLE, w.circle_variant),
        compute=compute_params("circle_train"),
    script:
        "../../scripts/circle_train.py"


rule circle_gather:
    """Gather every (variant, hidden dim, seed) of the circle experiment into one dataset."""
    input:
        runs=CIRCLE_RUNS,
    output:
        f"{RESULTS}/circle.nc",
    log:
        "logs/circle_gather.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_gather.tsv"
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("circle_gather"),
    params:
        jobs=CIRCLE_JOBS,
        seeds=CIRCLE["seeds"],
        settings={k: CIRCLE[k] for k in ("variants", "data", "model", "train", "rollout")},
        device=COMPUTE["circle_train"]["device"],
    script:
        "../../scripts/circle_gather.py"


rule circle_table:
    """Token distance after the report steps and the number of collapsed seeds, per variant and hidden dim."""
    input:
        data=rules.circle_gather.output[0],
    output:
        report(
            RESULT["circle_collapse"],
            caption=caption("circle_table"),
            category="Circle (Fig. 3)",
            labels={"table": "collapse"},
        ),
    log:
        "logs/circle_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_table.tsv"
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("circle_table"),
    params:
        report=CIRCLE["report"],
    script:
        "../../scripts/circle_table.py"


rule circle:
    """Fig. 3 layout: trajectories of the recurrent rollout, rows variants, columns hidden dims (one seed)."""
    input:
        data=rules.circle_gather.output[0],
    output:
        figure_report("circle", labels={"figure": "trajectories"}),
    log:
        "logs/circle.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("circle"),
    params:
        figures=config["figures"],
        plot=CIRCLE["plot"],
    script:
        "../../scripts/figure.py"


rule circle_distance:
    """Token distance against recurrent step, over seeds, one line per variant and a panel per hidden dim."""
    input:
        data=rules.circle_gather.output[0],
    output:
        figure_report("circle_distance", labels={"figure": "token distance"}),
    log:
        "logs/circle_distance.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_distance.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("circle_distance"),
    params:
        figures=config["figures"],
        collapse_threshold=CIRCLE["report"]["collapse_threshold"],
    script:
        "../../scripts/figure.py"


rule circle_loss:
    """Training loss per epoch, over seeds, one line per variant and a panel per hidden dim."""
    input:
        data=rules.circle_gather.output[0],
    output:
        figure_report("circle_loss", labels={"figure": "training loss"}),
    log:
        "logs/circle_loss.log",
    benchmark:
        f"{RESULTS}/benchmarks/circle_loss.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("circle_loss"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


FIG3 = [f"{RESULTS}/circle.nc", RESULT["circle_collapse"]]
FIG3 += figures("circle") + figures("circle_distance") + figures("circle_loss")
TARGETS += FIG3
# What the wing's claims read (san.circle.claims): the collapse table, the gathered result (the token distance of
# every run and step, for the claim's control; the run's config hash) and the table's collapse threshold.
SUMMARY_INPUTS.update(circle=RESULT["circle_collapse"], circle_result=rules.circle_gather.output[0])
SUMMARY_PARAMS.update(circle_collapse_threshold=CIRCLE["report"]["collapse_threshold"])


rule fig3:
    """Target: Fig. 3 (the circle experiment): trajectories, token distances, losses and the collapse table."""
    input:
        FIG3,
