"""Everything the workflow knows about transformer models, in one place, by job: the torch-free family table
(``spec``) and the checks of the config's model entries against it (``entries``), the registry of transformers
classes built from it (``families``), the recognition of a model's family from its config.json (``recognise``), the
sources of weights (``sources``) and the one door into a verified model folder (``store``), the loading of a folder
(``load``, ``stream``), and the ablations that turn a model into the paper's variants (``ablations``). Every
experiment imports model code from here.
"""
