"""Training of the path-effectiveness SANs (the paper's Fig. 4 settings), every seed of a task in one stacked
network, with per-epoch loss logging.

These models are tiny: a step costs Python and kernel-launch overhead more than arithmetic. The loop therefore
keeps every seed's dataset on the device, draws batches by indexing (no DataLoader), uses the fused Adam/AdamW
kernels (one kernel for all parameters), sets gradients to None instead of zeroing them, and reads the loss back
once per epoch. The model draws its dropout masks in bulk from numpy and, with ``fused: true`` (the default), runs
every layer as one autograd node with a hand-written backward (:mod:`san.paths.fused`). ``compile: true`` (optional)
is slower than eager on a CPU at these sizes, compile time aside (``benchmarks/bench_paths.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from san.core.device import deterministic
from san.core.rng import cpu_generator
from san.paths.model import SAN
from san.paths.tasks import IGNORE, TaskData

log = logging.getLogger("san")


@dataclass
class TrainResult:
    """Per-epoch training record: mean loss over the epoch's batches (one per seed), learning rate, wall seconds."""

    loss: list[list[float]] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    setup_seconds: float = 0.0

    @property
    def total_seconds(self) -> float:
        return self.setup_seconds + sum(self.seconds)

    def record(self, losses: list[float], lr: float, seconds: float) -> None:
        self.loss.append(losses)
        self.lr.append(lr)
        self.seconds.append(seconds)


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


class Learner:
    """A :class:`~san.paths.model.SAN` of S seeds and every seed's training set, stacked: one step trains all seeds.
    ``fused`` (default true): every layer one :class:`~san.paths.fused.SANLayerFunction`, else autograd op by op
    (:meth:`~san.paths.model.SANLayer.autograd_forward`, what ``compile: true`` traces). The loss is the sum over
    seeds of each seed's mean token cross-entropy (its gradient in a seed's weights is that seed's own)."""

    def __init__(self, model: SAN, data: list[TaskData], cfg: dict[str, Any], device: torch.device) -> None:
        if len(data) != len(model.seeds) or len({len(d) for d in data}) != 1:
            raise ValueError("every seed of a SAN needs one training set, all of the same size")
        model.to(device).train()
        model.fused = bool(cfg.get("fused", True))
        if model.fused and cfg.get("compile"):
            log.info("compile: true traces the autograd formulation; the fused layer (san.paths.fused) is eager-only")
            model.fused = False
        for masks, seed in zip(model.masks, model.seeds, strict=True):
            masks.seed(seed)  # dropout masks
        self.model, self.masks, self.n_seeds, self.device = model, model.masks, len(data), device
        self.inputs = torch.cat([d.inputs for d in data]).to(device)
        self.labels = torch.cat([d.labels for d in data]).to(device)
        masks = [d.mask for d in data]
        self.mask = None if all(m is None for m in masks) else torch.cat(
            [torch.ones_like(d.labels, dtype=torch.bool) if d.mask is None else d.mask for d in data]
        ).to(device)  # fmt: skip
        self.offset = (torch.arange(len(data)) * len(data[0])).view(-1, 1).to(device)
        self.loss_fn = torch.compile(self._loss, dynamic=False) if cfg.get("compile") else self._loss
        if cfg.get("compile"):  # compile before timing epochs: the first call traces forward and backward
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.loss(torch.arange(cfg["batch_size"], device=device) + self.offset)[0].backward()
            model.load_state_dict(state)
            model.zero_grad(set_to_none=True)
            for masks, seed in zip(model.masks, model.seeds, strict=True):
                masks.seed(seed)  # the trace drew masks: start the run on the same masks as eager

    def _loss(self, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.model(x, m)
        if self.n_seeds == 1:  # cross_entropy's own mean
            loss = nn.functional.cross_entropy(logits.flatten(0, 2), y.flatten(), ignore_index=IGNORE)
            return loss, loss.detach().view(1)
        ce = nn.functional.cross_entropy(logits.flatten(0, 2), y.flatten(), ignore_index=IGNORE, reduction="none")
        per_seed = ce.view(len(y), -1).sum(1) / (y != IGNORE).flatten(1).sum(1)
        return per_seed.sum(), per_seed.detach()

    def loss(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss to minimise (see the class docstring) and every seed's mean token cross-entropy, detached.
        ``rows`` ``(S, b)``: seed i's batch as rows of the stacked data (its own indices plus ``offset[i]``)."""
        return self.loss_fn(self.inputs[rows], self.labels[rows], None if self.mask is None else self.mask[rows])

    def clip(self, max_norm: float) -> None:
        """Each seed's gradient clipped to ``max_norm`` by its own norm, as ``clip_grad_norm_`` clips a model."""
        if self.n_seeds == 1:
            nn.utils.clip_grad_norm_(self.model.parameters(), max_norm, foreach=True)
            return
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads]).norm(dim=0)
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        torch._foreach_mul_(grads, [coef.view(-1, *[1] * (g.ndim - 1)) for g in grads])


def training_key(task_cfg: Any, device: torch.device | str) -> str:
    """What a training's result depends on besides its own progress, as JSON: the task's config slice, the code
    (sha256 over the source of every ``san`` module the process has imported, by name), the torch version and the
    device. A checkpoint written under another key is not resumed (see :class:`Checkpoint`)."""
    code = hashlib.sha256()
    for name in sorted(n for n in sys.modules if n == "san" or n.startswith("san.")):
        path = getattr(sys.modules[name], "__file__", None)
        if path:
            code.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    parts = {"config": task_cfg, "code": code.hexdigest(), "torch": torch.__version__, "device": str(device)}
    return json.dumps(parts, sort_keys=True)


@dataclass
class Checkpoint:
    """Where and how often (``every_seconds`` of training between saves; 0: every epoch) a training saves its state
    to resume after a kill, outside the job's outputs (Snakemake keeps it when the job fails). ``key`` names the run
    (:func:`training_key`; empty: :func:`san.paths.experiment.train` sets it once the data, and the modules they
    import, are built): a checkpoint of another key is discarded, so a rerun after a code edit starts afresh."""

    path: Path
    every_seconds: float
    key: str = ""

    def load(self) -> dict[str, Any] | None:
        if not self.path.is_file():
            return None
        state = torch.load(self.path, map_location="cpu", weights_only=False)
        if state.get("key") != self.key:
            old, new = str(state.get("key")), json.loads(self.key)
            old = json.loads(old) if old.startswith("{") else {}
            differ = ", ".join(k for k in sorted(new) if old.get(k) != new[k])
            log.warning("discarding checkpoint %s: written with another %s", self.path, differ)
            self.remove()
            return None
        return state

    def save(self, state: dict[str, Any]) -> None:
        """Write atomically (a temporary file renamed), so a kill while saving leaves the previous checkpoint."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        torch.save({**state, "key": self.key}, tmp)
        os.replace(tmp, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class _Loop:
    """The state a training carries from epoch to epoch (everything a checkpoint holds)."""

    learner: Learner
    opt: torch.optim.Optimizer
    gens: list[torch.Generator]
    result: TrainResult
    epoch: int = 0
    step: int = 0

    def state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "weights": self.learner.model.state_dict(),
            "opt": self.opt.state_dict(),
            "gens": [g.get_state() for g in self.gens],
            "masks": [m.get_state() for m in self.learner.masks],
            "result": asdict(self.result),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.epoch, self.step = state["epoch"], state["step"]
        self.learner.model.load_state_dict(state["weights"])
        self.opt.load_state_dict(state["opt"])
        for g, s in zip(self.gens, state["gens"], strict=True):
            g.set_state(s)
        for m, s in zip(self.learner.masks, state["masks"], strict=True):
            m.set_state(s)
        self.result = TrainResult(**state["result"])

    def finite(self) -> bool:
        """Whether the last epoch's losses and every weight (its norm: inf or nan if an entry is) are finite."""
        norms = torch.stack(torch._foreach_norm(list(self.learner.model.parameters())))
        return all(math.isfinite(v) for v in self.result.loss[-1]) and bool(norms.isfinite().all())


def _epoch(loop: _Loop, cfg: dict[str, Any], n: int, total_steps: int) -> tuple[torch.Tensor, float]:
    """One pass over the training set: every seed's batches in the order of its own generator, one optimiser step
    for all seeds per batch. Returns the per-seed sum of the batch losses and the last learning rate used."""
    learner, opt, schedule, bs = loop.learner, loop.opt, cfg["schedule"], cfg["batch_size"]
    device, clip = learner.device, cfg.get("max_grad_norm")
    lr = cfg["lr"] * lr_factor(schedule, loop.epoch, loop.step, total_steps)
    shuffle = cfg.get("shuffle", True)
    orders = torch.stack([torch.randperm(n, generator=g) if shuffle else torch.arange(n) for g in loop.gens])
    orders = orders.to(device) + learner.offset  # (S, n): every seed's epoch of rows, stacked once
    epoch_loss = torch.zeros(learner.n_seeds, device=device)
    for start in range(0, n, bs):
        if schedule["kind"] == "linear":
            lr = cfg["lr"] * lr_factor(schedule, loop.epoch, loop.step, total_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        loss, per_seed = learner.loss(orders[:, start : start + bs])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            learner.clip(clip)
        opt.step()
        epoch_loss += per_seed
        loop.step += 1
    return epoch_loss, lr


def train(
    model: SAN,
    data: list[TaskData],
    cfg: dict[str, Any],
    device: torch.device | str = "cpu",
    on_epoch: Callable[[int, list[float], float, float], None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> TrainResult:
    """Train every seed of ``model``, seed i on ``data[i]`` (batch order from ``cpu_generator(model.seeds[i])``,
    dropout from its own masks: as it would alone), with the ``train`` slice ``cfg`` of a task's config. Keys:
    ``epochs``, ``batch_size``, ``optimizer`` (adam/adamw), ``lr``, ``betas``, ``eps``, ``weight_decay``,
    ``schedule`` (see :func:`lr_factor`), ``max_grad_norm`` (None: no clipping; per seed), ``shuffle``, ``compile``
    and ``fused`` (see :class:`Learner`). ``on_epoch(epoch, losses, lr, seconds)`` is called after each epoch
    (``losses``: one per seed). With a ``checkpoint`` the state is saved every ``checkpoint.every_seconds`` of
    training (never a non-finite one) and a run finds and resumes a saved state of its own key, so a killed run
    continues to the result an uninterrupted run gives."""
    t0 = time.perf_counter()
    device = torch.device(device)
    deterministic(device)
    learner = Learner(model, data, cfg, device)
    gens = [cpu_generator(s) for s in model.seeds]  # batch order
    loop = _Loop(learner, make_optimizer(model, cfg, device), gens, TrainResult())
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:
        loop.restore(state)
        log.info("resumed from %s after epoch %d", checkpoint.path, loop.epoch)
    loop.result.setup_seconds += time.perf_counter() - t0
    n_train = len(data[0])
    steps_per_epoch = math.ceil(n_train / cfg["batch_size"])
    total_steps, saved = steps_per_epoch * cfg["epochs"], time.perf_counter()
    while loop.epoch < cfg["epochs"]:
        t0 = time.perf_counter()
        epoch_loss, lr = _epoch(loop, cfg, n_train, total_steps)
        losses = (epoch_loss / steps_per_epoch).tolist()
        loop.result.record(losses, lr, time.perf_counter() - t0)
        loop.epoch += 1
        if not loop.finite():
            raise FloatingPointError(f"training loss or weights became non-finite at epoch {loop.epoch - 1}: {losses}")
        if checkpoint is not None and time.perf_counter() - saved >= checkpoint.every_seconds:
            checkpoint.save(loop.state())
            saved = time.perf_counter()
        if on_epoch is not None:
            on_epoch(loop.epoch - 1, losses, lr, loop.result.seconds[-1])
    model.eval()
    return loop.result
