"""Slow, obviously correct references that the tests hold the library's fast paths against: the per-path loop of
the path-effectiveness evaluation lives in :mod:`san.paths.reference` (the benchmarks time it too); the per-layer
measures of massive activations, high-norm tokens and spectral compression (:mod:`san.measures.phenomena`) are written
out here in plain numpy, from their definitions."""

import numpy as np

from san.paths.reference import reference_head, reference_path_set_accuracy, reference_path_set_logits

__all__ = [
    "assert_phenomena",
    "numpy_phenomena",
    "reference_head",
    "reference_path_set_accuracy",
    "reference_path_set_logits",
]


def numpy_phenomena(x: np.ndarray, factor: float) -> dict[str, float]:
    """Every measure of :data:`san.measures.phenomena.PHENOMENA` of one token matrix ``x`` (T x d): the spectrum from
    the singular values (the library takes the Gram matrix's eigenvalues), the composite norm as sums."""
    mags = np.abs(x)
    token, dim = np.unravel_index(np.argmax(mags), mags.shape)
    norms = np.sqrt((x**2).sum(axis=1))
    lam = np.linalg.svd(x, compute_uv=False) ** 2  # descending, min(T, d) of them
    p = lam / lam.sum()
    nz = p[p > 0]

    def composite(a: np.ndarray) -> float:
        return np.sqrt(np.abs(a).sum(axis=0).max() * np.abs(a).sum(axis=1).max())

    kept = x[norms <= factor * np.median(norms)]
    return {
        "massive_ratio": mags.max() / np.median(mags),
        "massive_token": token,
        "massive_dim": dim,
        "token_norm_ratio": norms.max() / np.median(norms),
        "first_token_norm_ratio": norms[0] / np.median(norms),
        "sigma1_share": p[0],
        "matrix_entropy": -(nz * np.log(nz)).sum() / np.log(min(x.shape)),
        "residual_ratio_no_massive": composite(kept - kept.mean(axis=0)) / composite(kept),
    }


def assert_phenomena(got: dict[str, np.ndarray], states: list[np.ndarray], factor: float) -> None:
    """``got[name]`` ``(layers + 1, sequences)`` against :func:`numpy_phenomena` of every layer and sequence of
    ``states`` (each ``(sequences, T, d)``)."""
    for layer, x in enumerate(states):
        for s in range(x.shape[0]):
            for name, value in numpy_phenomena(x[s], factor).items():
                assert np.isclose(got[name][layer, s], value, rtol=1e-9, atol=1e-12), (name, layer, s)
