"""The circle experiment (the paper's Fig. 3): one layer applied recurrently to two circular 2-D sequences.

``spec`` (config checks and slices, torch-free), ``experiment`` (data, model, training, rollout), ``results``
(variables, gathering, the collapse table; torch-free), ``plots``.
"""
