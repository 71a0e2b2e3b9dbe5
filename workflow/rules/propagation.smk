# Signal propagation at initialisation (beyond the paper): random blocks, float64, forward only, against Noci et al.
# (1/sqrt(L) branches), Giorlandino & Goldt (post-LN recursion, critical query-key variance), Wu et al. (masks and
# LayerNorm) and Nait Saada et al. (centred attention). One job per sweep; one figure job for all sweeps.
from san.propagation.spec import uses_prose

PROPAGATION = config["propagation"]
PROPAGATION_SWEEPS = list(PROPAGATION["sweeps"])
PROPAGATION_PROSE = PROPAGATION["prose_model"]


# One sweep's config slice: its grid, fixed values, depth and seeds, and the residual scalings it uses.
propagation_slice = lambda w: {
    **PROPAGATION["sweeps"][w.sweep],
    "residuals": PROPAGATION["residuals"],
    "finite_size": PROPAGATION["finite_size"],
}
# The rank-collapse model folder and token ids, only for a sweep with prose input.
propagation_inputs = lambda w: (
    {
        "model": RESULT["model"].format(model=PROPAGATION_PROSE, weights="init"),
        "inputs": RESULT["inputs"].format(model=PROPAGATION_PROSE, weights="init"),
    }
    if uses_prose(PROPAGATION["sweeps"][w.sweep])
    else {}
)


rule propagation_sweep:
    """One sweep of random transformer blocks at initialisation: cosine, relative residual, stable rank per layer."""
    input:
        unpack(propagation_inputs),
    output:
        RESULT["propagation"],
    log:
        "logs/propagation_sweep/{sweep}.log",
    benchmark:
        f"{RESULTS}/benchmarks/propagation_sweep/{{sweep}}.tsv"
    wildcard_constraints:
        sweep="|".join(PROPAGATION_SWEEPS),
    conda:
        TORCH_ENV
    threads: compute_threads("propagation_sweep")
    resources:
        **resources("propagation_sweep", gpu=compute_gpu("propagation_sweep")),
    params:
        sweep=propagation_slice,
        compute=compute_params("propagation_sweep"),
    script:
        "../../scripts/propagation_sweep.py"


rule propagation:
    """The signal-propagation sweeps at initialisation (beyond the paper) and their figures: cosine vs depth with
    the recursion, the beta transition, masks, T (the target of the whole experiment)."""
    input:
        **{s: RESULT["propagation"].format(sweep=s) for s in PROPAGATION_SWEEPS},
    output:
        **{f"propagation_{s}": figure_report(f"propagation_{s}", labels={"sweep": s}) for s in PROPAGATION_SWEEPS},
    log:
        "logs/propagation.log",
    benchmark:
        f"{RESULTS}/benchmarks/propagation.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("propagation"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


PROPAGATION_TARGETS = [RESULT["propagation"].format(sweep=s) for s in PROPAGATION_SWEEPS]
for _s in PROPAGATION_SWEEPS:
    PROPAGATION_TARGETS += figures(f"propagation_{_s}")
TARGETS += PROPAGATION_TARGETS
# What the wing's claims read (san.propagation.claims).
SUMMARY_INPUTS.update(propagation=expand(RESULT["propagation"], sweep=PROPAGATION_SWEEPS))
SUMMARY_PARAMS.update(sweeps=PROPAGATION_SWEEPS)
