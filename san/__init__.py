"""san: a reproducible research pipeline for the inductive biases of self-attention.

Rebuilds the results of Dong, Cordonnier & Loukas, "Attention is not all you need: pure attention loses rank
doubly exponentially with depth" (ICML 2021, arXiv:2103.03404).
"""

__version__ = "0.1.0"
