"""What the experiments measure on a layer's token matrix or attention (each with one exact definition, each
citing its source): the paper's token-uniformity residual (:mod:`~san.measures.residual`), the pretrained
phenomena's per-layer measures (:mod:`~san.measures.phenomena`: massive activations, token norms, the spectrum) and
the first-token sink (:mod:`~san.measures.sink`). Above ``san.core`` (plumbing), below the experiments."""
