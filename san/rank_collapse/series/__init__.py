"""Rank collapse along training: Fig. 2's measures on every checkpoint of a training series, the offline series (a
small GPT-NeoX trained on the pinned text, checkpoints on Pythia's schedule) and series of hub revisions.

``spec`` (config checks, torch-free), ``train`` (the offline series: vocabulary, training, checkpoints as model
folders, resumable), ``experiment`` (the measures with a revision dimension), ``measures`` (the pretrained
phenomena per checkpoint: the unmodified model's measures reduced over its layers), ``claims`` (the ``training_series``
section of summary.json), ``plots``, ``tables`` (the documents' training-series table). Revision names, schedules and
the acquisition of hub revisions are :mod:`san.models.revisions`'.
"""
