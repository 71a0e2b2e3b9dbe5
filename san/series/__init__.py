"""The offline training series: a small GPT-NeoX trained on the pinned text, whose checkpoints (Pythia's schedule,
:mod:`san.models.revisions`) are model folders analysed like any revision of a model.

``train``: the vocabulary, the training, the checkpoints as model folders through :func:`san.models.store.store`,
resumable.
"""
