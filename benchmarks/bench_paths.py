"""Benchmark of the path-effectiveness experiment (the paper's Fig. 4) at the config's settings, in one run.

Per task it prints:

- training time per step and epoch of three implementations, measured in the same process over alternating rounds
  of steps (min over rounds: robust to other jobs on a shared machine): ``baseline`` (``torch.nn.Dropout``, the
  attention module's ``scaled_dot_product_attention`` with its own dropout, foreach Adam), ``autograd`` (fused
  QKV, bulk numpy dropout masks, explicit batched-matmul attention, fused Adam/AdamW; ``fused: false``) and
  ``fused`` (the default: each layer one autograd node with a hand-written backward and, on AVX-512 CPUs,
  oneDNN projections, :mod:`san.paths.fused`), with the extrapolated full training time against the targets
  (convex hull < 140 s, sorting < 8 s on a 2-core CPU, one thread);
- CPU per seed of N seeds stacked in one SAN (``--seeds N``, default 5; :mod:`san.paths.model`) against one
  seed trained alone (a stack of one), the same optimiser steps per seed, and the share of the float32 arithmetic
  floor (the training's multiply-adds at the rate of a large matrix product on this machine) each reaches
  (targets: ratio <= 1/3 for sorting and sorting_10k, <= 1/2 for convex hull), the lowest ratio reachable while the
  step's matrix products stay as they are (every product of a step, recorded with its sizes and strides and replayed
  alone on hot operands, :func:`product_seconds`; the rest of the step taken as free), and the CPU of the path
  evaluation of the N seeds one by one against all seeds in one batched computation
  (:func:`~san.paths.evaluate.evaluate_path_sets`; memorisation's evaluation sets subsampled to ``--mem-eval``
  sequences); ``--ensemble-only`` prints only this;
- optionally (``--compile``) the same with ``torch.compile``, compile time included;
- the time of the batched path evaluation of the full protocol (every set size, path length and repeat), of the
  per-path reference (:mod:`san.paths.reference`, which the tests also use: a Python loop over paths, each
  evaluated on the whole input batch with explicit single-head matrices) and of an authors-style per-path loop
  (each head layer computes every head's attention and values, then keeps the path's head, as the authors'
  ``modeling_san`` does), on the same inputs, best of two runs each, with the speed-ups (target: at least 10x
  the per-path loop).

Models are randomly initialised (timing does not depend on the weights). Memorisation's evaluation set is
subsampled (``--mem-eval``) so that the per-path reference finishes in reasonable time; both methods use the same
subset.

    python benchmarks/bench_paths.py [--tasks sorting convex_hull memorization] [--threads 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from _common import ROOT, alternating_ratio, ratio_cell, ratio_fields, ratio_template, real_paths, write_table
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from san.core.config import validate_config
from san.paths import fused
from san.paths.evaluate import evaluate_path_sets, prefix_tree, sample_path_sets
from san.paths.experiment import seed_tasks, stack_data
from san.paths.model import SAN
from san.paths.reference import reference_path_set_accuracy
from san.paths.spec import IGNORE, SKIP, sequences_and_tokens, task_slices, training_macs
from san.paths.tasks import TaskData, make_task
from san.paths.training import Learner, make_optimizer, train

TARGETS_S = {"sorting": 8.0, "convex_hull": 140.0}
SPEEDUP_TARGET = 10.0
"""The batched path evaluation's target: at least this many times faster than either per-path loop."""


def baseline_loss(model: SAN, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor | None) -> torch.Tensor:
    """The plain implementation of a one-seed training step: ``torch.nn.functional.dropout`` everywhere, the
    eval-mode layer's ``scaled_dot_product_attention`` with its own dropout, autograd for everything."""
    p = model.cfg.dropout
    h = nn.functional.dropout(model.embed(x), p)
    for layer in model.layers:
        attn = layer.attn
        s_, b, n, d = h.shape
        q, k, v = attn.qkv(h).view(s_ * b, n, 3, attn.n_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
        mask = None if m is None else m.reshape(s_ * b, 1, 1, n)
        ctx = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        h = layer.norm(h + nn.functional.dropout(attn.out(ctx.transpose(1, 2).reshape(s_, b, n, d)), p))
    logits = model.classifier(nn.functional.dropout(h, p))
    return nn.functional.cross_entropy(logits[0].flatten(0, 1), y[0].flatten(), ignore_index=IGNORE)


class Stepper:
    """Runs training steps of one variant of a one-seed SAN; time is accumulated per call of :meth:`run`."""

    def __init__(self, task, train_cfg: dict, variant: str, seed: int = 0) -> None:
        cfg = {**train_cfg, "fused": variant == "fused", "compile": variant == "compile"}
        t0 = time.perf_counter()
        self.learner = Learner(SAN(task.model_config, [seed]), [task.train], cfg, torch.device("cpu"))
        self.setup = time.perf_counter() - t0 if variant == "compile" else 0.0
        self.model, self.variant = self.learner.model, variant
        if variant == "baseline":
            opt_cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[cfg["optimizer"]]
            self.opt = opt_cls(self.model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"], foreach=True)
        else:
            self.opt = make_optimizer(self.model, cfg, torch.device("cpu"))
        self.n, self.bs = len(task.train), cfg["batch_size"]
        self.clip = cfg.get("max_grad_norm")
        self.order = torch.randperm(self.n, generator=torch.Generator().manual_seed(seed))[None]
        self.pos = 0
        self.steps_per_epoch = math.ceil(self.n / self.bs)

    def run(self, steps: int) -> None:
        lr = self.learner
        for _ in range(steps):
            if self.pos + self.bs > self.n:
                self.pos = 0
            rows = self.order[:, self.pos : self.pos + self.bs]
            self.pos += self.bs
            if self.variant == "baseline":
                loss = baseline_loss(
                    self.model, lr.inputs[rows], lr.labels[rows], None if lr.mask is None else lr.mask[rows]
                )
            else:
                loss = lr.loss(rows)[0]
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if self.clip is not None:
                lr.clip(self.clip)
            self.opt.step()


def time_training(task, train_cfg: dict, variants: list[str], steps: int, rounds: int) -> dict[str, dict[str, float]]:
    steppers = {v: Stepper(task, train_cfg, v) for v in variants}
    for s in steppers.values():
        s.run(3)  # warm-up
    wall: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(rounds):
        for v, s in steppers.items():
            t0, c0 = time.perf_counter(), time.process_time()
            s.run(steps)
            wall[v].append((time.perf_counter() - t0) / steps)
            cpu[v].append((time.process_time() - c0) / steps)
    out = {}
    for v, s in steppers.items():
        step_s = min(wall[v])
        out[v] = {
            "step_ms": 1e3 * step_s,
            "step_cpu_ms": 1e3 * min(cpu[v]),
            "epoch_s": step_s * s.steps_per_epoch,
            "train_s": step_s * s.steps_per_epoch * train_cfg["epochs"] + s.setup,
            "setup_s": s.setup,
        }
    return out


@torch.no_grad()
def authors_style_accuracy(model: SAN, x, y, sets: np.ndarray, mask) -> np.ndarray:
    """Per-path loop in the style of the authors' code: at a head layer all heads' attention probabilities and
    values are computed and the path's head is kept; then the affine-free LayerNorm, as in the protocol."""
    eps, d = model.cfg.layer_norm_eps, model.cfg.dim
    x0 = model.embed(x[None])[0]
    valid = y >= 0
    flat = sets.reshape(-1, *sets.shape[-2:])
    acc = []
    for path_set in flat:
        total = torch.zeros_like(x0)
        for path in path_set.tolist():
            if path[0] < SKIP:  # PAD row
                continue
            h = x0
            for layer, head in enumerate(path):
                if head == SKIP:
                    continue
                attn = model.layers[layer].attn
                dh, (b, n, _) = attn.head_dim, h.shape
                qkv = h @ attn.qkv.weight[0].T + attn.qkv.bias[0]
                q, k, v = qkv.view(b, n, 3, attn.n_heads, dh).permute(2, 0, 3, 1, 4)  # every head, as the authors
                scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
                if mask is not None:
                    scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
                probs = torch.softmax(scores, dim=-1)  # every head's attention
                out = probs[:, head] @ v[:, head] @ attn.out.weight[0, :, head * dh : (head + 1) * dh].T
                h = nn.functional.layer_norm(out + attn.out.bias[0], (d,), eps=eps)
            total = total + h
        pred = model.classifier(nn.functional.layer_norm(total, (d,), eps=eps)[None])[0].argmax(-1)
        acc.append(int(((pred == y) & valid).sum()) / int(valid.sum()))
    return np.asarray(acc).reshape(sets.shape[:-2])


def best_of(n: int, fn):
    """``(seconds, result)``: the fastest of ``n`` calls of ``fn`` and its result."""
    best, result = math.inf, None
    for _ in range(n):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def time_evaluation(task, eval_cfg: dict, n_inputs: int | None, reference: bool) -> dict[str, float]:
    model = SAN(task.model_config, [0]).eval()
    cfg = task.model_config
    ev = task.eval
    sl = slice(None) if n_inputs is None else slice(0, n_inputs)
    x, y = ev.inputs[sl], ev.labels[sl]
    m = None if ev.mask is None else ev.mask[sl]
    sets = sample_path_sets(cfg.n_layers, cfg.n_heads, eval_cfg["n_paths"], eval_cfg["n_repeats"], eval_cfg["seed"])
    # every method: best of two runs (the first may pay for cold caches and allocations)
    mb, m1 = eval_cfg["memory_mb"], None if m is None else m[None]
    t_batched, batched = best_of(2, lambda: evaluate_path_sets(model, x[None], y[None], m1, sets, mb)[0].numpy())
    out = {"inputs": len(x), "sets": int(np.prod(sets.shape[:3])), "batched_s": t_batched}
    # arithmetic bound of the speed-up: single-head computations of the per-path loop vs the prefix tree
    paths = real_paths(sets)
    out["loop_heads"] = int((paths >= 0).sum())
    out["tree_heads"] = prefix_tree(paths, cfg.n_heads).n_head_evaluations
    if reference:
        out["reference_s"], ref = best_of(2, lambda: reference_path_set_accuracy(model, x, y, sets, m))
        out["speedup"] = out["reference_s"] / t_batched
        out["authors_s"], authors = best_of(2, lambda: authors_style_accuracy(model, x, y, sets, m))
        out["authors_speedup"] = out["authors_s"] / t_batched
        out["max_abs_diff"] = max(float(np.abs(batched - ref).max()), float(np.abs(batched - authors).max()))
    return out


def matmul_rate(n: int = 512, repeats: int = 20) -> float:
    """Float32 multiply-adds per CPU second of a large square product on this machine (the arithmetic floor's
    rate): the best of a few timed runs."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(repeats):
            a @ b
        best = min(best, time.process_time() - t0)
    return repeats * n**3 / best


def _subset(data: TaskData, n: int) -> TaskData:
    return TaskData(data.inputs[:n], data.labels[:n], None if data.mask is None else data.mask[:n])


def bench_seeds(tcfg: dict, n_seeds: int) -> tuple[list[int], list]:
    """``n_seeds`` seeds of a task (the config's first seeds, or the first seed plus consecutive ones) and the task
    each seed builds (:func:`~san.paths.experiment.seed_tasks`)."""
    seeds = list(tcfg["seeds"])[:n_seeds]
    seeds += [max(seeds) + 1 + i for i in range(n_seeds - len(seeds))]
    return seeds, seed_tasks({**tcfg, "seeds": seeds})


def time_ensemble(tcfg: dict, seeds: list[int], tasks: list, steps: int, rounds: int) -> dict[str, float]:
    """CPU seconds per optimiser step of one seed trained alone (a stack of one) and of the stack of ``seeds``
    (their ``tasks``, :func:`bench_seeds`), the same ``steps`` steps per seed; the fastest of ``rounds`` alternating
    rounds."""
    bs = tcfg["train"]["batch_size"]
    data = [_subset(t.train, steps * bs) for t in tasks]
    steps = math.ceil(len(data[0]) / bs)  # fewer when the training set is smaller
    cfg = {**tcfg["train"], "epochs": 1}
    single = ensemble = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        train(SAN(tasks[0].model_config, seeds[:1]), data[:1], cfg)
        single = min(single, time.process_time() - t0)
        t0 = time.process_time()
        train(SAN(tasks[0].model_config, seeds), data, cfg)
        ensemble = min(ensemble, time.process_time() - t0)
    return {"single_step": single / steps, "ensemble_step": ensemble / steps}


PRODUCTS = {"aten::bmm", "aten::baddbmm", "aten::mm", "aten::addmm", "mkldnn::_linear_pointwise"}


class ProductRecorder(TorchDispatchMode):
    """Records every matrix product a computation dispatches (the op and its arguments' sizes and strides), forward
    and backward, so that the products can be replayed alone."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, list[Any], dict[str, Any]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func._schema.name.rstrip("_") in PRODUCTS:  # in-place variants too (baddbmm_)
            spec = lambda a: (tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a  # noqa: E731
            self.calls.append((func, [spec(a) for a in args], {k: spec(v) for k, v in kwargs.items()}))
        return func(*args, **kwargs)


def _replay_args(spec: Any) -> Any:
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], torch.dtype):
        return torch.empty_strided(spec[0], spec[1], dtype=spec[2]).uniform_(-1, 1)
    return spec


def product_seconds(run_one_step, repeats: int = 20) -> float:
    """CPU seconds of the matrix products of one training step replayed alone on fresh operands of the same sizes
    and strides, each kept hot in cache (the best of three timed passes): what a step would cost if everything
    but its products were free."""
    with ProductRecorder() as rec:
        run_one_step()
    calls = [(f, [_replay_args(a) for a in args], {k: _replay_args(v) for k, v in kw.items()}) for f, args, kw in
             rec.calls]  # fmt: skip
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(repeats):
            for f, args, kw in calls:
                f(*args, **kw)
        best = min(best, (time.process_time() - t0) / repeats)
    return best


def time_products(tcfg: dict, seeds: list[int], tasks: list) -> dict[str, float]:
    """CPU seconds of the matrix products alone of one step of one seed trained alone and of the ensemble of
    ``seeds`` (:func:`product_seconds`)."""
    bs = tcfg["train"]["batch_size"]
    data = [_subset(t.train, bs) for t in tasks]
    cfg = {**tcfg["train"], "epochs": 1}
    single = product_seconds(lambda: train(SAN(tasks[0].model_config, seeds[:1]), data[:1], cfg))
    ensemble = product_seconds(lambda: train(SAN(tasks[0].model_config, seeds), data, cfg))
    return {"single": single, "ensemble": ensemble}


def time_seed_evaluation(seeds: list[int], tasks: list, eval_cfg: dict, n_inputs: int | None) -> dict[str, Any]:
    """The CPU-time ratio of the path evaluation (the full protocol) of the networks of ``seeds``, each on its own
    evaluation set, all seeds of the stack in one batched computation (:func:`~san.paths.evaluate.evaluate_path_sets`)
    against seed by seed (each seed's network alone, :meth:`SAN.member`), in alternating order
    (:func:`_common.alternating_ratio`: median and range); the results must be equal."""
    model = SAN(tasks[0].model_config, seeds).eval()
    evs = [t.eval if n_inputs is None else _subset(t.eval, n_inputs) for t in tasks]
    cfg, mb = model.cfg, eval_cfg["memory_mb"]
    sets = sample_path_sets(cfg.n_layers, cfg.n_heads, eval_cfg["n_paths"], eval_cfg["n_repeats"], eval_cfg["seed"])
    one = lambda t: None if t is None else t[None]  # noqa: E731
    ev = stack_data(evs)
    out = {}

    def loop():
        out["loop"] = torch.cat(
            [evaluate_path_sets(model.member(i), e.inputs[None], e.labels[None], one(e.mask), sets, mb) for i, e in
             enumerate(evs)]
        )  # fmt: skip

    def batched():
        out["batched"] = evaluate_path_sets(model, ev.inputs, ev.labels, ev.mask, sets, mb)

    ratio = alternating_ratio(batched, loop, pairs=3, clock=time.process_time)  # alternating order, CPU time
    if not torch.equal(out["loop"], out["batched"]):
        raise AssertionError("seed-batched path evaluation differs from the seed-by-seed one")
    return {"ratio": ratio, "inputs": len(evs[0])}


def print_ensembles(slices: dict, tasks: list[str], n_seeds: int, steps: int, rounds: int, eval_cfg: dict,
                    mem_eval: int) -> None:  # fmt: skip
    """Per task: CPU per seed of an ``n_seeds`` ensemble against one seed alone, and the share of the float32
    arithmetic floor (the training's multiply-adds at the rate of a large product) that each reaches."""
    rate = matmul_rate()
    print(f"\n== seeds as one batched model: {n_seeds}-seed ensemble vs one seed alone, {steps} steps per seed")
    print(f"   float32 product rate on this machine: {rate / 1e9:.1f} GMAC/s (one thread)")
    print(f"   {'task':<13} {'single ms/step':>15} {'ensemble ms/step':>17} {'per seed':>9} {'ratio':>6}"
          f" {'floor single':>13} {'floor ensemble':>15} {'products-alone bound':>21}")  # fmt: skip
    rows = []
    for name in tasks:
        tcfg = copy.deepcopy(slices[name])
        seeds, seed_task_list = bench_seeds(tcfg, n_seeds)
        t = time_ensemble(tcfg, seeds, seed_task_list, steps, rounds)
        n_train = sequences_and_tokens(tcfg)[0]
        steps_total = tcfg["train"]["epochs"] * math.ceil(n_train / tcfg["train"]["batch_size"])
        floor = training_macs(tcfg) / len(tcfg["seeds"]) / steps_total / rate  # one seed's step at that rate
        per_seed = t["ensemble_step"] / n_seeds
        prod = time_products(tcfg, seeds, seed_task_list)
        bound = prod["ensemble"] / n_seeds / t["single_step"]
        print(
            f"   {name:<13} {1e3 * t['single_step']:15.2f} {1e3 * t['ensemble_step']:17.2f} {1e3 * per_seed:9.2f}"
            f" {per_seed / t['single_step']:6.3f} {100 * floor / t['single_step']:12.0f}%"
            f" {100 * floor / per_seed:14.0f}% {bound:21.3f}"
        )
        print(f"     matrix products alone (replayed hot): one seed {1e3 * prod['single']:.2f} ms/step,"
              f" ensemble {1e3 * prod['ensemble']:.2f} ms/step ({1e3 * prod['ensemble'] / n_seeds:.2f} per seed);"
              f" everything else: one seed {1e3 * (t['single_step'] - prod['single']):.2f} ms,"
              f" ensemble {1e3 * (t['ensemble_step'] - prod['ensemble']):.2f} ms")  # fmt: skip
        rest_1, rest_n = t["single_step"] - prod["single"], t["ensemble_step"] - prod["ensemble"]
        per_seed_rest = (rest_n - rest_1) / max(n_seeds - 1, 1)  # everything else = fixed + per seed x seeds
        print(f"     everything else as a fixed part plus a part per seed: {1e3 * (rest_1 - per_seed_rest):.2f} ms"
              f" + {1e3 * per_seed_rest:.2f} ms per seed")  # fmt: skip
        print(f"     full training CPU: one seed ~{t['single_step'] * steps_total:.0f} s, {n_seeds} seeds as one"
              f" ensemble ~{t['ensemble_step'] * steps_total:.0f} s")  # fmt: skip
        n_inputs = mem_eval if tcfg["task"] == "memorization" else None
        ev = time_seed_evaluation(seeds, seed_task_list, eval_cfg, n_inputs)
        print(f"     path evaluation ({ev['inputs']} inputs per seed), {n_seeds} seeds batched / one by one, CPU:"
              f" {ratio_cell(ev['ratio'])}, alternating order, equal results")  # fmt: skip
        rows.append({"task": name, "single_step_s": t["single_step"], "ensemble_step_s": t["ensemble_step"],
                     "per_seed_step_s": per_seed, "ratio": per_seed / t["single_step"], "floor_step_s": floor,
                     "floor_share_single": floor / t["single_step"], "floor_share_ensemble": floor / per_seed,
                     "products_single_s": prod["single"], "products_ensemble_s": prod["ensemble"],
                     "products_bound": bound, **ratio_fields("evaluation", ev["ratio"])})  # fmt: skip
    values = {"seeds": n_seeds, "steps": steps, "rounds": rounds, "rate_mac_per_s": rate}
    write_table("bench_paths_ensemble", ENSEMBLE_COLUMNS, rows, values=values, note=ENSEMBLE_NOTE)


ENSEMBLE_COLUMNS = [
    ("task", "{task}"), ("one seed: ms/step", "{single_step_s:.2f@ms}"),
    ("{seeds}-seed ensemble: ms/step per seed", "{per_seed_step_s:.2f@ms}"), ("ratio", "{ratio:.2f}"),
    ("floor share, one seed", "{floor_share_single:.0%}"), ("floor share, ensemble", "{floor_share_ensemble:.0%}"),
    ("ratio if all but products were free", "{products_bound:.2f}"),
    ("evaluation batched / seed by seed", ratio_template("evaluation")),
]  # fmt: skip
"""The ensemble table: (title, cell template) per column (``_common.write_table``); its data hold the step times in
seconds, the floor and the matrix products' times beside them."""
ENSEMBLE_NOTE = (
    "One thread, {steps} steps x {rounds} rounds per seed, float32 product rate {rate_mac_per_s:.1f@G} GMAC/s."
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--tasks", nargs="+", default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the training jobs use 1)")
    ap.add_argument("--steps", type=int, default=60, help="training steps per round and variant")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; the fastest round counts")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile (compile time included)")
    ap.add_argument("--mem-eval", type=int, default=10, help="memorisation sequences for the evaluation timing")
    ap.add_argument("--no-reference", action="store_true", help="skip the per-path reference")
    ap.add_argument("--seeds", type=int, default=5, help="seeds of the ensemble timing (0: skip it)")
    ap.add_argument("--ensemble-only", action="store_true", help="only the ensemble timing")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    cfg = yaml.safe_load(Path(args.config).read_text())
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    pcfg = cfg["paths"]
    tasks = args.tasks or pcfg["tasks"]
    variants = ["baseline", "autograd", "fused"] + (["compile"] if args.compile else [])
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.rounds} rounds x {args.steps} steps,"
        f" CPU capability {torch.backends.cpu.get_cpu_capability()}, fused-layer products via"
        f" {'oneDNN' if fused.USE_ONEDNN else 'MKL/addmm'}"
    )
    rows = []
    slices = task_slices(pcfg, ROOT / "workflow/schemas/paths.schema.yaml")  # variants resolved
    if args.seeds:
        print_ensembles(slices, tasks, args.seeds, args.steps, args.rounds, pcfg["evaluation"], args.mem_eval)
    if args.ensemble_only:
        return
    for name in tasks:
        tcfg = copy.deepcopy(slices[name])
        t0 = time.perf_counter()
        task = make_task(tcfg["task"], {**tcfg, "seed": tcfg["seeds"][0]})
        data_s = time.perf_counter() - t0
        timing = time_training(task, tcfg["train"], variants, args.steps, args.rounds)
        n_eval = args.mem_eval if tcfg["task"] == "memorization" else None
        ev = time_evaluation(task, pcfg["evaluation"], n_eval, not args.no_reference)
        print(f"\n== {name}: {len(task.train)} training inputs, {tcfg['train']['epochs']} epochs (data {data_s:.1f} s)")
        for v, t in timing.items():
            target = TARGETS_S.get(name)
            verdict = (
                "" if target is None else f"  target < {target:.0f} s: {'met' if t['train_s'] < target else 'NOT met'}"
            )
            setup = f" + compile {t['setup_s']:.1f} s" if t["setup_s"] else ""
            print(
                f"  train {v:9s}: {t['step_ms']:6.2f} ms/step (cpu {t['step_cpu_ms']:6.2f}),"
                f" {t['epoch_s']:7.3f} s/epoch, full training ~{t['train_s']:7.1f} s{setup}{verdict}"
            )
        step = {v: t["step_ms"] for v, t in timing.items()}
        print(
            f"  training speed-up of fused: {step['baseline'] / step['fused']:.2f}x vs baseline,"
            f" {step['autograd'] / step['fused']:.2f}x vs autograd"
        )
        line = f"  path evaluation ({ev['sets']} sets on {ev['inputs']} inputs): batched {ev['batched_s']:.2f} s"
        print(line)
        print(
            f"    single-head computations: per-path loop {ev['loop_heads']}, prefix tree {ev['tree_heads']}"
            f" ({ev['loop_heads'] / ev['tree_heads']:.1f}x fewer: the bound of the speed-up when both are"
            " compute-bound)"
        )
        if "speedup" in ev:
            for label, key in (
                ("per-path reference (tests)", "reference_"),
                ("authors-style per-path loop", "authors_"),
            ):
                speedup = ev["speedup"] if key == "reference_" else ev["authors_speedup"]
                seconds = ev[key + "s"]
                print(
                    f"    vs {label}: {seconds:.2f} s, speed-up {speedup:.1f}x"
                    f" (target >= {SPEEDUP_TARGET:g}x: {'met' if speedup >= SPEEDUP_TARGET else 'NOT met'})"
                )
            print(f"    max |accuracy difference| between the three methods: {ev['max_abs_diff']:.1e}")
        rows.append((name, timing, ev))
    print("\nsummary: task, s/epoch, full training s (fused), path evaluation s, speed-up vs reference, vs authors")
    for name, timing, ev in rows:
        t = timing["fused"]
        nan = float("nan")
        print(
            f"  {name:13s} {t['epoch_s']:8.3f} {t['train_s']:9.1f} {ev['batched_s']:8.2f}"
            f" {ev.get('speedup', nan):6.1f}x {ev.get('authors_speedup', nan):6.1f}x"
        )
    write_summary_table(rows)


SUMMARY_COLUMNS = [
    ("task", "{task}"), ("training: plain PyTorch", "{baseline_train_s:.1f} s"),
    ("autograd", "{autograd_train_s:.1f} s"), ("fused (default)", "{fused_train_s:.1f} s"),
    ("training target (fused)", "< {target_s:.0f} s: {fused_train_s:<{target_s}?met|NOT met}"),
    ("evaluation: batched", "{batched_s:.2f} s"), ("speed-up vs per-path reference", "{speedup:.1f}x"),
    ("vs authors-style loop", "{authors_speedup:.1f}x"),
    ("speed-up target (>= {speedup_target:g}x)", "{least_speedup:>={speedup_target}?met|NOT met}"),
]  # fmt: skip
"""The summary table: (title, cell template) per column (``_common.write_table``)."""


def write_summary_table(rows: list) -> None:
    """The summary as the table docs/performance.md quotes (``benchmarks/out/bench_paths.md``), with its data."""
    table = []
    for name, timing, ev in rows:
        speedups = [ev[k] for k in ("speedup", "authors_speedup") if k in ev]
        table.append({"task": name, **{f"{v}_train_s": timing[v]["train_s"] for v in ("baseline", "autograd", "fused")},
                      "target_s": TARGETS_S.get(name), "batched_s": ev["batched_s"], "speedup": ev.get("speedup"),
                      "authors_speedup": ev.get("authors_speedup"),
                      "least_speedup": min(speedups) if speedups else None})  # fmt: skip
    values = {"speedup_target": SPEEDUP_TARGET, "cpu": torch.backends.cpu.get_cpu_capability()}
    write_table("bench_paths", SUMMARY_COLUMNS, table, values=values, note="One thread, CPU {cpu}.")


if __name__ == "__main__":
    main()
