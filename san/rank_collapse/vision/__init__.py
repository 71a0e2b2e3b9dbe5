"""Rank collapse in image encoders (beyond the paper): the four variants of Fig. 2 on pinned photographs and seeded
noise images, over all tokens and the patch tokens alone, with the patch grid's spatial spectrum.

``spec`` (config checks, torch-free), ``experiment`` (the pixel inputs and the measures per layer), ``claims`` (the
``vision`` section of summary.json), ``plots``, ``tables`` (the documents' vision table).
"""
