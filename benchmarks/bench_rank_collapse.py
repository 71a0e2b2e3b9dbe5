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

With ``--memory``: the memory a rank-collapse job needs for a real model. A random initialisation of a Llama-style
architecture of about one billion parameters (TinyLlama-1.1B's shape) is materialised as an ``init`` model folder
(float32 safetensors), then for each dtype a fresh interpreter runs the job's code
(:func:`san.rank_collapse.experiment.run`, all four variants on a few sequences) and reports its peak resident memory
(the kernel's high-water mark, as Snakemake's ``benchmark:`` files record it) against the size of the weights in
that dtype. Target: peak <= 1.5 x the weights for a float32 model (one copy of the weights, the variants being
overrides on it, plus the interpreter and the activations of a batch). A narrower dtype runs both from the float32
folder (converted while loading: the float32 file is mapped while the converted copy is made) and from a checkpoint
stored in that dtype, as large models' hub checkpoints usually are (mapped, not copied).

    python benchmarks/bench_rank_collapse.py [--cores 2] [--config config.yaml] [--keep DIR] [--floor-of DIR]
    python benchmarks/bench_rank_collapse.py --memory [--dtypes float32,bfloat16] [--layers 22] [--keep DIR]
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
from _common import ROOT, copy_workflow, markdown_table, matmul_rate, met, rank_collapse_results, write_table

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
    from san.models.acquire import load_model
    from san.rank_collapse.experiment import residuals_by_variant
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
                    residuals_by_variant(model, spec["family"], ids[:1], own, 1, rc["albert_no_mlp"])
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


#: a Llama-style architecture of about one billion parameters: TinyLlama-1.1B's shape (grouped key/value heads); the
#: vocabulary is the bundled tokenizer's 30,522 ids that every ``init`` model gets
LLAMA_1B = {
    "hidden_size": 2048, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
    "intermediate_size": 5632, "max_position_embeddings": 2048,
}  # fmt: skip
#: the job's code in a fresh interpreter: its resident memory after the imports, then the high-water mark after
#: running every variant of the model folder argv[1] in dtype argv[2] on argv[3] sequences of argv[4] tokens
_JOB = """
import json, sys, time
import torch, xarray as xr
from san.models.spec import VARIANTS
from san.rank_collapse.experiment import run

def status_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

folder, dtype, sequences, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
start = status_mb("VmRSS")
ids = torch.randint(5, 30000, (sequences, tokens), generator=torch.Generator().manual_seed(0))
inputs = {"init": xr.Dataset({"input_ids": (("sample", "token"), ids.numpy())}, attrs={"input_sha256": "bench"})}
settings = {"variants": list(VARIANTS), "dtype": dtype, "batch_size": sequences, "albert_no_mlp": "identity_linears"}
t = time.perf_counter()
run("llama", {"init": folder}, inputs, settings)
print(json.dumps({"start_mb": start, "peak_mb": status_mb("VmHWM"), "wall_s": time.perf_counter() - t}))
"""


def parameter_count(folder: Path) -> int:
    """Parameters in a model folder's safetensors, read from the file's header (nothing is loaded)."""
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "pt") as fh:
        return sum(int(torch.Size(fh.get_slice(k).get_shape()).numel()) for k in fh.keys())  # noqa: SIM118 (not a dict)


def stored_as(folder: Path, dtype: str, out: Path) -> Path:
    """The model of ``folder`` with its weights stored in ``dtype`` (converted one tensor at a time), acquired as a
    ``local`` model folder into ``out``: how hub checkpoints of large models usually come (bfloat16)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from san.models.acquire import materialise_local, sha256_file

    if (out / "manifest.json").exists():
        return out
    src = out.with_name(out.name + "-source")
    src.mkdir(parents=True, exist_ok=True)
    for f in folder.iterdir():
        if f.name not in ("model.safetensors", "manifest.json"):
            shutil.copy2(f, src / f.name)
    with safe_open(folder / "model.safetensors", "pt") as fh:
        tensors = {k: fh.get_tensor(k).to(getattr(torch, dtype)) for k in fh.keys()}  # noqa: SIM118 (not a dict)
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    del tensors
    materialise_local(src, {f.name: sha256_file(f) for f in src.iterdir()}, "llama", out)
    shutil.rmtree(src)
    return out


def memory_fit(work: Path, dtypes: list[str], layers: int, sequences: int, tokens: int) -> None:
    """Peak memory of the rank-collapse job on a ~1B-parameter random Llama-style model, per dtype, against the size
    of its weights in that dtype (module docstring): from the float32 ``init`` folder, and for a dtype narrower
    than float32 also from a checkpoint stored in that dtype."""
    from san.models.acquire import materialise_init

    folder = work / "llama-1b" / "init"
    arch = {**LLAMA_1B, "num_hidden_layers": layers}
    if not (folder / "manifest.json").exists():
        start = time.perf_counter()
        materialise_init("llama", arch, 0, folder)
        print(f"materialised {folder} in {time.perf_counter() - start:.0f} s")
    params = parameter_count(folder)
    runs = [(dtype, "float32", folder) for dtype in dtypes]
    runs += [(d, d, stored_as(folder, d, work / "llama-1b" / d)) for d in dtypes if d in ("bfloat16", "float16")]
    rows = []
    for dtype, stored, path in runs:
        args = [sys.executable, "-c", _JOB, str(path), dtype, str(sequences), str(tokens)]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        got = json.loads(out)
        weights_mb = params * torch.empty(0, dtype=getattr(torch, dtype)).element_size() / 2**20
        ratio = got["peak_mb"] / weights_mb
        rows.append(
            [
                dtype, stored, f"{weights_mb / 1024:.2f} GB", f"{got['peak_mb'] / 1024:.2f} GB", f"{ratio:.2f}",
                f"{got['start_mb'] / 1024:.2f} GB", f"{(got['peak_mb'] - got['start_mb']) / weights_mb:.2f}",
                f"{got['wall_s']:.0f} s",
            ]
        )  # fmt: skip
        print(" | ".join(rows[-1]), flush=True)
    for row in rows:
        row.append(met(float(row[4]) <= 1.5) if row[0] == "float32" and row[1] == "float32" else "-")
    header = [
        "dtype", "checkpoint stored in", "weights", "job peak RSS", "peak / weights", "after imports",
        "(peak - imports) / weights", "wall", "target <= 1.5 (float32)",
    ]  # fmt: skip
    note = (
        f"`python benchmarks/bench_rank_collapse.py --memory`: a random Llama-style model of {params / 1e9:.2f} B "
        f"parameters ({layers} layers of width {arch['hidden_size']}), the four variants on {sequences} sequences of "
        f"{tokens} tokens; target peak <= 1.5 x the weights in float32."
    )
    print(markdown_table(header, rows))
    f32 = next((r for r in rows if r[0] == "float32"), None)
    if f32 is not None:
        print(f"float32: peak / weights {f32[4]} (target <= 1.5: {'met' if float(f32[4]) <= 1.5 else 'NOT met'})")
    write_table("bench_rank_collapse_memory", header, rows, note=note)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default="2")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--keep", help="run in this folder and keep it (default: a temporary folder)")
    ap.add_argument("--floor-of", help="only print the floor of a run kept in this folder (its --keep DIR)")
    ap.add_argument("--memory", action="store_true", help="measure a ~1B-parameter model's job memory instead")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="--memory: the dtypes to run the model in")
    ap.add_argument("--layers", type=int, default=LLAMA_1B["num_hidden_layers"], help="--memory: layers of the model")
    ap.add_argument("--sequences", type=int, default=4, help="--memory: input sequences")
    ap.add_argument("--tokens", type=int, default=128, help="--memory: tokens per sequence")
    args = ap.parse_args()
    if args.memory:
        work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_rc_memory_"))
        try:
            memory_fit(work, args.dtypes.split(","), args.layers, args.sequences, args.tokens)
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
            f"(target < 480 s: {'met' if wall < 480 else 'NOT met'})"
        )
        print_floor(wf, cfg, table, int(args.cores))
        rows = [
            [m, f"{r.wall_s:.0f} s", f"{r.peak_rss_mb / 1024:.1f} GB", "-"] for m, r in per_model.iterrows() if m != "-"
        ]
        rows.append([f"the whole part, --cores {args.cores}", f"{wall:.0f} s end to end", "", met(wall < 480)])
        note = "`python benchmarks/bench_rank_collapse.py`: the `fig2` jobs of the default config; target < 480 s."
        header = ["model", "job wall (sum)", "peak memory", "target < 480 s"]
        write_table("bench_rank_collapse", header, rows, note=note)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
