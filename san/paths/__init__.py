"""Path effectiveness (the paper's Sec. 2.1 and Fig. 4): SANs trained on memorisation, sorting and convex hull,
evaluated with only paths of length k; and the path-length distribution of common architectures.

``spec`` (names, constants, path counts, task slices; torch-free), ``tasks`` (data), ``model`` (the SAN, S seeds
stacked), ``fused`` (its hand-written training layer), ``training``, ``experiment`` (a task's training and
evaluation), ``evaluate`` (path sets), ``reference`` (the per-path loop it is tested against), ``decomposition``
(the exact split by path length), ``counts`` (path-length distributions), ``results`` (variable descriptions),
``claims``, ``table``, ``plots``.
"""
