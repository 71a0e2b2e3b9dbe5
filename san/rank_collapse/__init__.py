"""Rank collapse in real architectures (the paper's Sec. 4, Fig. 2) and chained attention along paths (appendix).

``spec`` (names and constants, torch-free), ``models`` (acquisition and loading), ``ablations`` (the four variants),
``experiment`` (the residual per layer), ``path_products``, ``plots``.
"""
