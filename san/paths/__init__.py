"""Path effectiveness (the paper's Sec. 2.1 and Fig. 4): SANs trained on memorisation, sorting and convex hull,
evaluated with only paths of length k; and the path-length distribution of common architectures.

``spec`` (names, constants, path counts, task slices; torch-free), ``tasks`` (data), ``model`` (the SAN), ``fused``
(its hand-written training layer), ``training``, ``evaluate`` (path sets), ``plots``.
"""
