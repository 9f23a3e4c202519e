"""The multiclass logistic model's face to the spectral diagnostics (``[spectra]``).

The adapter :class:`hierarchy.spectra.recorder.SpectralRecorder` and
:func:`hierarchy.spectra.job.run_ensemble` need: the class blocks ``x1 .. xk``
(``d x d``), their contract rank ``k`` (Theorem 3.1: ``x^c`` lives in ``E_k``), the noise
variance ``1/lambda``, the signal span ``span{mu_1..mu_k, x^1..x^k}`` (``2k``) removed from
the bulk, the test samples, and the predictions: the population outliers
(:func:`hierarchy.spectra.population_multiclass.multiclass_population`) along the ballistic
ODE from run 0's own initial statistics.
"""

import math

import numpy as np

from hierarchy.models.multiclass.field import integrate_field
from hierarchy.spectra.population import along_trajectory
from hierarchy.spectra.population_multiclass import multiclass_population
from hierarchy.spectra.snapshot import block_names


class MulticlassSpectra:
    """The spectral adapter of a :class:`~hierarchy.models.multiclass.model.Multiclass`."""

    kind = "multiclass"

    def __init__(self, model, dimension, solve):
        self.model, self.dimension, self.solve = model, int(dimension), solve
        self.block_names = block_names("multiclass", model.classes)
        self.noise_variance = 0.0 if math.isinf(model.snr) else 1.0 / model.snr
        self.signal_rank = min(2 * model.classes, self.dimension - 1)

    def rank(self, top):
        """``k`` for ``"auto"``, else ``top`` (capped at ``d``)."""
        return self.model.classes if top == "auto" else min(int(top), self.dimension)

    def groups(self, top, blocks):
        """One group: every selected class block, with one rank."""
        return [(list(blocks), self.rank(top))]

    def run_zero(self, x):
        """Run 0's ``x (k, d)``, copied."""
        return np.array(x[0], copy=True)

    def sample(self, count, rng):
        """``count`` fresh samples ``(Y, labels)``."""
        return self.model.sample(count, self.dimension, rng)

    def predicted(self, u0, times, table):
        """Population outliers and alignments along the ODE from ``u0`` at ``times``."""
        grid = np.union1d([0.0], times)
        trajectory = integrate_field(self.model, u0, grid, rtol=float(self.solve["rtol"]),
                                     atol=float(self.solve["atol"]))
        rows = trajectory.y[np.searchsorted(grid, times)]
        return along_trajectory(multiclass_population, self.model, times, rows,
                                top=min(self.rank(table["top"]), 2 * self.model.classes))
