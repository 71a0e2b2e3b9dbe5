"""Shared core of every experiment: config validation, result storage and provenance, device, job logs, the
prose text source, the token-uniformity metrics, multi-head attention and the figure style.
"""
