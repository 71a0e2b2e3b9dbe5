"""GPU benchmark and check: the default workflow's GPU jobs on the visible GPU(s) against the same jobs on the CPU.

Runs, in temporary copies of the workflow, the jobs whose `compute.<rule>.device` the default config leaves to a GPU
(Fig. 2's forward passes, the attention products, the training series' checkpoints, the propagation sweeps, the
image encoders' forward passes), once with their device set to `cuda` (at most one job per GPU at a time) and twice
with it set to `cpu`: as they are, and with every input of their arithmetic (model weights as loaded, random draws of
`san.core.rng.randn`) moved by one unit in the last place, up or down at random (a seeded CPU generator). Then:

- prints the wall time of every rule on each device and the peak GPU memory of every GPU job (the `compute`
  attribute of its result);
- derives, per result variable (and variant), a relative and an absolute tolerance from how far the one-ulp
  perturbation moved it on the CPU (:func:`derive_tolerance`: :data:`SAFETY` times the largest relative move of
  the variable's values above ``sqrt(eps)`` of its largest, and the largest absolute move of the values below, each
  at least the float type's machine epsilon ``eps`` at the variable's scale). A GPU sums in another order, which
  moves each partial result by about one ulp: the same size of change, so the same tolerance fits it, whatever the
  variable's scale (relative residuals are normalised, Wu et al.'s `mu` is not);
- decides per variable whether it is compared at all: a variable whose tolerance allows a difference of
  :data:`MAX_RTOL` (a tenth) of its own size or more (:func:`derive_tolerance`'s ``looseness``: ``rtol``, or
  ``atol`` over the variable's largest magnitude) is one that a one-ulp change of the inputs already moves by
  about its own size, chaotic or ill-conditioned at these inputs: it is reported "not compared", with that move as
  the reason, and counts neither as a pass nor as a failure;
- compares every other result variable of the GPU and CPU runs with those tolerances (`|GPU - CPU| <= atol + rtol
  |CPU|` everywhere, NaN at the same places) and exits non-zero when one differs beyond them;
- measures whether the path-effectiveness training and the circle gain from a GPU: a few epochs of one task and one
  circle training on each device (their wall times side by side; the config keeps both on the CPU).

Without a GPU it says so and stops (exit 0): nothing to compare. ``--tolerances`` runs only the two CPU runs and
writes the tolerance table (``benchmarks/out/bench_gpu_tolerance.md``, quoted by docs/gpu.md: per variable its
moves, tolerances and whether it is compared), GPU or not.

    python benchmarks/bench_gpu.py [--cores 16] [--models bert-base-cased,gpt2] [--keep DIR] [--max-rtol 0.1]
    python benchmarks/bench_gpu.py --tolerances [--cores 2] [--models all-MiniLM-L6-v2] [--sweeps depth] [--vision m]
        [--series 0]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
import yaml
from _common import ROOT, copy_workflow, write_table

#: The rules the default config lets run on a GPU, and their result folders.
GPU_RULES = {
    "rank_collapse": "rank_collapse",
    "attention_products": "attention_products",
    "rank_collapse_series": "rank_collapse_series",
    "rank_collapse_hub_series": "rank_collapse_series",
    "propagation_sweep": "propagation",
    "vision_model": "vision",
    "sink_context": "phenomena/context",
}
SAFETY = 10.0
"""How many times the one-ulp perturbation's move a tolerance allows (:func:`derive_tolerance`): a GPU rounds
every partial sum once, like the perturbation moves every input once, and a factor of ten covers the error growing
with the number of rounded sums it compounds (its square root over the hundreds of sums of a 48-layer model)."""
MAX_RTOL = 0.1
"""The loosest tolerance, as a share of a variable's own size, at which a variable is still compared
(:func:`derive_tolerance`): a check that accepts a GPU value differing from the CPU's by a tenth of its size or more
(its first significant digit) cannot tell a GPU that computes the variable right from one that computes it wrong.
The perturbation moves such a variable by at least ``MAX_RTOL / SAFETY`` (1 %) of its size from a relative change
of its inputs of about 1e-16 (float64) or 1e-7 (float32): an amplification of 1e5 or more, which a quantity that
jumps at a threshold or an iteration that multiplies rounding layer after layer reaches. The bound sits in a gap of
four decades: in the published table (docs/gpu.md) the compared variables move by at most 6.4e-7 of their size,
those not compared by 0.018 to 130 times it. Such a variable is reported "not compared", with its move as the reason,
never as a match."""
EPS = {"float64": float(np.finfo(np.float64).eps), "float32": float(np.finfo(np.float32).eps),
       "bfloat16": 2.0**-7, "float16": float(np.finfo(np.float16).eps)}  # fmt: skip
"""Machine epsilon of each float type a job computes in: the smallest relative tolerance (a variable that the
perturbation did not move still rounds differently on a GPU)."""
ULP_SEED = 1234
"""Seed of the CPU generator that picks each perturbed input's direction (one ulp up or down)."""
ULP_HOOK = """\
# Written by benchmarks/bench_gpu.py: moves every input of a job's arithmetic by one ulp (module docstring there).
import os

if os.environ.get("SAN_ULP_SEED"):
    import torch

    import san.core.rng as _rng
    import san.models.load as _loading

    _signs = torch.Generator(device="cpu").manual_seed(int(os.environ["SAN_ULP_SEED"]))

    def _nudge(t):
        if not t.is_floating_point():
            return t
        up = torch.randint(0, 2, t.shape, generator=_signs).bool().to(t.device)
        inf = torch.tensor(float("inf"), dtype=t.dtype, device=t.device)
        return torch.nextafter(t, torch.where(up, inf, -inf))

    _randn = _rng.randn

    def _randn_nudged(shape, generator, dtype, device="cpu"):
        return _nudge(_randn(shape, generator, dtype, "cpu")).to(device)

    _load = _loading.load_model

    def _load_nudged(*args, **kwargs):
        model = _load(*args, **kwargs)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(_nudge(p))
        return model

    _rng.randn = _randn_nudged
    _loading.load_model = _load_nudged
    print("sitecustomize: inputs moved by one ulp", flush=True)
"""
"""A ``sitecustomize`` module that, on the path of a job's interpreter with ``SAN_ULP_SEED`` set, moves every
float input of the GPU rules' arithmetic by one ulp before the job's modules bind them."""


def gpu_count() -> int:
    """GPUs torch sees here (0 without a CUDA build or a driver)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def with_devices(cfg: dict, device: str) -> dict:
    """``cfg`` with every GPU rule's device set to ``device``."""
    out = copy.deepcopy(cfg)
    for rule in GPU_RULES:
        out["compute"][rule]["device"] = device
    return out


def targets(cfg: dict) -> list[str]:
    """The result files of the GPU rules' jobs: per model of ``rank_collapse.models`` its rank collapse and attention
    products, the offline training series (every seed of ``series.seeds``, one file) and each hub series of
    ``series.hub_models``, per propagation sweep its result, per model of ``vision.models`` its result, and per decoder
    measured along the context (``phenomena.context``) its context-length result."""
    from san.rank_collapse.spec import context_models

    models = cfg["rank_collapse"]["models"]
    products = cfg["attention_products"]["models"]
    series = cfg.get("series", {})
    out = [f"results/rank_collapse/{m}.nc" for m in models]
    out += [f"results/attention_products/{m}.nc" for m in (models if products is None else products) if m in models]
    out += ["results/rank_collapse_series.nc"] if series.get("seeds") else []
    out += [f"results/rank_collapse_series/{m}.nc" for m in series.get("hub_models") or []]
    out += [f"results/propagation/{s}.nc" for s in cfg["propagation"]["sweeps"]]
    out += [f"results/vision/{m}.nc" for m in cfg.get("vision", {}).get("models", [])]
    return out + [f"results/phenomena/context/{m}.nc" for m in context_models(cfg) if m in models]


def run(wf: Path, cfg: dict, goals: list[str], cores: int, extra: list[str], ulp_seed: int | None = None) -> float:
    """Run ``goals`` of ``cfg`` in the workflow copy ``wf``; with ``ulp_seed``, every job's inputs moved by one ulp
    (:data:`ULP_HOOK`). Returns the wall seconds."""
    (wf / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(wf)}
    if ulp_seed is not None:
        hook = wf.parent / f"{wf.name}_ulp_hook"
        hook.mkdir(parents=True, exist_ok=True)
        (hook / "sitecustomize.py").write_text(ULP_HOOK)
        env |= {"PYTHONPATH": f"{wf}{os.pathsep}{hook}", "SAN_ULP_SEED": str(ulp_seed)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), *goals, *extra], cwd=wf, check=True,
                   env=env)  # fmt: skip
    return time.perf_counter() - start


def rule_times(wf: Path) -> dict[str, float]:
    """Summed wall seconds per rule from the jobs' benchmark files."""
    out: dict[str, float] = {}
    for tsv in (wf / "results" / "benchmarks").rglob("*.tsv"):
        rule = tsv.relative_to(wf / "results" / "benchmarks").parts[0].removesuffix(".tsv")
        out[rule] = out.get(rule, 0.0) + float(pd.read_csv(tsv, sep="\t")["s"].iloc[0])
    return out


def job_dtype(cfg: dict, rel: str, variable_variant: str | None) -> str:
    """The float type a result was computed in: the model's own dtype, else the variant's; float64 otherwise. A
    training series is measured with the rank-collapse settings."""
    parts = Path(rel).parts
    kind = Path(parts[1]).stem  # results/rank_collapse_series.nc: the offline series, one file
    if kind == "phenomena":  # the context-length runs: the unmodified model, in the transformer variant's dtype
        kind, variable_variant = "rank_collapse", "transformer"
    if kind in ("rank_collapse", "attention_products", "vision", "rank_collapse_series"):
        model = Path(rel).stem
        own = cfg["models"].get(model, {}).get("dtype")
        if own:
            return own
        if kind == "attention_products":
            return cfg["attention_products"]["dtype"]
        dtypes = cfg["rank_collapse" if kind == "rank_collapse_series" else kind]["dtype"]
        if isinstance(dtypes, str):
            return dtypes
        return dtypes.get(variable_variant, "float32") if variable_variant else "float32"
    return "float64"


def variables(rel: str, a: xr.Dataset, b: xr.Dataset, cfg: dict):
    """The float variables of one result in two runs, split by variant: ``(label, dtype, a's values, b's values)``
    with the float type the job computed that variable in."""
    for name in a.data_vars:
        x, y = a[name], b[name]
        if x.dtype.kind != "f":
            continue
        groups = [(v, x.sel(variant=v), y.sel(variant=v)) for v in x["variant"].values] if (
            "variant" in x.dims
        ) else [(None, x, y)]  # fmt: skip
        for variant, xv, yv in groups:
            dtype = job_dtype(cfg, rel, str(variant) if variant is not None else None)
            label = name if variant is None else f"{name}[{variant}]"
            yield label, dtype, np.asarray(xv.values, dtype=float), np.asarray(yv.values, dtype=float)


def derive_tolerance(
    reference: np.ndarray, perturbed: np.ndarray, eps: float, safety: float = SAFETY, max_rtol: float = MAX_RTOL
) -> dict:
    """Relative and absolute tolerances of one variable from its move under a one-ulp perturbation of the inputs,
    and whether the variable is compared at all.

    Of the values finite in both runs, those of at least ``sqrt(eps)`` times the largest magnitude (the variable's
    ``scale``) give ``rel_move``, the largest ``|x' - x| / |x|``; the smaller ones, which cancellation has left at
    the rounding of the scale, give ``abs_move``, the largest ``|x' - x|``. Then
    ``rtol = safety * max(rel_move, eps)`` and ``atol = safety * max(abs_move, eps * scale)``: every value of the
    perturbed run is within ``(atol + rtol |x|) / safety`` of the reference, and a value the perturbation did not
    move is still allowed the rounding of the float type at the variable's scale. A variable with no finite value
    gets ``rtol = safety * eps`` and ``atol = 0`` (it is compared by its NaN mask).

    ``looseness = max(rtol, atol / max(scale, abs_move))`` is the largest difference the tolerance accepts as a share
    of the variable's size; ``compared`` is ``looseness < max_rtol`` (:data:`MAX_RTOL`). A variable that fails it moved
    under the perturbation by ``looseness / safety`` of its size or more: ``reason`` says so (None when compared)."""
    x, y = np.asarray(reference, dtype=float), np.asarray(perturbed, dtype=float)
    both = np.isfinite(x) & np.isfinite(y)
    size, move = np.abs(x[both]), np.abs(y[both] - x[both])
    scale = float(size.max()) if both.any() else 0.0
    large = (size >= np.sqrt(eps) * scale) & (size > 0)
    rel_move = float(np.max(move[large] / size[large])) if large.any() else 0.0
    abs_move = float(np.max(move[~large])) if (~large).any() else 0.0
    rtol = safety * max(rel_move, eps)
    atol = safety * max(abs_move, eps * scale) if both.any() else 0.0
    size_of = max(scale, abs_move)  # a value the perturbation lifted above the scale is measured by its move
    looseness = max(rtol, atol / size_of if size_of > 0 else 0.0)
    compared = looseness < max_rtol
    reason = None if compared else (
        f"a one-ulp change of the inputs moves it by up to {looseness / safety:.2g} x its size (tolerance "
        f"{looseness:.2g} x its size >= {max_rtol:g}): chaotic or ill-conditioned here, not comparable value by value"
    )  # fmt: skip
    return {"rel_move": rel_move, "abs_move": abs_move, "scale": scale, "rtol": rtol, "atol": atol,
            "looseness": looseness, "compared": compared, "reason": reason}  # fmt: skip


def tolerances(
    cpu: Path, ulp: Path, cfg: dict, goals: list[str], safety: float = SAFETY, max_rtol: float = MAX_RTOL
) -> dict[tuple, dict]:
    """Per (result, variable label): the float type and :func:`derive_tolerance` (tolerances, and whether it is
    compared) of the CPU run ``cpu`` against the same jobs with their inputs moved by one ulp (``ulp``)."""
    out = {}
    for rel in goals:
        with xr.open_dataset(cpu / rel) as a, xr.open_dataset(ulp / rel) as b:
            for label, dtype, x, y in variables(rel, a, b, cfg):
                out[(rel, label)] = {"dtype": dtype, **derive_tolerance(x, y, EPS[dtype], safety, max_rtol)}
    return out


def within(reference: np.ndarray, other: np.ndarray, rtol: float, atol: float) -> tuple[bool, float, float]:
    """Whether ``|other - reference| <= atol + rtol |reference|`` wherever both are finite, with NaN (and
    infinities) at the same places; the largest ``|other - reference|`` and the largest share of the allowed
    difference used (above 1: beyond the tolerance)."""
    x, y = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    same_mask = np.array_equal(np.isnan(x), np.isnan(y)) and np.array_equal(np.isinf(x), np.isinf(y))
    same_inf = bool(np.all(x[np.isinf(x)] == y[np.isinf(x)])) if same_mask else False
    both = np.isfinite(x) & np.isfinite(y)
    gap = np.abs(y[both] - x[both])
    allowed = atol + rtol * np.abs(x[both])
    diff = float(gap.max()) if gap.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = float(np.max(np.where(gap > 0, gap / allowed, 0.0))) if gap.size else 0.0
    return same_mask and same_inf and share <= 1.0, diff, share


def compare(cpu: Path, gpu: Path, cfg: dict, goals: list[str], tolerance: dict[tuple, dict]) -> list[dict]:
    """Per result, variable (and variant), with the tolerances of :func:`tolerances`: ``result``, ``variable``,
    ``dtype``, ``max_abs_diff`` (``max |GPU - CPU|``), the tolerance (``rtol``, ``atol``, ``looseness``),
    ``compared`` and ``within``: whether it is within the tolerance, None for a variable not compared (with its
    ``reason``), whose ``share`` of the tolerance used is None too. A variable without a tolerance is an error."""
    rows = []
    for rel in goals:
        with xr.open_dataset(cpu / rel) as a, xr.open_dataset(gpu / rel) as b:
            for label, dtype, x, y in variables(rel, a, b, cfg):
                if (rel, label) not in tolerance:
                    raise KeyError(f"no tolerance for {rel} {label}: the perturbed CPU run lacks it")
                tol = tolerance[(rel, label)]
                ok, diff, share = within(x, y, tol["rtol"], tol["atol"])
                judged = tol["compared"]
                rows.append({"result": rel, "variable": label, "dtype": dtype, "max_abs_diff": diff,
                             "share": share if judged else None, "rtol": tol["rtol"], "atol": tol["atol"],
                             "looseness": tol["looseness"], "move": tol["looseness"] / SAFETY, "compared": judged,
                             "within": ok if judged else None, "reason": tol["reason"]})  # fmt: skip
    return rows


def print_comparable(tolerance: dict[tuple, dict]) -> None:
    """Print which variables are compared (with their tolerances) and which are not, each with its reason
    (:func:`derive_tolerance`)."""
    compared = [k for k, t in tolerance.items() if t["compared"]]
    print(f"compared ({len(compared)} of {len(tolerance)} variables):")
    for rel, label in compared:
        t = tolerance[(rel, label)]
        print(f"  {rel} {label} ({t['dtype']}): rtol {t['rtol']:.1e}, atol {t['atol']:.1e}")
    print(f"not compared ({len(tolerance) - len(compared)}):")
    for (rel, label), t in tolerance.items():
        if not t["compared"]:
            print(f"  {rel} {label} ({t['dtype']}): {t['reason']}")


def tolerance_rows(tolerance: dict[tuple, dict]) -> list[dict]:
    """The tolerance table's rows: result, variable, float type, the moves under the perturbation, the variable's
    scale, rtol, atol, the looseness and the move it stands for (:func:`derive_tolerance`)."""
    keep = ("dtype", "rel_move", "abs_move", "scale", "rtol", "atol", "looseness")
    return [{"result": rel, "variable": label, **{k: t[k] for k in keep}, "move": t["looseness"] / SAFETY}
            for (rel, label), t in tolerance.items()]  # fmt: skip


COMPARED_CELL = "{looseness:<{max_rtol}?yes|no: a one-ulp change of the inputs moves it by up to {move:.2g} x its size}"
"""The cell that says whether a variable is compared, rendered from its numbers (:func:`derive_tolerance`)."""
TOLERANCE_COLUMNS = [
    ("result", "{result}"), ("variable", "{variable}"), ("dtype", "{dtype}"),
    ("relative move", "{rel_move:.1e}"), ("absolute move (small values)", "{abs_move:.1e}"),
    ("rtol", "{rtol:.1e}"), ("atol", "{atol:.1e}"), ("compared", COMPARED_CELL),
]  # fmt: skip
"""The tolerance table's columns: (title, cell template) (``_common.write_table``)."""
TOLERANCE_NOTE = (
    "Safety factor {safety:g}. A variable is compared when its tolerance allows less than {max_rtol:g} x its size "
    "(rtol, and atol over its largest magnitude): one that a one-ulp change of the inputs moves by about its own "
    "size is chaotic or ill-conditioned at these inputs and is not compared."
)


def write_tolerances(tolerance: dict[tuple, dict], max_rtol: float) -> Path:
    """The tolerance table (``benchmarks/out/bench_gpu_tolerance.md``) with its data; returns the table's path."""
    return write_table("bench_gpu_tolerance", TOLERANCE_COLUMNS, tolerance_rows(tolerance),
                       values={"safety": SAFETY, "max_rtol": max_rtol}, note=TOLERANCE_NOTE)  # fmt: skip


def training_gain(base: Path, cfg: dict, cores: int) -> list[tuple[str, float, float]]:
    """Wall seconds of a short path-effectiveness training (sorting, 3 epochs) and one circle training on the CPU and
    on a GPU: whether the small models gain from a GPU."""
    small = copy.deepcopy(cfg)
    small["paths"]["tasks"] = ["sorting"]
    small["paths"]["sorting"]["train"]["epochs"] = 3
    small["circle"].update(hidden_dims=[32], seeds=[0], seeds_per_job=1)
    goals = ["results/paths/sorting/model.safetensors", "results/circle/SAN/d32/seeds0.nc"]
    out = {}
    for device in ("cpu", "cuda"):
        trial = copy.deepcopy(small)
        trial["compute"]["paths_train"]["device"] = device
        trial["compute"]["circle_train"]["device"] = device
        wf = copy_workflow(base / f"train_{device}")
        run(wf, trial, goals, cores, ["--resources", "gpu=1"])
        out[device] = rule_times(wf)
    return [(rule, out["cpu"].get(rule, float("nan")), out["cuda"].get(rule, float("nan"))) for rule in
            ("paths_train", "circle_train")]  # fmt: skip


def measured_tolerances(
    base: Path, cfg: dict, goals: list[str], cores: int, max_rtol: float = MAX_RTOL
) -> tuple[Path, dict[tuple, dict]]:
    """Run the GPU rules' jobs on the CPU as they are and with their inputs moved by one ulp, in two workflow
    copies under ``base``; return the first copy and the tolerances derived from the two (:func:`tolerances`).
    A perturbation that moved nothing at all did not reach the jobs: an error."""
    cpu_cfg = with_devices(cfg, "cpu")
    wf_cpu, wf_ulp = copy_workflow(base / "cpu"), copy_workflow(base / "cpu_ulp")
    run(wf_cpu, cpu_cfg, goals, cores, [])
    run(wf_ulp, cpu_cfg, goals, cores, [], ulp_seed=ULP_SEED)
    tolerance = tolerances(wf_cpu, wf_ulp, cfg, goals, max_rtol=max_rtol)
    if not any(t["rel_move"] or t["abs_move"] for t in tolerance.values()):
        raise RuntimeError(f"the one-ulp perturbation moved no result in {wf_ulp}: its hook did not reach the jobs")
    print_comparable(tolerance)
    return wf_cpu, tolerance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=4, help="cores of each run (default 4)")
    parser.add_argument("--models", help="comma-separated models of rank_collapse.models (default: all)")
    parser.add_argument("--sweeps", help="comma-separated propagation sweeps (default: all)")
    parser.add_argument("--vision", help="comma-separated image encoders of vision.models (default: all)")
    parser.add_argument("--series", help="comma-separated seeds of the offline training series (default: all)")
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="config (default config.yaml)")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder")
    parser.add_argument("--tolerances", action="store_true", help="only derive the tolerances (two CPU runs)")
    parser.add_argument("--max-rtol", type=float, default=MAX_RTOL, help=f"the loosest tolerance, as a share of a "
                        f"variable's size, at which it is compared (default {MAX_RTOL}; MAX_RTOL)")  # fmt: skip
    args = parser.parse_args(argv)
    n_gpus = gpu_count()
    if not n_gpus and not args.tolerances:
        print("no GPU is visible (torch.cuda.is_available() is False): nothing to benchmark or compare")
        return 0
    from san.experiments import check_config

    cfg = yaml.safe_load(args.config.read_text())
    check_config(cfg, ROOT / "workflow" / "schemas")  # defaults filled in
    if args.models:
        models = args.models.split(",")
        cfg["rank_collapse"]["models"] = models
        products = cfg["attention_products"]["models"]
        if products is not None:  # the attention products of the models kept (the config check requires it)
            cfg["attention_products"]["models"] = [m for m in products if m in models]
    if args.sweeps:
        cfg["propagation"]["sweeps"] = {s: cfg["propagation"]["sweeps"][s] for s in args.sweeps.split(",")}
    if args.vision:
        cfg["vision"]["models"] = args.vision.split(",")
    if args.series:
        cfg["series"]["seeds"] = [int(seed) for seed in args.series.split(",")]
    goals = targets(cfg)
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    if args.tolerances:
        _, tolerance = measured_tolerances(base, cfg, goals, args.cores, args.max_rtol)
        write_tolerances(tolerance, args.max_rtol)
        return 0
    import torch

    wf_gpu = copy_workflow(base / "gpu")
    wall_gpu = run(wf_gpu, with_devices(cfg, "cuda"), goals, args.cores, ["--resources", f"gpu={n_gpus}"])
    start = time.perf_counter()
    wf_cpu, tolerance = measured_tolerances(base, cfg, goals, args.cores, args.max_rtol)
    wall_cpu = time.perf_counter() - start
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(n_gpus))
    print(f"\n{n_gpus} GPU(s): {names}; end to end: GPU run {wall_gpu:.0f} s, two CPU runs {wall_cpu:.0f} s")

    times_gpu, times_cpu = rule_times(wf_gpu), rule_times(wf_cpu)
    rows = [(r, f"{times_cpu.get(r, 0):.1f}", f"{times_gpu.get(r, 0):.1f}") for r in sorted(times_gpu)]
    print(pd.DataFrame(rows, columns=["rule", "CPU s", "GPU s"]).to_string(index=False))
    memory = []
    for rel in goals:
        with xr.open_dataset(wf_gpu / rel) as ds:
            attrs = json.loads(ds.attrs.get("compute", "{}"))
        memory.append((rel, attrs.get("gpu", "cpu"), attrs.get("gpu_peak_memory_mib", float("nan"))))
    print("\npeak GPU memory per job (MiB):")
    print(pd.DataFrame(memory, columns=["result", "device", "peak MiB"]).to_string(index=False))

    checks = compare(wf_cpu, wf_gpu, cfg, goals, tolerance)
    print("\nGPU against CPU:")
    print(pd.DataFrame(checks).drop(columns=["reason"]).to_string(index=False))
    gains = training_gain(base, cfg, args.cores)
    print("\nsmall models (wall s): " + "; ".join(f"{r}: CPU {c:.1f}, GPU {g:.1f}" for r, c, g in gains))
    write_tolerances(tolerance, args.max_rtol)
    values = {"safety": SAFETY, "max_rtol": args.max_rtol, "gpus": n_gpus, "names": names,
              **{f"{r}_{d}_s": t for r, c, g in gains for d, t in (("cpu", c), ("gpu", g))}}  # fmt: skip
    write_table("bench_gpu", GPU_COLUMNS, checks, values=values, note=GPU_NOTE)
    return verdict(checks)


def verdict(checks: list[dict]) -> int:
    """Print what the check found and return the exit status: 1 when a compared variable differs beyond its
    tolerance. A variable not compared is listed with its reason and counts neither as a match nor as a failure."""
    bad = [c for c in checks if c["compared"] and not c["within"]]
    skipped = [c for c in checks if not c["compared"]]
    for c in skipped:
        print(f"not compared: {c['result']} {c['variable']}: {c['reason']}")
    for c in bad:
        print(f"beyond its tolerance: {c['result']} {c['variable']} (max |GPU - CPU| {c['max_abs_diff']:.1e}, "
              f"{c['share']:.2g} x the tolerance)", file=sys.stderr)  # fmt: skip
    compared = len(checks) - len(skipped)
    if bad:
        print(f"\n{len(bad)} of {compared} compared result(s) differ beyond their tolerance; {len(skipped)} not "
              f"compared", file=sys.stderr)  # fmt: skip
        return 1
    print(f"\n{compared} of {len(checks)} variables compared, every one within its tolerance; {len(skipped)} not "
          f"compared (a one-ulp change of the inputs moves them by about their size)")  # fmt: skip
    return 0


GPU_COLUMNS = [
    ("result", "{result}"), ("variable", "{variable}"), ("dtype", "{dtype}"), ("max abs diff", "{max_abs_diff:.1e}"),
    ("share of tolerance", "{share:.2f}"), ("rtol", "{rtol:.0e}"), ("atol", "{atol:.0e}"),
    ("compared", COMPARED_CELL), ("within", "{within:?yes|no}"),
]  # fmt: skip
"""The GPU-against-CPU table's columns (a variable not compared has no share and no verdict: '-')."""
GPU_NOTE = (
    "{gpus} x {names}; small models: paths_train CPU {paths_train_cpu_s:.1f} s, GPU {paths_train_gpu_s:.1f} s; "
    "circle_train CPU {circle_train_cpu_s:.1f} s, GPU {circle_train_gpu_s:.1f} s. " + TOLERANCE_NOTE
)


if __name__ == "__main__":
    sys.exit(main())
