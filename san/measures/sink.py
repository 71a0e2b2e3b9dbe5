"""The first-token attention sink as a measure of an attention array (torch-free).

Gu et al. (ICLR 2025, "When attention sink emerges in language models") measure a head's sink as the mean, over the
queries of a sequence, of the attention it puts on the first token, ``alpha^{l,h} = (1/T) sum_k A^{l,h}_{k,1}``, and
count a head as a sink head when ``alpha^{l,h}`` exceeds a threshold (their epsilon = 0.3). The rank-collapse jobs
record ``alpha`` (:mod:`san.rank_collapse.sink`); the share of sink heads per layer (:func:`sink_share`) is what every
claim about sinks reads, with the threshold of the report's config.
"""

from __future__ import annotations

import xarray as xr


def sink_share(alpha: xr.DataArray, threshold: float) -> xr.DataArray:
    """Gu et al.'s sink measure per layer: the share of heads whose attention on the first token, averaged over the
    queries (``alpha``, with a ``head`` dimension), exceeds ``threshold`` (their epsilon); NaN where ``alpha`` is
    (layer 0, the embedding output, has no attention)."""
    above = (alpha > threshold).astype(float).mean("head")
    return above.where(alpha.notnull().all("head"))
