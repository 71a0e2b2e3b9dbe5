"""Slow, obviously correct references that the tests hold the library's fast paths against: the per-path loop of
the path-effectiveness evaluation lives in :mod:`san.paths.reference` (the benchmarks time it too)."""

from san.paths.reference import reference_head, reference_path_set_accuracy, reference_path_set_logits

__all__ = ["reference_head", "reference_path_set_accuracy", "reference_path_set_logits"]
