"""Theorem 2.2 (and its multi-head corollary) measured against its bound on pure SANs at random initialisation.

``spec`` (names, defaults; torch-free), ``residual`` (res with the composite-norm minimiser), ``bound`` (the
bound: nominal, required and certified gamma; the exponent), ``experiment`` (the sweep), ``inputs`` (prose
embeddings; torch), ``claims``, ``plots``.
"""
