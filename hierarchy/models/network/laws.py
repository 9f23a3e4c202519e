"""The data laws of the ``network`` family: one small interface that the field consumes.

A data law says what the local fields ``z = (lambda, nu)`` look like at a state ``u``, and how
the family's clock relates to ``alpha = steps/N``. It has two methods:

- ``components(net, u)``: a list of :class:`Component` (weight, mean and covariance of ``z``,
  the label law, and the corrector's factor ``E|x|^2/N``): the law of ``z`` is their mixture;
- ``time_factor(step)``: the field per unit of the family's time (1 for the clock ``alpha``).

The laws: :data:`ISOTROPIC` (teacher data on ``x ~ N(0, I_N)``: one centred component of
covariance ``[[Q, R], [R^T, T]]``), :class:`~.mixture.MixtureData` (one component per
cluster) and :class:`~.inputs.StructuredInputs` (teacher data on ``x ~ N(0, Sigma)``: one
centred component whose covariance is the ``Sigma``-weighted sum over the eigenvalue blocks).
The network description (:mod:`.model`) holds its law; the evaluators (:mod:`.field`) consume
it and nothing here imports them.
"""

import dataclasses

import numpy as np

from hierarchy.models.network.state import gram


@dataclasses.dataclass(frozen=True)
class Component:
    """One Gaussian component of the local fields' law.

    ``weight``; ``mean (K + M)``, ``covariance (K + M, K + M)`` of ``z = (lambda, nu)``;
    ``label``: None for the teacher's ``y = sum v*_n g*(nu_n) + sigma xi``, else the
    component's constant label; ``variance``: ``E|x|^2 / N`` (the corrector's factor).
    """

    weight: float
    mean: np.ndarray
    covariance: np.ndarray
    label: float | None = None
    variance: float = 1.0


class IsotropicInputs:
    """Teacher data on isotropic inputs ``x ~ N(0, I_N)`` (the family's default law)."""

    def components(self, net, u):
        """One centred component of covariance ``[[Q, R], [R^T, T]]`` (:func:`~.state.gram`)."""
        return [Component(1.0, np.zeros(net.K + net.M), gram(net, u))]

    def time_factor(self, step):
        """1: the clock is ``alpha = steps/N``."""
        return 1.0


#: the isotropic law (stateless: one instance serves every network)
ISOTROPIC = IsotropicInputs()
