# Theorem 2.2 (and its multi-head corollary) measured against its bound on pure SANs at random initialisation.
THEORY_MODEL = config["theory"]["embedding_model"]


rule theorem_sweep:
    """Residual per layer vs the paper's bound over the sweep (beta scale x d_qk x LayerNorm x inputs), float64."""
    input:
        model=RESULT["model"].format(model=THEORY_MODEL, weights="init"),
        inputs=RESULT["inputs"].format(model=THEORY_MODEL, weights="init"),
    output:
        RESULT["theorem"],
    log:
        "logs/theorem_sweep.log",
    benchmark:
        f"{RESULTS}/benchmarks/theorem_sweep.tsv"
    conda:
        TORCH_ENV
    threads: 2
    resources:
        **resources("theorem_sweep"),
    params:
        settings=config["theory"],
    script:
        "../../scripts/theorem_sweep.py"


rule theorem_bound:
    """Measured residual vs the nominal bound per layer (log scale) and the empirical exponent."""
    input:
        data=rules.theorem_sweep.output[0],
    output:
        figure_report("theorem_bound"),
    log:
        "logs/theorem_bound.log",
    benchmark:
        f"{RESULTS}/benchmarks/theorem_bound.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("theorem_bound"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


THEOREM = [RESULT["theorem"]] + figures("theorem_bound")
TARGETS += THEOREM
# What the wing's claims read (san.theory.claims).
SUMMARY_INPUTS.update(theorem=rules.theorem_sweep.output[0])
SUMMARY_PARAMS.update(theory={k: config["theory"][k] for k in ("float_floor", "limit")})


rule theorem:
    """Target: Theorem 2.2 measured against its bound (results/theorem.nc and its figure)."""
    input:
        THEOREM,
