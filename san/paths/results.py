"""The one table of the path experiments' result variables (the paper's Fig. 4 and the exact path decomposition):
the CF ``long_name`` and ``units`` of every variable and coordinate that ``results/paths/{task}.nc``,
``{task}_exact.nc`` and ``path_lengths.nc`` hold. Free of torch, so the path-length job starts fast.
"""

from __future__ import annotations

from san.core.storage import Variable

#: every variable and coordinate of the path results, by name (one meaning per name across the three files)
VARIABLES = {
    # coordinates
    "seed": Variable("training seed (data, initialisation, batch order, dropout)", "1"),
    "n_paths": Variable("paths per evaluated set", "1"),
    "path_length": Variable("path length k: layers where a path takes a head", "1"),
    "max_path_length": Variable("longest path length K kept in the truncated expansion", "1"),
    "repeat": Variable("independent sample of the set", "1"),
    "epoch": Variable("training epoch", "1"),
    "state": Variable("weights: trained, or the initialisation (same seed)", "1"),
    "sample": Variable("evaluation input", "1"),
    "architecture": Variable("architecture name", "1"),
    # path effectiveness (Fig. 4, left)
    "accuracy": Variable("token accuracy of the model restricted to a set of sampled paths", "1"),
    "full_model_accuracy": Variable("token accuracy of the full model", "1"),
    "chance_accuracy": Variable(
        "token accuracy of the input-blind predictor (most frequent training label per position)", "1"
    ),
    "paths": Variable("sampled paths: head index per layer", "1"),
    "path_share": Variable("share of all paths that have this length, C(L,k) H^k / (H+1)^L", "1"),
    "path_count": Variable("number of paths of this length, C(L,k) H^k", "1"),
    "train_loss": Variable("mean training loss", "1"),
    "train_lr": Variable("learning rate of the epoch", "1"),
    # exact path decomposition
    "reconstruction_error": Variable("max |sum_k Y_k + C - X_L| over real tokens and features", "1"),
    "norm_share": Variable("||Y_k||_F / sum_j ||Y_j||_F, mean over inputs", "1"),
    "norm_share_per_input": Variable("||Y_k||_F / sum_j ||Y_j||_F of each input (its real tokens)", "1"),
    "constant_norm_ratio": Variable("||C||_F / sum_j ||Y_j||_F, mean over inputs", "1"),
    "truncated_accuracy": Variable("token accuracy of C + sum_{k<=K} Y_k through the classifier", "1"),
    "truncated_agreement": Variable(
        "share of scored tokens where C + sum_{k<=K} Y_k predicts what the model predicts", "1"
    ),
    "single_length_accuracy": Variable("token accuracy of C + Y_k through the classifier", "1"),
    "full_accuracy": Variable("token accuracy of the full model (float64 forward)", "1"),
    # path-length distribution (Fig. 4, right)
    "share": Variable("share of paths of this length, C(L,k) H^k / (H+1)^L (NaN beyond L)", "1"),
    "count": Variable("number of paths of this length, C(L,k) H^k (float64)", "1"),
    "n_layers": Variable("self-attention layers L", "1"),
    "n_heads": Variable("heads per layer H", "1"),
    "mean_path_length": Variable("expected length of a uniformly drawn path, L H / (H+1)", "1"),
    "source": Variable("where the entry comes from", "1"),
}
