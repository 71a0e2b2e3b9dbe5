"""Signal propagation at initialisation (beyond the paper): when does attention collapse, against published theory.

``spec`` (names, parameters and config checks, torch-free), ``simulator`` (random blocks, masks, centred attention,
metrics; torch float64), ``theory`` (Giorlandino & Goldt's recursion and critical inverse temperature; numpy),
``experiment`` (``run``: one sweep as an xarray Dataset), ``plots`` (one figure per sweep), ``claims`` (published
statements checked on the results, torch-free).
"""
