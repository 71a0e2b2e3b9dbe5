"""Prose inputs of the theorem check: the rank-collapse experiment's token ids through BERT's init embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from san.core.storage import read_netcdf
from san.models.load import load_model
from san.models.spec import PROSE_EMBEDDING_FAMILY


def prose_embeddings(model_folder: str | Path, inputs_path: str | Path, n_sequences: int, tokens: int) -> np.ndarray:
    """``model.embeddings(input_ids)`` (word + position + token-type embeddings, then BERT's embedding LayerNorm; eval
    mode) of the first ``n_sequences`` sequences truncated to their first ``tokens`` tokens, float64, shape
    ``(n_sequences, tokens, hidden)``: the input that BERT's first layer sees in the paper's Fig. 2.
    """
    ids = read_netcdf(inputs_path)["input_ids"].values[:n_sequences, :tokens]
    model = load_model(model_folder, PROSE_EMBEDDING_FAMILY, torch.float64)
    with torch.no_grad():
        out = model.embeddings(input_ids=torch.as_tensor(ids, dtype=torch.long))
    return out.double().numpy()
