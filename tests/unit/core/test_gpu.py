"""On a CUDA device (``gpu`` mark; skipped where torch sees none): the paper's token-uniformity measure (Sec. 2.2)
computed on the GPU equals its definition computed in numpy, in float64 to round-off and in float32 to float32's
precision, so a job on a GPU reports what a job on the CPU reports."""

import numpy as np
import pytest
import torch

from san.measures.residual import relative_residual

pytestmark = pytest.mark.gpu


def reference(x: np.ndarray) -> np.ndarray:
    """``||X - 1 mean(X)||_{1,inf} / ||X||_{1,inf}`` per batch element, with ``||A||_{1,inf} = sqrt(||A||_1 ||A||_inf)``
    (largest absolute column sum times largest absolute row sum)."""

    def norm(a: np.ndarray) -> np.ndarray:
        return np.sqrt(np.abs(a).sum(axis=-2).max(axis=-1) * np.abs(a).sum(axis=-1).max(axis=-1))

    return norm(x - x.mean(axis=-2, keepdims=True)) / norm(x)


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_relative_residual_on_the_gpu_is_its_definition(dtype, rtol):
    x = torch.randn(8, 32, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x[0] = x[0, :1]  # one token-uniform (rank-1) element: zero residual
    on_gpu = relative_residual(x.to("cuda", dtype)).cpu().double().numpy()
    expected = reference(x.numpy())
    np.testing.assert_allclose(on_gpu[1:], expected[1:], rtol=rtol)
    assert abs(on_gpu[0]) < 10 * torch.finfo(dtype).eps
