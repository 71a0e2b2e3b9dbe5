"""Helpers shared by the benchmark scripts: the checkout on ``sys.path``, a copy of the workflow to run in, the
machine's matrix-multiply rate, the numbers jobs write into their logs, and the table each benchmark writes to
``benchmarks/out/`` with its data, naming the command that wrote it (which ``python -m san.report.readme publish``
copies into ``docs/results/`` for the README).

A benchmark script runs as ``python benchmarks/<name>.py``, so this folder is on ``sys.path`` and ``import _common``
works; importing it puts the checkout first on ``sys.path`` so the ``san`` of this checkout is the one measured.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from san.core import compare  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
"""Where each benchmark writes its Markdown table (ignored by git)."""
LOAD_AT_START = os.getloadavg()[0]
"""The machine's one-minute load average when the benchmark started (this module is imported first)."""
LOAD_NOTE = " Load average {load_start:.1f} at the start, {load_end:.1f} at the end, on {cpus} CPUs."
"""What every benchmark's note ends with: the other processes' load beside it, which wall times include."""


def copy_workflow(dest: Path) -> Path:
    """Copy this checkout's workflow into ``dest``, so that a benchmark runs it from scratch."""
    return compare.copy_workflow(ROOT, dest)


def rank_collapse_results(cfg: dict) -> list[str]:
    """The result files of the rank-collapse part of ``cfg`` (the ``fig2`` jobs without the figures): one per model
    in ``rank_collapse.models`` and one attention-product file per model of ``attention_products.models`` (all when
    null)."""
    models = cfg["rank_collapse"]["models"]
    products = cfg.get("attention_products", {}).get("models")
    out = [f"results/rank_collapse/{m}.nc" for m in models]
    return out + [f"results/attention_products/{m}.nc" for m in (models if products is None else products)]


def matmul_rates(m: int, k: int, n: int, repeats: int = 200, dtype=None, rounds: int = 5) -> list[float]:
    """Single-thread multiply-adds per second of an (m x k) @ (k x n) product in ``dtype`` (default float32), one
    value per round (warm caches: the operands stay in memory between rounds)."""
    import torch

    torch.set_num_threads(1)
    dtype = dtype or torch.float32
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(repeats):
            a @ b
        rates.append(m * k * n * repeats / (time.perf_counter() - t0))
    return rates


def matmul_rate(m: int, k: int, n: int, repeats: int = 200, dtype=None) -> float:
    """The best of 5 rounds of :func:`matmul_rates`: the rate an arithmetic floor is computed at."""
    return max(matmul_rates(m, k, n, repeats, dtype))


def alternating_ratio(
    first: Callable[[], object],
    second: Callable[[], object],
    pairs: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """The ratio of the time of ``first`` to that of ``second``, measured ``pairs`` times with the order alternating
    (first-second, then second-first, ...), so that neither always runs on the caches the other left cold or warm:
    the median ratio and its range over the pairs (``low``, ``high``). ``clock``: ``time.perf_counter`` (wall) or
    ``time.process_time`` (CPU)."""
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    ratios = []
    for i in range(pairs):
        times = {}
        for name, fn in (("a", first), ("b", second)) if i % 2 == 0 else (("b", second), ("a", first)):
            t0 = clock()
            fn()
            times[name] = clock() - t0
        ratios.append(times["a"] / times["b"])
    return {"median": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "pairs": pairs}


def ratio_cell(ratio: dict[str, float], digits: int = 2) -> str:
    """A ratio of :func:`alternating_ratio` as a table cell: the median and its range over the pairs."""
    return (
        f"{ratio['median']:.{digits}f} ({ratio['low']:.{digits}f}-{ratio['high']:.{digits}f}, {ratio['pairs']} pairs)"
    )


def ratio_fields(name: str, ratio: dict[str, float]) -> dict[str, float]:
    """A ratio of :func:`alternating_ratio` as fields of a benchmark's row: ``<name>_median``, ``_low``, ``_high``,
    ``_pairs``."""
    return {f"{name}_{k}": ratio[k] for k in ("median", "low", "high", "pairs")}


def ratio_template(name: str, digits: int = 2) -> str:
    """The cell template of the fields :func:`ratio_fields` wrote: as :func:`ratio_cell` prints them."""
    d = f".{digits}f"
    return f"{{{name}_median:{d}}} ({{{name}_low:{d}}}-{{{name}_high:{d}}}, {{{name}_pairs}} pairs)"


def last_logged(path: Path, label: str) -> float | None:
    """The number after the last ``label`` in a job's log (``<label> <number> s``), or None without one."""
    if not path.is_file():
        return None
    found = re.findall(rf"{re.escape(label)} ([0-9.]+) s", path.read_text(errors="replace"))
    return float(found[-1]) if found else None


def real_paths(path_sets):
    """The real paths of padded path sets ``(..., P, L)`` as one ``(N, L)`` tensor (rows of :data:`PAD` dropped), in
    set order: what the per-path loop evaluates and the prefix tree of :mod:`san.paths.evaluate` shares."""
    import torch

    from san.paths.spec import PAD

    rows = torch.as_tensor(path_sets).reshape(-1, path_sets.shape[-1])
    return rows[(rows != PAD).all(dim=-1)]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table of ``rows`` under ``header`` (cells as given: format numbers before)."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def command(argv: Sequence[str] | None = None, script: str | None = None) -> str:
    """The command that runs this benchmark as a reader types it from the checkout's root:
    ``python benchmarks/<script> <arguments>`` (default: this process's script and arguments)."""
    script = Path(sys.argv[0] if script is None else script).name
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", f"benchmarks/{script}", *args])


def measured(value: object) -> object:
    """``value`` as a benchmark's data stores it: a JSON number (numpy scalars and arrays unwrapped), a boolean, a
    label or null (for NaN: a quantity not measured); mappings and lists element by element."""
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): measured(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [measured(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a benchmark measurement must be a number, boolean, label or null, got {type(value).__name__}")


def write_table(
    name: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Mapping[str, object]],
    values: Mapping[str, object] | None = None,
    note: str = "",
    cmd: str | None = None,
) -> Path:
    """Write a benchmark's result to ``benchmarks/out/``: its data ``<name>.json`` and the table ``<name>.md``
    rendered from it (:func:`san.report.benchmark_tables.benchmark_table`); return the table's path. The data are the
    measurements, not their printed form: ``rows``, one mapping per row of numbers (each key names its unit:
    ``_s`` seconds, ``_bytes`` bytes, ``_ratio`` or none a pure number), booleans, labels and nulls (not measured);
    ``values``, the numbers every row shares (settings, targets) and the machine's load average at the start and the
    end (:data:`LOAD_NOTE`); ``columns``, a (title, cell template) per column
    (:class:`san.report.benchmark_tables.BenchmarkCells`: ``{wall_s:.1f} s``, ``{peak_rss_bytes:.2f@GiB} GiB``,
    ``{ratio:<={target}?met|NOT met}``); ``note``, one line under the table (a template of ``values``, ending with
    the load); and the record naming the command ``cmd`` (default :func:`command`), commit, date and machine. The
    README and ``docs/`` quote the table from its committed copy (``python -m san.report.readme publish``), whose
    ``verify`` renders it again from the committed data."""
    from san.report.benchmark_tables import benchmark_table
    from san.report.provenance import benchmark_record

    data = {
        "columns": [{"title": title, "cell": cell} for title, cell in columns],
        "rows": [measured(dict(row)) for row in rows],
        "values": measured(
            {**(values or {}), "load_start": LOAD_AT_START, "load_end": os.getloadavg()[0], "cpus": os.cpu_count()}
        ),
        "note": (note + LOAD_NOTE).strip(),
        "record": benchmark_record(command() if cmd is None else cmd),
    }
    text = benchmark_table(data)  # a table that cannot be rendered fails before anything is written
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.md"
    path.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    path.write_text(text)
    print(text)
    print(f"wrote {path} and its data {path.with_suffix('.json').name}")
    return path
