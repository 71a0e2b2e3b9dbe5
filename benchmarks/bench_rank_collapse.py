"""Benchmark of the rank-collapse part of the default run: wall time and peak memory per job and per model.

Runs the rank-collapse rules of the default config (or ``--config FILE``) from scratch in a temporary copy of the
workflow (model acquisition, tokenisation, the four variants of every model, the attention products), then prints, per
job and summed per model, the wall time and peak resident memory that Snakemake's ``benchmark:`` files recorded,
and the end-to-end wall time. Target: the whole rank-collapse part under 8 minutes on a 2-core CPU.

Then the floor of the analysis jobs: the matrix multiply-adds of every model's variants, counted by torch's
``FlopCounterMode`` on one sequence of each weight set through the same code path as the job (``linear``, ``bmm``,
``matmul``; per-sequence forwards, so the count scales exactly with the sequences), by dtype, against this machine's
single-thread float32 and float64 matrix-multiply rates; and the start-up of a job (the CPU time of importing the
analysis code in a fresh interpreter). ``--floor-of DIR`` prints only this for a run kept with ``--keep DIR``.

With ``--memory``: models larger than a memory budget (``compute.rank_collapse.memory_budget_mb``). Random Llama-style
models are written to disk block by block (float32 safetensors, one shard per block): a model of about three billion
parameters (11.7 GB) and a smaller one (0.13 B). In a fresh interpreter per run, the job's code
(:func:`san.rank_collapse.experiment.run`) reports its peak resident memory (the kernel's high-water mark, as
Snakemake's ``benchmark:`` files record it) and wall time. Rows: on the smaller model, the four variants streamed
under half its weights against the same job held in memory (the numbers must be identical), and the wall time of
one variant streamed against held (best of ``--repeats`` alternating runs, the checkpoint in the page cache: the cost
of reading and converting each block on every forward pass); a bfloat16 load from the float32 checkpoint, tensor by
tensor against transformers' ``from_pretrained``; the 3 B model streamed under ``--budget-gb`` (3 GiB), and its
bfloat16 load. Targets: a streamed job's peak <= 1.25 x its budget (the budget holds the weights; the rest is the
interpreter and the activations), a bfloat16 load from float32 <= 1.3 x the bfloat16 weights.

    python benchmarks/bench_rank_collapse.py [--cores 2] [--config config.yaml] [--keep DIR] [--floor-of DIR]
    python benchmarks/bench_rank_collapse.py --memory [--budget-gb 3] [--sequences 2] [--tokens 64] [--skip-big]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from _common import ROOT, copy_workflow, matmul_rate, rank_collapse_results, write_table

DTYPES = {"f32": torch.float32, "f64": torch.float64}


def import_seconds() -> float:
    """CPU seconds (user + system) of importing the analysis job's code in a fresh interpreter, best of three."""
    best = float("inf")
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import san.rank_collapse.experiment"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def multiply_adds(wf: Path, cfg: dict) -> pd.DataFrame:
    """Matrix multiply-adds of each model's analysis job by dtype: every variant of every weight set in its dtype,
    counted on the first sequence and scaled to all of them."""
    from torch.utils.flop_counter import FlopCounterMode

    from san.core.device import resolve_dtype
    from san.core.storage import read_netcdf
    from san.models.load import load_model
    from san.rank_collapse.experiment import control_tokens, residuals_by_variant
    from san.rank_collapse.spec import variant_dtypes, variants_by_dtype

    rc = cfg["rank_collapse"]
    rows = []
    for name in rc["models"]:
        spec = cfg["models"][name]
        dtypes = variant_dtypes(spec.get("dtype", rc["dtype"]), rc["variants"])
        macs = {"float32": 0.0, "float64": 0.0}
        for weights in (w for w in ("init", "pretrained") if spec.get(w)):
            ids = torch.as_tensor(read_netcdf(wf / f"results/inputs/{name}/{weights}.nc")["input_ids"].values)
            for dtype_name, own in variants_by_dtype(dtypes).items():
                model = load_model(wf / f"results/models/{name}/{weights}", spec["family"], resolve_dtype(dtype_name))
                with FlopCounterMode(display=False) as counter:
                    control = control_tokens(1, ids.shape[1], rc["control_token_seed"])
                    residuals_by_variant(
                        model, spec["family"], ids[:1], own, 1, rc["albert_no_mlp"], control_token=control
                    )
                macs[dtype_name] += counter.get_total_flops() / 2 * ids.shape[0]
        rows.append({"model": name, "GMAC f32": macs["float32"] / 1e9, "GMAC f64": macs["float64"] / 1e9})
    return pd.DataFrame(rows).set_index("model")


def print_floor(wf: Path, cfg: dict, table: pd.DataFrame, cores: int) -> None:
    """The analysis jobs' arithmetic floor against their measured wall times, and the start-up every job pays."""
    # a base-size encoder's MLP on 16 sequences of 128 tokens
    rates = {name: matmul_rate(2048, 768, 3072, repeats=3, dtype=dtype) for name, dtype in DTYPES.items()}
    counts = multiply_adds(wf, cfg)
    counts["floor s"] = counts["GMAC f32"] * 1e9 / rates["f32"] + counts["GMAC f64"] * 1e9 / rates["f64"]
    jobs = table[table["job"].str.startswith("rank_collapse/")]
    measured = dict(zip(jobs["job"].str.removeprefix("rank_collapse/"), jobs["wall_s"], strict=True))
    counts["job s"] = [measured.get(m, float("nan")) for m in counts.index]
    counts["floor share"] = counts["floor s"] / counts["job s"]
    print(
        f"\nanalysis jobs: matrix multiply-adds (FlopCounterMode) against the single-thread rates "
        f"{rates['f32'] / 1e9:.1f} (float32) and {rates['f64'] / 1e9:.1f} (float64) GMAC/s"
    )
    print(counts.to_string(float_format=lambda x: f"{x:.2f}"))
    startup = import_seconds()
    torch_jobs = int(table["job"].str.match(r"(acquire_model|rank_collapse|attention_products)/").sum())
    arithmetic = counts["floor s"].sum()
    print(
        f"arithmetic of the analysis jobs: {arithmetic:.0f} s of {counts['job s'].sum():.0f} s measured; start-up "
        f"(importing torch and transformers' model code): {startup:.1f} CPU s x {torch_jobs} jobs = "
        f"{startup * torch_jobs:.0f} s; together {(arithmetic + startup * torch_jobs) / cores:.0f} s on {cores} cores, "
        f"against {table['wall_s'].sum() / cores:.0f} s for all of the part's job wall"
    )


def job_table(wf: Path) -> pd.DataFrame:
    """Wall time and peak memory of every job, from the run's Snakemake benchmark files."""
    rows = []
    for tsv in sorted((wf / "results" / "benchmarks").rglob("*.tsv")):
        df = pd.read_csv(tsv, sep="\t")
        job = str(tsv.relative_to(wf / "results" / "benchmarks")).removesuffix(".tsv")
        rows.append({"job": job, "wall_s": df["s"].iloc[0], "peak_rss_mb": df["max_rss"].iloc[0]})
    return pd.DataFrame(rows).sort_values("job")


#: a Llama-style architecture of about three billion parameters (11.7 GB in float32): width 3072, 28 blocks with
#: grouped key/value heads, the vocabulary of the bundled tokenizer that every ``init`` model gets
LLAMA_3B = {
    "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 24, "num_key_value_heads": 8,
    "intermediate_size": 8192, "max_position_embeddings": 2048, "vocab_size": 30522,
}  # fmt: skip
#: the smaller model on which the streamed numbers are compared with the in-memory path and the time of streaming
#: against holding is measured: the same shape at width 1024 and 8 blocks (about 0.13 B parameters)
LLAMA_SMALL = {**LLAMA_3B, "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 8,
               "num_key_value_heads": 4, "intermediate_size": 2816}  # fmt: skip
TARGET_S = 480.0
"""Target of the rank-collapse part: its end-to-end wall time on a 2-core CPU, in seconds."""
PART_COLUMNS = [
    ("model", "{model}"), ("job wall (sum)", "{wall_s:.0f} s"), ("peak memory", "{peak_rss_bytes:.1f@GiB} GiB"),
    ("end to end", "{end_to_end_s:.0f} s"), ("target < {target_s:g} s", "{end_to_end_s:<{target_s}?met|NOT met}"),
]  # fmt: skip
"""The part's table: per model the sum of its jobs' wall times and their largest peak RSS (Snakemake's
``benchmark:`` files, MiB there), then the whole part: every job, and the end-to-end wall time against the target."""
PART_NOTE = (
    "`python benchmarks/bench_rank_collapse.py`: the `fig2` jobs of the default config; target < {target_s:g} s."
)
#: targets of the memory benchmark: a streamed job's peak resident memory against its budget, and a bfloat16 load
#: from a float32 checkpoint against the bfloat16 weights
TARGET_STREAMED = 1.25
TARGET_CONVERTED = 1.3

#: one job in a fresh interpreter: the rank-collapse job's code (:func:`san.rank_collapse.experiment.run`) on the
#: model folder argv[1] in dtype argv[2], variants argv[3] (comma-separated), argv[4] sequences of argv[5] tokens,
#: budget argv[6] MB ("none": held in memory); prints its resident memory after the imports and its high-water mark
#: (bytes), the wall time of the run and the results (as lists, for the comparison of streamed and held)
_JOB = """
import json, sys, time
import torch, xarray as xr
from san.core.device import JobPlace
from san.rank_collapse.experiment import run

def status_bytes(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

folder, dtype, variants, sequences, tokens, budget = sys.argv[1:7]
start = status_bytes("VmRSS")
ids = torch.randint(5, 30000, (int(sequences), int(tokens)), generator=torch.Generator().manual_seed(0))
inputs = {"init": xr.Dataset({"input_ids": (("sample", "token"), ids.numpy())}, attrs={"input_sha256": "bench"})}
settings = {"variants": variants.split(","), "dtype": dtype, "batch_size": int(sequences),
            "albert_no_mlp": "identity_linears", "control_token_seed": 0, "massive_token_factor": 10.0}
t = time.perf_counter()
ds = run("llama", {"init": folder}, inputs, settings, JobPlace(budget_mb=None if budget == "none" else float(budget)))
wall = time.perf_counter() - t
print(json.dumps({"start_bytes": start, "peak_bytes": status_bytes("VmHWM"), "wall_s": wall,
                  "values": {k: ds[k].values.tolist() for k in ds.data_vars}}))
"""

#: loading alone in a fresh interpreter: the model folder argv[1] in dtype argv[2], tensor by tensor (``san``) or
#: by transformers' ``from_pretrained`` (``transformers``, argv[3]); prints the memory and the weights (bytes)
_LOAD = """
import json, sys
import torch

def status_bytes(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

folder, dtype, how = sys.argv[1], getattr(torch, sys.argv[2]), sys.argv[3]
from transformers import LlamaModel
from san.models.load import load_model
start = status_bytes("VmRSS")
if how == "san":
    model = load_model(folder, "llama", dtype)
else:
    model = LlamaModel.from_pretrained(folder, dtype=dtype)
weights = sum(p.numel() * p.element_size() for p in model.parameters())
print(json.dumps({"start_bytes": start, "peak_bytes": status_bytes("VmHWM"), "weights_bytes": weights}))
"""


def write_blockwise(arch: dict, seed: int, folder: Path) -> int:
    """A random initialisation of the Llama architecture ``arch`` written as an ``init`` model folder one block at a
    time (one safetensors shard per block and one for the rest, with their index), so that writing a model larger
    than memory holds one block: weight matrices N(0, initializer_range^2) from a CPU generator seeded with
    ``seed``, norms at one (transformers' Llama initialisation). Returns the number of parameters."""
    from accelerate import init_empty_weights
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaModel

    from san.models.folders import write_manifest

    if (folder / "manifest.json").exists():
        return int(json.loads((folder / "manifest.json").read_text())["parameters"])
    folder.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(**arch)
    with init_empty_weights():
        skeleton = LlamaModel(config)
    groups: dict[str, dict[str, tuple[int, ...]]] = {}
    for name, p in skeleton.named_parameters():
        group = ".".join(name.split(".")[:2]) if name.startswith("layers.") else "rest"
        groups.setdefault(group, {})[name] = tuple(p.shape)
    generator = torch.Generator().manual_seed(seed)
    weight_map, count = {}, 0
    for i, shapes in enumerate(groups.values()):
        tensors = {}
        for name, shape in shapes.items():
            if len(shape) == 1:
                tensors[name] = torch.ones(shape)
            else:
                tensors[name] = torch.empty(shape).normal_(0.0, config.initializer_range, generator=generator)
            count += tensors[name].numel()
        shard = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file(tensors, folder / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
        del tensors
    index = {"metadata": {"total_size": count * 4}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    config.architectures = ["LlamaModel"]
    config.save_pretrained(folder)
    written_by = "benchmarks/bench_rank_collapse.py, block by block"
    manifest = {"source": "init", "family": "llama", "seed": seed, "architecture": arch, "parameters": count}
    write_manifest(folder, {**manifest, "written_by": written_by})
    return count


def _declared_bytes(folder: Path, dtype: str, sequences: int, tokens: int, budget_mb: float | None) -> float:
    """The memory the workflow declares for this job (:func:`san.core.memory.job_memory_mb`, MiB), in bytes."""
    from san.core.memory import job_memory_mb, model_size

    return job_memory_mb(model_size(folder), [dtype], tokens, sequences, budget_mb) * 2**20


def _job(folder: Path, dtype: str, variants: list[str], sequences: int, tokens: int, budget: float | None) -> dict:
    """:data:`_JOB` in a fresh interpreter; its JSON line."""
    argv = [
        str(folder),
        dtype,
        ",".join(variants),
        str(sequences),
        str(tokens),
        "none" if budget is None else str(budget),
    ]
    return _fresh(_JOB, argv)


def _load(folder: Path, dtype: str, how: str) -> dict:
    """:data:`_LOAD` in a fresh interpreter; its JSON line."""
    return _fresh(_LOAD, [str(folder), dtype, how])


def _fresh(code: str, argv: list[str]) -> dict:
    """``code`` run with ``argv`` in a fresh interpreter; its last output line as JSON (its errors raised)."""
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the run {argv} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


MEMORY_COLUMNS = [
    ("model, dtype, run", "{params:.2f@G} B, {dtype}, {run}"),
    ("weights", "{weights_bytes:.2f@GiB} GiB"),
    ("budget", "{budget_bytes:.2f@GiB} GiB"),
    ("peak RSS", "{peak_rss_bytes:.2f@GiB} GiB"),
    ("peak / (budget or weights)", "{peak_ratio:.2f} x {ratio_of}"),
    ("declared mem_mb", "{declared_bytes:.2f@GiB} GiB ({peak_rss_bytes:<={declared_bytes}?peak within|PEAK ABOVE})"),
    ("wall", "{wall_s:.1f} s"),
    ("streamed / held (wall)", "{streamed_s:.2f} s / {held_s:.2f} s = {streamed_over_held:.2f}"),
    ("numbers against held", "{equal:?identical|DIFFERENT}"),
    ("target (3 B: streamed <= {target_streamed} x budget, bfloat16 <= {target_converted} x)",
     "{peak_ratio:<={target}?met|NOT met}"),
]  # fmt: skip
"""The memory table's columns (title, cell template; ``_common.write_table``): sizes in GiB (2^30 bytes)."""
MEMORY_NOTE = (
    "`python benchmarks/bench_rank_collapse.py --memory`: random Llama-style models (width {width}, {blocks} blocks; "
    "the smaller one width {small_width}, {small_blocks} blocks), the job's code on {sequences} sequences of {tokens} "
    "tokens, each run in a fresh interpreter; peak RSS is the process's high-water mark; streamed / held: best of "
    "{repeats} alternating runs, the checkpoint in the page cache."
)


def memory_row(params: int, dtype: str, run: str, weights_bytes: float, **measured: object) -> dict:
    """One row of the memory table: the model's parameters, the run, and what it measured (every other column
    null: not measured in that run)."""
    keys = ("budget_bytes", "peak_rss_bytes", "peak_ratio", "ratio_of", "declared_bytes", "wall_s", "streamed_s",
            "held_s", "streamed_over_held", "equal", "target")  # fmt: skip
    unknown = set(measured) - set(keys)
    if unknown:
        raise KeyError(f"not a column of the memory table: {sorted(unknown)}")
    return {"params": params, "dtype": dtype, "run": run, "weights_bytes": weights_bytes,
            **{k: measured.get(k) for k in keys}}  # fmt: skip


def memory_budget(work: Path, budget_gb: float, sequences: int, tokens: int, repeats: int, skip_big: bool) -> None:
    """The memory benchmark (module docstring): the 3 B model streamed under ``budget_gb`` (GiB), the streamed
    numbers against the in-memory path and the time of streaming against holding on the smaller model, and a
    bfloat16 load from a float32 checkpoint (tensor by tensor, against transformers' ``from_pretrained`` on the
    smaller model). Its data are the measurements: bytes, seconds and ratios (:data:`MEMORY_COLUMNS`)."""
    from san.models.spec import VARIANTS

    rows = []
    small = work / "llama-small" / "init"
    small_params = write_blockwise(LLAMA_SMALL, 0, small)
    small_mb = small_params * 4 / 2**20
    small_budget = small_mb / 2
    held = _job(small, "float32", list(VARIANTS), sequences, tokens, None)
    streamed = _job(small, "float32", list(VARIANTS), sequences, tokens, small_budget)
    rows.append(memory_row(
        small_params, "float32", "the four variants", small_params * 4, budget_bytes=small_budget * 2**20,
        peak_rss_bytes=streamed["peak_bytes"], wall_s=streamed["wall_s"], equal=held["values"] == streamed["values"],
        declared_bytes=_declared_bytes(small, "float32", sequences, tokens, small_budget),
    ))  # fmt: skip
    print(rows[-1], flush=True)
    walls = {"held": [], "streamed": []}
    for _ in range(repeats):  # alternating, the file in the page cache for both
        walls["held"].append(_job(small, "float32", ["transformer"], sequences, tokens, None)["wall_s"])
        walls["streamed"].append(_job(small, "float32", ["transformer"], sequences, tokens, small_budget)["wall_s"])
    rows.append(memory_row(
        small_params, "float32", "one variant", small_params * 4, budget_bytes=small_budget * 2**20,
        streamed_s=min(walls["streamed"]), held_s=min(walls["held"]),
        streamed_over_held=min(walls["streamed"]) / min(walls["held"]),
    ))  # fmt: skip
    print(rows[-1], flush=True)
    for how in ("transformers", "san"):
        got = _load(small, "bfloat16", how)
        rows.append(memory_row(
            small_params, "bfloat16 from float32", f"loaded by {how}", got["weights_bytes"],
            peak_rss_bytes=got["peak_bytes"], peak_ratio=got["peak_bytes"] / got["weights_bytes"], ratio_of="weights",
        ))  # fmt: skip
        print(rows[-1], flush=True)
    if not skip_big:
        big = work / "llama-3b" / "init"
        start = time.perf_counter()
        big_params = write_blockwise(LLAMA_3B, 0, big)
        print(f"wrote {big} in {time.perf_counter() - start:.0f} s", flush=True)
        budget = budget_gb * 2**30
        got = _job(big, "float32", ["transformer"], sequences, tokens, budget_gb * 1024)
        rows.append(memory_row(
            big_params, "float32", "one variant, streamed", big_params * 4, budget_bytes=budget,
            peak_rss_bytes=got["peak_bytes"], peak_ratio=got["peak_bytes"] / budget, ratio_of="budget",
            declared_bytes=_declared_bytes(big, "float32", sequences, tokens, budget_gb * 1024),
            wall_s=got["wall_s"], target=TARGET_STREAMED,
        ))  # fmt: skip
        print(rows[-1], flush=True)
        got = _load(big, "bfloat16", "san")
        rows.append(memory_row(
            big_params, "bfloat16 from float32", "loaded by san", got["weights_bytes"],
            peak_rss_bytes=got["peak_bytes"], peak_ratio=got["peak_bytes"] / got["weights_bytes"], ratio_of="weights",
            target=TARGET_CONVERTED,
        ))  # fmt: skip
        print(rows[-1], flush=True)
    values = {
        "target_streamed": TARGET_STREAMED, "target_converted": TARGET_CONVERTED, "sequences": sequences,
        "tokens": tokens, "repeats": repeats, "width": LLAMA_3B["hidden_size"],
        "blocks": LLAMA_3B["num_hidden_layers"], "small_width": LLAMA_SMALL["hidden_size"],
        "small_blocks": LLAMA_SMALL["num_hidden_layers"],
    }  # fmt: skip
    write_table("bench_rank_collapse_memory", MEMORY_COLUMNS, rows, values=values, note=MEMORY_NOTE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default="2")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--keep", help="run in this folder and keep it (default: a temporary folder)")
    ap.add_argument("--floor-of", help="only print the floor of a run kept in this folder (its --keep DIR)")
    ap.add_argument("--memory", action="store_true", help="measure models larger than a memory budget instead")
    ap.add_argument("--budget-gb", type=float, default=3.0, help="--memory: the 3 B model's budget (GiB)")
    ap.add_argument("--sequences", type=int, default=2, help="--memory: input sequences")
    ap.add_argument("--tokens", type=int, default=64, help="--memory: tokens per sequence")
    ap.add_argument("--repeats", type=int, default=3, help="--memory: rounds of streamed against held")
    ap.add_argument("--skip-big", action="store_true", help="--memory: only the smaller model")
    args = ap.parse_args()
    if args.memory:
        work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_rc_memory_"))
        try:
            memory_budget(work, args.budget_gb, args.sequences, args.tokens, args.repeats, args.skip_big)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        return
    cfg = yaml.safe_load(Path(args.config).read_text())
    if args.floor_of:
        wf = Path(args.floor_of) / "wf"
        print_floor(wf, yaml.safe_load((wf / "config.yaml").read_text()), job_table(wf), int(args.cores))
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_rc_"))
    try:
        wf = copy_workflow(work / "wf")
        (wf / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        targets = rank_collapse_results(cfg)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", args.cores, *targets],
            cwd=wf,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        table = job_table(wf)
        print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
        models = cfg["rank_collapse"]["models"]
        table["model"] = [next((m for m in models if f"/{m}" in f"/{j}"), "-") for j in table["job"]]
        per_model = table.groupby("model").agg(wall_s=("wall_s", "sum"), peak_rss_mb=("peak_rss_mb", "max"))
        print("\nper model (sum of its jobs' wall times; the largest peak RSS of its jobs):")
        print(per_model.to_string(float_format=lambda x: f"{x:.1f}"))
        print(
            f"\nsum of job wall times: {table['wall_s'].sum():.1f} s; peak RSS of any job: "
            f"{table['peak_rss_mb'].max():.0f} MB"
        )
        print(
            f"end-to-end wall time of the rank-collapse part with --cores {args.cores}: {wall:.1f} s "
            f"(target < {TARGET_S:g} s: {'met' if wall < TARGET_S else 'NOT met'})"
        )
        print_floor(wf, cfg, table, int(args.cores))
        rows = [
            {"model": m, "wall_s": r.wall_s, "peak_rss_bytes": r.peak_rss_mb * 2**20, "end_to_end_s": None}
            for m, r in per_model.iterrows()
            if m != "-"
        ]  # fmt: skip (a model's jobs have no end-to-end time)
        rows.append({"model": f"the whole part, --cores {args.cores}", "wall_s": table["wall_s"].sum(),
                     "peak_rss_bytes": table["peak_rss_mb"].max() * 2**20, "end_to_end_s": wall})  # fmt: skip
        write_table("bench_rank_collapse", PART_COLUMNS, rows, values={"target_s": TARGET_S}, note=PART_NOTE)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
