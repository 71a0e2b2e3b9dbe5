"""What pretrained transformers do in their layers, checked against the literature: massive activations (Sun et al.
2024), attention sinks (Gu et al. 2025, Barbero et al. 2025), compression (Queipo-de-Llano et al. 2025) against
Dong et al.'s rank collapse, and high-norm tokens in a small ViT (Darcet et al. 2024, Bach et al. 2025).

``spec`` (names and constants, torch-free), ``data`` (what the claims read from the rank-collapse, vision and
context-length results), ``checks`` (one claim judged over its models), the claims (``massive``, ``colocation``,
``compression``, ``context``, ``high_norm``, assembled by ``claims``: the ``phenomena`` section of summary.json),
``table`` (the models x claims table as netCDF and CSV), ``tables`` (its Markdown) and ``plots``.
"""
