"""The circle experiment (the paper's Fig. 3): one layer, trained to step two point sequences along a
circle, then applied recurrently.

Data (Fig. 3): ``n`` points evenly spaced on a circle; an example holds the two tokens at indices ``i`` and
``i + n/2 - 1`` (two sequences on opposite arcs) and the target is the pair of next points ``(i + 1, i + n/2)``.

Model (Fig. 3): a linear embedding of each 2-D point and LayerNorm, the H-head attention block, optionally the MLP
block, and a linear read-out to 2-D. Two independent switches decide whether it is pure attention:

- ``layer_skip``: the residual inside the layer, around attention (and around the MLP when there is one);
- ``step_skip``: the residual across recurrent steps, ``X_{t+1} = X_t + f(X_t)``; the layer is then trained to
  predict the step ``Y - X`` rather than the next point ``Y``.

Without either skip (and without the MLP) one step is ``X_{t+1} = R(SA(LN(E X_t)))``, a pure self-attention
network; applied recurrently it is a deep weight-shared SAN, to which the paper's convergence theorem applies: token
differences shrink doubly exponentially once they are small. A "SAN" that keeps its inner residual (the original code's
post-LN BERT layer does) is not pure attention.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
import xarray as xr
from torch import nn

from san.circle.results import DATA_VARIABLES, describe_variables
from san.core.attention import MultiHeadSelfAttention
from san.core.device import resolve_dtype

N_TOKENS = 2  # two sequences per example (the paper's Fig. 3)
N_COORDS = 2  # points in the plane


@dataclass(frozen=True)
class Variant:
    """One architecture of the paper's Fig. 3 grid: which skips and whether the MLP block is present."""

    layer_skip: bool
    step_skip: bool
    mlp: bool

    @classmethod
    def from_config(cls, spec: Mapping[str, bool]) -> Variant:
        """The switches of one entry of the config's ``circle.variants``."""
        return cls(layer_skip=bool(spec["layer_skip"]), step_skip=bool(spec["step_skip"]), mlp=bool(spec["mlp"]))


# --------------------------------------------------------------------------------------------------------- data


def circle_points(n_points: int, radius: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``n_points`` points evenly spaced on the circle of ``radius`` centred at the origin, counter-clockwise from
    angle 0, shape ``(n_points, 2)`` (the paper's Fig. 3 uses 1000 points and radius 0.3)."""
    if n_points < 4:
        raise ValueError(f"the circle needs at least 4 points, got {n_points}")
    theta = torch.arange(n_points, dtype=torch.float64) * (2 * math.pi / n_points)
    return (radius * torch.stack((torch.cos(theta), torch.sin(theta)), dim=-1)).to(dtype)


def pair_offset(n_points: int) -> int:
    """Index offset between the two tokens of an example, ``n/2 - 1`` (499 for the paper's 1000 points)."""
    return n_points // 2 - 1


def circle_dataset(
    n_points: int, radius: float, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of the paper's Fig. 3 task, each ``(examples, 2 tokens, 2 coords)``, in order.

    Example ``i`` (``0 <= i < n/2 - 1``) holds the points ``i`` and ``i + n/2 - 1``; its target is the pair of next
    points ``i + 1`` and ``i + n/2``. The first tokens walk the arc ``0 .. n/2 - 1``, the second ones the opposite
    arc ``n/2 - 1 .. n - 2``; no index wraps around.
    """
    pts = circle_points(n_points, radius, dtype)
    offset = pair_offset(n_points)
    i = torch.arange(offset)
    inputs = torch.stack((pts[i], pts[i + offset]), dim=1)
    targets = torch.stack((pts[i + 1], pts[i + offset + 1]), dim=1)
    return inputs, targets


def training_sequences(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The two training sequences (the paper's Fig. 3 background arcs), ``(2 tokens, examples + 1, 2)``: each
    token's inputs in order followed by its last target."""
    return torch.cat((inputs, targets[-1:]), dim=0).transpose(0, 1)


# -------------------------------------------------------------------------------------------------------- model


class CircleLayer(nn.Module):
    """The one-layer model of the paper's Fig. 3 with independent ``layer_skip`` and ``step_skip`` switches.

    ``update(X)`` is the layer's output ``f(X)`` (2-D per token); ``forward(X)`` is one recurrent step,
    ``X + f(X)`` with ``step_skip`` and ``f(X)`` without.

    Args:
        hidden_dim: width d of the embedding, attention and MLP.
        n_heads: attention heads H (the paper: 2).
        variant: the skip and MLP switches.
        mlp_ratio: hidden width of the MLP as a multiple of ``hidden_dim`` (the paper's code: 1).
        ln_eps: LayerNorm epsilon.
    """

    def __init__(self, hidden_dim: int, n_heads: int, variant: Variant, mlp_ratio: float = 1.0, ln_eps: float = 1e-5):
        super().__init__()
        self.variant = variant
        self.hidden_dim = hidden_dim
        # Creation order fixes which random numbers each parameter gets: the MLP comes last, so that for one seed
        # every variant shares the same embedding, attention and read-out (paired comparisons across variants).
        self.embed = nn.Linear(N_COORDS, hidden_dim)
        self.norm = nn.LayerNorm(hidden_dim, eps=ln_eps)
        self.attn = MultiHeadSelfAttention(hidden_dim, n_heads)
        self.readout = nn.Linear(hidden_dim, N_COORDS)
        self.mlp: nn.Sequential | None = None
        if variant.mlp:
            width = max(1, round(mlp_ratio * hidden_dim))
            self.mlp = nn.Sequential(nn.Linear(hidden_dim, width), nn.GELU(), nn.Linear(width, hidden_dim))

    def update(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's output ``f(X)`` for points ``x`` of shape ``(batch, tokens, 2)``."""
        h = self.norm(self.embed(x))
        a = self.attn(h)
        h = h + a if self.variant.layer_skip else a
        if self.mlp is not None:
            m = self.mlp(h)
            h = h + m if self.variant.layer_skip else m
        return self.readout(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One recurrent step: ``X + f(X)`` with ``step_skip``, else ``f(X)``."""
        f = self.update(x)
        return x + f if self.variant.step_skip else f


def init_weights(model: nn.Module, std: float | None, generator: torch.Generator) -> None:
    """Initialise ``model`` from ``generator``: with ``std``, the BERT scheme of the paper's code (linear weights
    ``N(0, std^2)``, zero biases, LayerNorm 1 and 0); with ``None``, PyTorch's default initialisation."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            if std is None:
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                bound = 1 / math.sqrt(module.in_features)
                nn.init.uniform_(module.bias, -bound, bound, generator=generator)
            else:
                nn.init.normal_(module.weight, 0.0, std, generator=generator)
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


def build_model(
    variant: Variant,
    hidden_dim: int,
    n_heads: int,
    seed: int,
    init_std: float | None = 0.02,
    mlp_ratio: float = 1.0,
    ln_eps: float = 1e-5,
    dtype: torch.dtype = torch.float32,
) -> CircleLayer:
    """A freshly initialised :class:`CircleLayer`; the same ``seed`` gives the same shared parameters in every
    variant (the MLP's are drawn last)."""
    model = CircleLayer(hidden_dim, n_heads, variant, mlp_ratio=mlp_ratio, ln_eps=ln_eps)
    init_weights(model, init_std, torch.Generator().manual_seed(seed))
    return model.to(dtype)


# ----------------------------------------------------------------------------------------------- train, rollout


def step_loss(model: CircleLayer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Summed squared error of one recurrent step against the next points (the paper's Fig. 3 objective).

    With ``step_skip`` the layer's output is thereby fitted to the step ``Y - X``.
    """
    return (model(x) - y).square().sum()


def train(
    model: CircleLayer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    epochs: int,
    batch_size: int,
    lr: float,
) -> torch.Tensor:
    """Adam on the summed squared error, examples in order (no shuffling), as in the paper's Fig. 3.

    Returns the training loss per epoch: the epoch's summed squared error divided by the number of examples.
    The loop is kept minimal (pre-split batches, fused Adam where available, no host synchronisation per step).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        opt = torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # fused kernels missing for this device or dtype
        opt = torch.optim.Adam(params, lr=lr, foreach=True)
    batches = list(zip(inputs.split(batch_size), targets.split(batch_size), strict=True))
    losses = torch.zeros(epochs, dtype=torch.float64)
    model.train()
    for epoch in range(epochs):
        total = torch.zeros((), dtype=inputs.dtype, device=inputs.device)
        for x, y in batches:
            loss = step_loss(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
        losses[epoch] = total.to(torch.float64).cpu()
    model.eval()
    return losses / inputs.shape[0]


@torch.inference_mode()
def dataset_loss(model: CircleLayer, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Summed squared error of one step over all examples, divided by their number."""
    return float(step_loss(model, inputs, targets)) / inputs.shape[0]


@torch.inference_mode()
def rollout(model: CircleLayer, x0: torch.Tensor, steps: int) -> torch.Tensor:
    """Apply the trained layer recurrently ``steps`` times from ``x0`` (the paper's Fig. 3: T = 300 from the first
    example). Returns the states ``X_0 .. X_T``, shape ``(steps + 1, tokens, 2)``."""
    states = torch.empty((steps + 1, *x0.shape), dtype=x0.dtype, device=x0.device)
    states[0] = x0
    x = x0.unsqueeze(0)
    for t in range(1, steps + 1):
        x = model(x)
        states[t] = x[0]
    return states


def token_distance(states: torch.Tensor) -> torch.Tensor:
    """Euclidean distance between the two tokens at every step, ``(steps,)``: zero means the sequences collapsed
    to one point (token uniformity, the paper's Sec. 2.2, for two tokens)."""
    return torch.linalg.vector_norm(states[..., 0, :] - states[..., 1, :], dim=-1)


def centre_distance(states: torch.Tensor, centre: Sequence[float] = (0.0, 0.0)) -> torch.Tensor:
    """Distance of each token from the circle's centre, ``(steps, tokens)``: the radius the trajectories keep."""
    c = torch.as_tensor(centre, dtype=states.dtype, device=states.device)
    return torch.linalg.vector_norm(states - c, dim=-1)


# ------------------------------------------------------------------------------------------------- experiment


def run_circle(
    variant: Variant,
    hidden_dim: int,
    seed: int,
    *,
    n_points: int,
    radius: float,
    n_heads: int,
    init_std: float | None,
    mlp_ratio: float,
    ln_eps: float,
    epochs: int,
    batch_size: int,
    lr: float,
    train_dtype: torch.dtype,
    steps: int,
    rollout_dtype: torch.dtype,
    device: torch.device | str = "cpu",
) -> xr.Dataset:
    """Train one (variant, hidden dim, seed) of the paper's Fig. 3 and roll it out; one job of the sweep.

    The returned dataset holds the trajectory ``(step, token, coord)``, the two collapse measures, the per-epoch
    training loss and the one-step loss over the training set before and after training. The rollout uses a copy
    of the trained layer cast to ``rollout_dtype`` (float64 resolves the doubly exponential decay further).
    """
    device = torch.device(device)
    inputs64, targets64 = circle_dataset(n_points, radius, torch.float64)
    inputs, targets = inputs64.to(device, train_dtype), targets64.to(device, train_dtype)
    model = build_model(variant, hidden_dim, n_heads, seed, init_std, mlp_ratio, ln_eps, train_dtype).to(device)
    init_loss = dataset_loss(model, inputs, targets)
    losses = train(model, inputs, targets, epochs, batch_size, lr)
    final_loss = dataset_loss(model, inputs, targets)

    model_r = model.to(rollout_dtype)
    states = rollout(model_r, inputs64[0].to(device, rollout_dtype), steps).cpu().to(torch.float64)
    ds = _run_dataset(states, losses, inputs64, targets64, epochs)
    ds["init_loss"] = ((), init_loss)
    ds["final_loss"] = ((), final_loss)
    return ds.assign_attrs(
        hidden_dim=hidden_dim,
        layer_skip=int(variant.layer_skip),
        step_skip=int(variant.step_skip),
        mlp=int(variant.mlp),
        description="Circle experiment (Dong et al. 2021, Fig. 3): one layer applied recurrently to two sequences",
    )


def _run_dataset(
    states: torch.Tensor, losses: torch.Tensor, inputs64: torch.Tensor, targets64: torch.Tensor, epochs: int
) -> xr.Dataset:
    """One run's rollout ``states`` ``(step, token, coord)`` with its two collapse measures, the per-epoch training
    ``losses``, the training sequences and the copy predictor's loss, as a dataset."""
    return xr.Dataset(
        {
            "trajectory": (("step", "token", "coord"), states.numpy()),
            "token_distance": (("step",), token_distance(states).numpy()),
            "centre_distance": (("step", "token"), centre_distance(states).numpy()),
            "loss": (("epoch",), losses.numpy()),
            "sequence": (("token", "position", "coord"), training_sequences(inputs64, targets64).numpy()),
            "copy_loss": ((), float((targets64 - inputs64).square().sum()) / inputs64.shape[0]),
        },
        coords={
            "step": np.arange(states.shape[0]),
            "token": np.arange(N_TOKENS),
            "coord": ["x", "y"],
            "epoch": np.arange(1, epochs + 1),
            "position": np.arange(inputs64.shape[0] + 1),
        },
    )


def run(settings: Mapping[str, Any], hidden_dim: int, seeds: Sequence[int], device: torch.device | str = "cpu"):
    """One job of the Fig. 3 sweep: train and roll out one variant at one hidden dim for each of ``seeds``.

    ``settings`` is the variant's config slice (:func:`san.circle.spec.run_slice`). Each seed is an independent
    training (its own generator), so a job of several seeds computes what one job per seed would. Returns the
    runs stacked along ``seed`` (the data variables, the same for every seed, once), with the training time of each
    seed in the ``train_seconds`` attribute (seed -> seconds).
    """
    variant = Variant.from_config(settings["variant"])
    data, model, train_cfg, roll = settings["data"], settings["model"], settings["train"], settings["rollout"]
    runs, seconds = [], {}
    for seed in seeds:
        start = time.process_time()
        ds = run_circle(
            variant,
            hidden_dim,
            seed,
            n_points=data["n_points"],
            radius=data["radius"],
            n_heads=model["n_heads"],
            init_std=model["init_std"],
            mlp_ratio=model.get("mlp_ratio", 1.0),
            ln_eps=model["ln_eps"],
            epochs=train_cfg["epochs"],
            batch_size=train_cfg["batch_size"],
            lr=train_cfg["lr"],
            train_dtype=resolve_dtype(train_cfg["dtype"]),
            steps=roll["steps"],
            rollout_dtype=resolve_dtype(roll["dtype"]),
            device=device,
        )
        seconds[int(seed)] = time.process_time() - start
        runs.append(ds)
    shared = runs[0][list(DATA_VARIABLES)]
    out = xr.concat([ds.drop_vars(DATA_VARIABLES) for ds in runs], dim=pd.Index(list(seeds), name="seed"))
    out = describe_variables(out.merge(shared), data["n_points"], data["radius"])
    return out.assign_attrs(runs[0].attrs, train_seconds=seconds)
