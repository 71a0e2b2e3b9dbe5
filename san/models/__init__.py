"""Everything the workflow knows about transformer models, in one place: the torch-free family table, the registry
of transformers classes built from it, the recognition of a model's family from its config.json, the acquisition of
weights into verified folders, and the ablations that turn a model into the paper's variants. Every experiment
imports model code from here.
"""
