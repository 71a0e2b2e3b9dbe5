"""Training of the path-effectiveness SANs (the paper's Fig. 4 settings) with per-epoch loss logging.

These models are tiny: a step costs Python and kernel-launch overhead more than arithmetic. The loop therefore
keeps the whole dataset on the device, draws batches by indexing (no DataLoader), uses the fused Adam/AdamW
kernels (one kernel for all parameters), sets gradients to None instead
of zeroing them, and reads the loss back once per epoch instead of once per step. The model draws its dropout
masks in bulk from numpy and, with ``fused: true`` (the default), runs every layer as one autograd node with a
hand-written backward and, on AVX-512 CPUs, oneDNN projections (:mod:`san.paths.fused`). ``torch.compile`` is optional
(``compile: true``): on a CPU it is slower than eager at these sizes, compile time aside
(see ``benchmarks/bench_paths.py``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from san.paths.model import SAN
from san.paths.tasks import IGNORE, TaskData

log = logging.getLogger("san")


@dataclass
class TrainResult:
    """Per-epoch training record: mean loss over the epoch's batches, learning rate used, wall seconds."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    setup_seconds: float = 0.0

    @property
    def total_seconds(self) -> float:
        return self.setup_seconds + sum(self.seconds)


def make_optimizer(model: nn.Module, cfg: dict[str, Any], device: torch.device) -> torch.optim.Optimizer:
    """Adam (L2 weight decay added to the gradient, as the authors' ``torch.optim.Adam``) or AdamW (decoupled
    weight decay, as the Hugging Face Trainer of the memorisation run), fused into one kernel where supported."""
    kind = cfg["optimizer"]
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(kind)
    if cls is None:
        raise ValueError(f"unknown optimizer {kind!r}; expected adam or adamw")
    kwargs: dict[str, Any] = {
        "lr": cfg["lr"],
        "betas": tuple(cfg["betas"]),
        "eps": cfg["eps"],
        "weight_decay": cfg["weight_decay"],
    }
    if device.type in ("cpu", "cuda"):
        kwargs["fused"] = True
    return cls(model.parameters(), **kwargs)


def lr_factor(schedule: dict[str, Any], epoch: int, step: int, total_steps: int) -> float:
    """Multiplier of the base learning rate at a (0-based) epoch and global step.

    ``constant``: 1. ``multistep``: ``gamma`` to the number of ``milestones`` (epochs) reached, as
    ``torch.optim.lr_scheduler.MultiStepLR`` stepped once per epoch. ``linear``: linear decay from 1 to 0 over all
    steps, as the Hugging Face Trainer's default schedule without warm-up.
    """
    kind = schedule["kind"]
    if kind == "constant":
        return 1.0
    if kind == "multistep":
        return schedule["gamma"] ** sum(epoch >= m for m in schedule["milestones"])
    if kind == "linear":
        return max(0.0, (total_steps - step) / total_steps)
    raise ValueError(f"unknown schedule {kind!r}; expected constant, multistep or linear")


def train_model(
    model: SAN,
    data: TaskData,
    cfg: dict[str, Any],
    seed: int,
    device: torch.device | str = "cpu",
    on_epoch: Callable[[int, float, float, float], None] | None = None,
) -> TrainResult:
    """Train ``model`` on ``data`` with the settings ``cfg`` (the ``train`` slice of a task's config).

    Keys: ``epochs``, ``batch_size``, ``optimizer`` (adam/adamw), ``lr``, ``betas``, ``eps``, ``weight_decay``,
    ``schedule`` (see :func:`lr_factor`), ``max_grad_norm`` (None: no clipping), ``shuffle``, ``compile`` and
    ``fused`` (see :meth:`san.paths.model.SAN.set_fused`; ignored with ``compile``, which traces the autograd
    formulation).
    ``seed`` drives the batch order and dropout. ``on_epoch(epoch, loss, lr, seconds)`` is called after each epoch.
    """
    device = torch.device(device)
    t_setup = time.perf_counter()
    model.to(device).train()
    fused = bool(cfg.get("fused", True))
    if fused and cfg.get("compile"):
        log.info("compile: true traces the autograd formulation; the fused layer (san.paths.fused) is eager-only")
        fused = False
    model.set_fused(fused)
    data = data.to(device)
    gen = torch.Generator(device="cpu").manual_seed(seed)  # batch order
    torch.manual_seed(seed)  # any torch-drawn randomness
    model.dropout_masks.seed(seed)  # dropout masks
    opt = make_optimizer(model, cfg, device)
    n = len(data)
    bs = cfg["batch_size"]
    steps_per_epoch = math.ceil(n / bs)
    total_steps = steps_per_epoch * cfg["epochs"]
    base_lr = cfg["lr"]
    clip = cfg.get("max_grad_norm")

    def loss_of(x: torch.Tensor, y: torch.Tensor, m: torch.Tensor | None) -> torch.Tensor:
        logits = model(x, m)
        return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)

    loss_fn = torch.compile(loss_of, dynamic=False) if cfg.get("compile") else loss_of
    result = TrainResult()
    if cfg.get("compile"):  # compile before timing epochs: the first call traces forward and backward
        xb, yb = data.inputs[:bs], data.labels[:bs]
        mb = None if data.mask is None else data.mask[:bs]
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        loss_fn(xb, yb, mb).backward()
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        model.dropout_masks.seed(seed)  # the trace drew masks: start the run on the same masks as eager
    result.setup_seconds = time.perf_counter() - t_setup

    step = 0
    for epoch in range(cfg["epochs"]):
        t0 = time.perf_counter()
        lr = base_lr * lr_factor(cfg["schedule"], epoch, step, total_steps)
        order = torch.randperm(n, generator=gen) if cfg.get("shuffle", True) else torch.arange(n)
        order = order.to(device)
        epoch_loss = torch.zeros((), device=device)
        for start in range(0, n, bs):
            if cfg["schedule"]["kind"] == "linear":
                lr = base_lr * lr_factor(cfg["schedule"], epoch, step, total_steps)
            for group in opt.param_groups:
                group["lr"] = lr
            idx = order[start : start + bs]
            m = None if data.mask is None else data.mask[idx]
            loss = loss_fn(data.inputs[idx], data.labels[idx], m)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
            opt.step()
            epoch_loss += loss.detach()
            step += 1
        mean_loss = float(epoch_loss) / steps_per_epoch
        seconds = time.perf_counter() - t0
        result.loss.append(mean_loss)
        result.lr.append(lr)
        result.seconds.append(seconds)
        if on_epoch is not None:
            on_epoch(epoch, mean_loss, lr, seconds)
        if not math.isfinite(mean_loss):
            raise FloatingPointError(f"training loss became {mean_loss} at epoch {epoch}")
    model.eval()
    return result
