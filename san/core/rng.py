"""Device-independent random draws: every draw comes from a seeded CPU generator and then moves to the device.

CUDA's generator is another random stream than the CPU's: a draw made on the GPU with the same seed gives other
numbers, so a GPU run would be another random sample. Drawing on the CPU keeps one seed one sample on every device.
"""

from __future__ import annotations

import torch


def cpu_generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` (the only kind of generator the experiments draw from)."""
    return torch.Generator(device="cpu").manual_seed(int(seed))


def randn(
    shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Standard normal draws of ``shape`` from the CPU ``generator``, moved to ``device``: the same numbers on any
    device (the CPU's draw, copied)."""
    return torch.randn(shape, generator=generator, dtype=dtype).to(device)
