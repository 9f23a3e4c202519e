"""The XOR network's face to the spectral diagnostics (``[spectra]`` of ``gmm-xor``).

The adapter the recorder and :func:`hierarchy.spectra.job.run_ensemble` need: the
blocks ``W1 .. WK`` (``d x d``, first layer) and ``v`` (``K x K``, second layer), their
contract ranks (2 and 4: ``E_2(W_i)`` and ``E_4(v)``, Theorem 4.1), the noise variance
``1/lambda``, the signal span ``span{mu, nu, W_1..W_K}`` removed from the bulk, the test
samples, and the predictions: the population outliers (:func:`hierarchy.spectra.
population_xor.xor_population`) along the ballistic ODE from run 0's own initial statistics.
"""

import math

import numpy as np

from hierarchy.models.gmm import ballistic
from hierarchy.models.gmm.sgd import sample_batch
from hierarchy.spectra.population import along_trajectory
from hierarchy.spectra.population_xor import xor_population
from hierarchy.spectra.snapshot import block_names, layer_groups

#: the contract's rank of each kind of block (Theorem 4.1)
RANK_W, RANK_V = 2, 4


class XorSpectra:
    """The spectral adapter of an XOR :class:`~hierarchy.models.gmm.model.Mixture`."""

    kind = "xor"

    def __init__(self, model, dimension, solve):
        self.model, self.dimension, self.solve = model, int(dimension), solve
        self.block_names = block_names("xor", model.width)
        self.noise_variance = 0.0 if math.isinf(model.snr) else 1.0 / model.snr
        self.signal_rank = min(2 + model.width, self.dimension - 1)

    def ranks(self, top):
        """``(r_W, r_v)``: the contract's ranks for ``"auto"``, else ``top`` (capped)."""
        if top == "auto":
            return RANK_W, min(RANK_V, self.model.width)
        return min(top, self.dimension), min(top, self.model.width)

    def groups(self, top, blocks):
        """``[(block names, r), ...]``: the first-layer blocks, then ``v``."""
        return layer_groups(self.ranks(top), blocks)

    def run_zero(self, x):
        """Run 0's ``(W (K, d), v (K,))``, copied."""
        weights, v = x
        return weights[0].copy(), v[0].copy()

    def sample(self, count, rng):
        """``count`` fresh samples ``(X, y)`` of the mixture."""
        return sample_batch(self.model, count, self.dimension, rng)

    def predicted(self, u0, times, table):
        """Population outliers and alignments along the ODE from ``u0`` at ``times``."""
        grid = np.union1d([0.0], times)
        trajectory = ballistic.solve(self.model, u0, grid, rtol=float(self.solve["rtol"]),
                                     atol=float(self.solve["atol"]),
                                     method=self.solve.get("method", "RK45"))
        rows = trajectory.y[np.searchsorted(grid, times)]
        r_w, r_v = self.ranks(table["top"])
        return along_trajectory(xor_population, self.model, times, rows, top_w=r_w,
                                top_v=r_v)
