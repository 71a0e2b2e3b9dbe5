# Exact path-length decomposition of every trained path-effectiveness SAN (Fig. 4, exact counterpart): with each
# layer's attention and LayerNorm scales frozen, the final state is sum_k Y_k + C exactly; per task the norm share
# and accuracy of each path length, trained and at initialisation, beside the sampled protocol of Fig. 4.


rule paths_decompose:
    """Exact decomposition by path length of one trained SAN and of its initialisation (float64, no retraining)."""
    input:
        model=rules.paths_train.output.model,
        data=rules.paths_train.output.data,
    output:
        RESULT["paths_exact"],
    log:
        "logs/paths_decompose/{task}.log",
    benchmark:
        f"{RESULTS}/benchmarks/paths_decompose/{{task}}.tsv"
    wildcard_constraints:
        task=PATHS_TASK_RE,
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("paths_decompose"),
    params:
        task=paths_task_slice,
    script:
        "../../scripts/paths_decompose.py"


rule path_decomposition:
    """Per task: norm share by path length (trained, init) and truncated accuracy over the sampled protocol."""
    input:
        exact=expand(RESULT["paths_exact"], task=PATHS_TASKS),
        sampled=expand(RESULT["paths"], task=PATHS_TASKS),
    output:
        figure_report("path_decomposition", labels={"figure": "exact path-length decomposition"}),
    log:
        "logs/path_decomposition.log",
    benchmark:
        f"{RESULTS}/benchmarks/path_decomposition.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("path_decomposition"),
    params:
        figures=config["figures"],
        titles=PATHS_TITLES,
    script:
        "../../scripts/figure.py"


PATHS_DECOMPOSITION = expand(RESULT["paths_exact"], task=PATHS_TASKS)
PATHS_DECOMPOSITION += figures("path_decomposition")
TARGETS += PATHS_DECOMPOSITION
# What the wing's decomposition claims read (san.paths.claims).
SUMMARY_INPUTS.update(paths_exact=expand(RESULT["paths_exact"], task=PATHS_TASKS))
