"""Spectral diagnostics along SGD: the empirical Hessian and G-matrix blocks, their top
eigenpairs, alignments and noise-bulk edges (contract C.1-C.4, D.2), without forming the
``d x d`` blocks.
"""

from hierarchy.spectra.bulk import bulk_edge
from hierarchy.spectra.eigen import alignment, batched_top_eigenpairs, top_eigenpairs
from hierarchy.spectra.operators import (
    dense_weighted_gram,
    feature_gram,
    weighted_gram,
    weighted_gram_stack,
)
from hierarchy.spectra.snapshot import block_names, block_spectra

__all__ = ["alignment", "batched_top_eigenpairs", "block_names", "block_spectra", "bulk_edge",
           "dense_weighted_gram", "feature_gram", "top_eigenpairs", "weighted_gram",
           "weighted_gram_stack"]
