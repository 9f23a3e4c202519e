"""The ``network`` family's face to the spectral diagnostics (``[spectra]`` of ``network``).

The adapter :class:`hierarchy.spectra.recorder.SpectralRecorder` and
:func:`hierarchy.spectra.job.run_ensemble` need (the duck-typed contract of
:class:`hierarchy.models.gmm.spectral.XorSpectra`):

- blocks ``W1 .. WK`` (``N x N``, in the coordinates ``J_k = w_k/sqrt(N)``: the Hessian block
  ``(1/M~) sum_l d2l/dlambda_i^2 x_l x_l^T``, O(1) eigenvalues; never formed) and ``v``
  (``K x K``, only when the second layer is trained), with the per-sample weights of
  :meth:`hierarchy.models.network.gradients.SampleGradients.block_weights`;
- their ranks for ``top = "auto"``: ``K + M`` for ``W_i`` (the dimension of
  ``S = span{w_k, w*_n}``, the most outliers a block can have) and ``K`` for ``v``;
- the noise variance of the bulk (1 for teacher data ``x ~ N(0, I_N)``, ``1/snr`` for a
  mixture) and the signal rank ``K + M`` removed from ``N`` for the bulk edge;
- test samples from run 0's own teacher (or signal) directions, drawn with the SGD's own
  samplers (:func:`hierarchy.models.network.sgd.data_law`);
- the prediction: :func:`hierarchy.spectra.population_network.network_population` along
  the family's ODE from run 0's own initial statistics.
"""

import math

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.activations import VECTOR_LOSSES
from hierarchy.models.network.field import network_system
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.sgd import data_law, run_zero_directions
from hierarchy.ode.system import integrate_system
from hierarchy.spectra.snapshot import layer_groups

#: test samples drawn per call of the SGD sampler (bounds the broadcast directions' memory)
SAMPLE_CHUNK = 256


def block_names(net):
    """``W1 .. WK``, and ``v`` when the second layer is trained."""
    return [f"W{i + 1}" for i in range(net.K)] + (["v"] if net.trained_second_layer else [])


def check_spectra_network(net):
    """Refuse a network the spectra do not cover (one line naming the field)."""
    if net.inputs is not None:
        raise HierarchyError("spectra: [spectra] times needs isotropic inputs (the spectral "
                             "blocks assume x ~ N(0, I_N)); allowed with a structured "
                             'covariance: [spectra] times = []', field="model.inputs.covariance")
    if net.loss_name in VECTOR_LOSSES:
        raise HierarchyError(f'spectra: model.loss = "{net.loss_name}" has no spectral blocks '
                             "(the Hessian of a vector loss is not a weighted Gram matrix); "
                             "allowed with [spectra] times: mse | logistic | an expression in "
                             "yhat and y", field="model.loss")


class NetworkParameters(tuple):
    """Run 0's ``(W (K, N), v (K,), D (M, N))`` for :func:`hierarchy.spectra.snapshot.
    block_spectra` (``kind = "network"``): a tuple of arrays (the recorder fingerprints
    them) that names its blocks and computes their per-sample weights."""

    def __new__(cls, weights, v, directions, gradients):
        self = super().__new__(cls, (weights, v, directions))
        self.gradients = gradients
        return self

    def blocks(self):
        """``{name: the block's own parameters}``: ``W_i`` (rows of ``W``), ``v`` if trained."""
        weights, v, _ = self
        own = {f"W{i + 1}": weights[i] for i in range(len(weights))}
        if self.gradients.net.trained_second_layer:
            own["v"] = v
        return own

    def spectral_weights(self, samples, labels):
        """The per-sample weights of every block on ``samples (M, N)``, ``labels (M,)``."""
        weights, v, _ = self
        lam = samples @ weights.T / math.sqrt(weights.shape[1])
        return self.gradients.block_weights(lam, v, labels,
                                            self.gradients.net.trained_second_layer)


class NetworkSpectra:
    """The spectral adapter of a :class:`~hierarchy.models.network.model.Network`.

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
    dimension, runs, seed : int
        ``[sgd] dimension, runs, seed`` (run 0's directions are those of this ensemble).
    start : array_like or None
        The SGD start (a state, or None for the Gaussian start of ``scale``).
    scale : float
    solve : dict
        ``[solve]`` (the prediction's ODE tolerances and method).
    """

    kind = "network"

    def __init__(self, net, dimension, runs, seed, start, scale, solve):
        check_spectra_network(net)
        self.net, self.dimension, self.solve = net, int(dimension), solve
        self.block_names = block_names(net)
        self.gradients = SampleGradients(net)
        mixture = net.mixture
        if net.data == "teacher":
            self.noise_variance = 1.0
        else:
            self.noise_variance = 0.0 if mixture.noiseless else 1.0 / mixture.snr
        self.signal_rank = min(net.K + net.M, self.dimension - 1)
        self.directions = run_zero_directions(net, dimension, runs, seed, start, scale)

    def ranks(self, top):
        """``(r_W, r_v)``: ``(K + M, K)`` for ``"auto"``, else ``top`` (capped)."""
        if top == "auto":
            return min(self.net.K + self.net.M, self.dimension), self.net.K
        return min(int(top), self.dimension), min(int(top), self.net.K)

    def groups(self, top, blocks):
        """``[(block names, r), ...]``: the first-layer blocks, then ``v``."""
        return layer_groups(self.ranks(top), blocks)

    def run_zero(self, x):
        """Run 0's parameters (copies) with its directions, as :class:`NetworkParameters`."""
        weights, v = x
        return NetworkParameters(weights[0].copy(), v[0].copy(), self.directions,
                                 self.gradients)

    def sample(self, count, rng):
        """``count`` fresh samples ``(X, y)`` of run 0's data law (the SGD's own sampler)."""
        law = data_law(self.net, self.gradients)
        xs, ys = [], []
        for start in range(0, int(count), SAMPLE_CHUNK):
            size = min(SAMPLE_CHUNK, int(count) - start)
            frames = np.broadcast_to(self.directions, (size, *self.directions.shape))
            x, y = law.sample(frames, rng)
            xs.append(x)
            ys.append(y)
        return np.concatenate(xs), np.concatenate(ys)

    def trajectory(self, u0, times):
        """The ODE's states at ``times`` from ``u0`` (rows), with the ``[solve]`` settings."""
        grid = np.union1d([0.0], np.asarray(times, float))
        u0 = np.asarray(u0, dtype=float)
        if grid[-1] == 0.0:
            return np.array([u0] * len(times))
        solve = self.solve
        result = integrate_system(network_system(self.net), u0, (0.0, float(grid[-1])),
                                  t_eval=grid, method=str(solve.get("method", "RK45")),
                                  rtol=float(solve["rtol"]), atol=float(solve["atol"]))
        rows = np.asarray(result.y)
        if len(rows) != len(grid):
            raise HierarchyError(f"the ODE of the prediction stopped at t = {result.t[-1]:g} "
                                 f"({result.message})", field="spectra.times")
        return rows[np.searchsorted(grid, times)]

    def predicted(self, u0, times, table):
        """Population outliers and alignments along the ODE from ``u0`` at ``times``.

        Returns
        -------
        dict
            ``{(matrix, block): {"outliers" (T, r), "bulk" (T,), "alignment" (T,),
            "separated" (T,), "outliers_error" (T, r)}}``.
        """
        # deferred: the population spectra load the mixture families' quadrature, which
        # a solve (that validates [spectra] through this module) does not need
        from hierarchy.spectra.population_network import network_population  # noqa: PLC0415
        rows = self.trajectory(u0, times)
        r_w, r_v = self.ranks(table["top"])
        results = [network_population(self.net, row, top_w=r_w, top_v=r_v) for row in rows]
        return {key: {name: np.array([r[key][name] for r in results])
                      for name in results[0][key]} for key in results[0]}
