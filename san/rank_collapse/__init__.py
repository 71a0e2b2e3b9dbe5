"""Rank collapse in real architectures (the paper's Sec. 4, Fig. 2) and chained attention along paths (appendix).

``spec`` (names and constants, torch-free), ``experiment`` (the residual per layer), ``attention_products``, ``sink``,
``claims``, ``plots``, ``tables``; two wings of their own: ``vision`` (image encoders) and ``series`` (along training).
The models, their acquisition and the four variants are :mod:`san.models`'s.
"""
