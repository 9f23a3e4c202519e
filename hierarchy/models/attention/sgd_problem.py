"""The attention family's online-SGD problem: what :mod:`hierarchy.sgd` steps and records.

:class:`Problem` holds everything one SGD step needs except the matrices and the samples
(the steps themselves are in :mod:`hierarchy.models.attention.sgd_steppers`), and offers the
methods the family-agnostic loop :func:`hierarchy.sgd.simulate.simulate` calls (see the
protocol in :mod:`hierarchy.sgd.simulate`). :func:`sgd_setup` is what the family hands the
``hierarchy sgd`` job: the problem of a config, the recorded words and the initial matrices.

Random streams (documented so that runs are reproducible and the two engines agree): every
step draws ``standard_normal((B·L, d))`` in C order, row ``b·L + i`` being ``z_i`` of sample
``b``. The initial matrices do not depend on the SGD seed: they come from
``hierarchy.models.attention.initial.initial_matrices(config, d=sgd.d)`` (stream
``init.seed``), so every SGD seed, the matrix flow and the hierarchy start from the same
matrices. Step ``n`` corresponds to the time ``t = n·α·c/d`` of the hierarchy, ``c`` the
variant's ``time_factor`` (tied 4 for ``t``, untied 1 for the slow ``τ``, direct 1 for
``t``); a run of ``n`` steps uses ``n·B`` samples.
"""

import dataclasses
import functools

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.build import build_arguments
from hierarchy.models.attention.initial import initial_matrices
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import trace_moments
from hierarchy.models.attention.operators import build_field
from hierarchy.models.attention.plotting import figure_options, sgd_title
from hierarchy.models.attention.sgd_steppers import (
    STEPPERS,
    CythonStepper,
    NumpyStepper,
    matrices_from_blocks,
    matrix_blocks,
)
from hierarchy.models.attention.variants import PARAMETERIZATIONS, VARIANTS

__all__ = [
    "CythonStepper",
    "NumpyStepper",
    "Problem",
    "SgdSetup",
    "draw_samples",
    "problem_from_config",
    "sgd_field",
    "sgd_initial_matrices",
    "sgd_setup",
    "widths_of",
]


@dataclasses.dataclass(frozen=True)
class Problem:
    """Everything one SGD step needs except the matrices and the samples.

    Attributes
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
    trainable : tuple of int
        1-based trainable indices (as in ``[model] trainable``).
    d : int
        Embedding dimension.
    covariance : ndarray, shape (L, L)
        Token covariance ``C``.
    learning_rate, weight_decay : float
        ``α`` and ``γ``.
    batch : int
        Minibatch size ``B``.
    loss : hierarchy.models.attention.losses.Loss
        Provides ``gradient(G)`` and ``value(G)`` for ``G`` of shape (B, L, L, K).
    """

    parameterization: str
    K: int
    trainable: tuple
    d: int
    covariance: np.ndarray
    learning_rate: float
    batch: int
    loss: object
    weight_decay: float = 0.0

    def __post_init__(self):
        if self.parameterization not in PARAMETERIZATIONS:
            raise HierarchyError(
                f"model.parameterization = {self.parameterization!r}; allowed: "
                + ", ".join(PARAMETERIZATIONS), field="model.parameterization")
        C = np.array(self.covariance, dtype=float, ndmin=2)
        object.__setattr__(self, "covariance", C)
        object.__setattr__(self, "trainable", tuple(int(k) for k in self.trainable))

    # ------------------------------------------------------------------ the model

    @property
    def variant(self):
        """The :class:`~hierarchy.models.attention.variants.Variant` of the parameterization."""
        return VARIANTS[self.parameterization]

    @property
    def L(self):
        """Tokens per sample."""
        return self.covariance.shape[0]

    @functools.cached_property
    def chol(self):
        """Lower Cholesky factor of ``C`` (PSD ``C`` allowed: a tiny jitter is added)."""
        C = self.covariance
        try:
            return np.linalg.cholesky(C)
        except np.linalg.LinAlgError:
            w, _ = np.linalg.eigh(C)
            if w.min() < -1e-10 * max(1.0, w.max()):
                raise HierarchyError("model.covariance must be positive semi-definite",
                                     field="model.covariance") from None
            return np.linalg.cholesky(C + 1e-12 * max(1.0, w.max()) * np.eye(len(C)))

    @property
    def identity_covariance(self):
        """True when ``C`` is the identity (the kernel then skips the Cholesky factor)."""
        return bool(np.array_equal(self.covariance, np.eye(self.L)))

    @property
    def trainable_positions(self):
        """0-based positions of the trainable indices (``trainable`` minus one)."""
        return np.array([k - 1 for k in self.trainable], dtype=np.int64)

    # ------------------------------------------------------------------ the time map

    @property
    def time_factor(self):
        """``c`` of the time map ``t = n·α·c/d`` (the variant's ``time_factor``)."""
        return self.variant.time_factor

    @property
    def step_time(self):
        """Hierarchy time per SGD step (the time maps of ``docs/math.md``)."""
        return self.time_factor * self.learning_rate / self.d

    # ------------------------------------------------------------------ what simulate calls

    @property
    def sample_shape(self):
        """Shape of the standard normals of one step: ``(B·L, d)``."""
        return (self.batch * self.L, self.d)

    def draw_samples(self, rng, out=None):
        """The standard normals of one step (see :func:`draw_samples`)."""
        return draw_samples(rng, self, out=out)

    def stepper(self, engine, mats):
        """A stepper of ``engine`` (a key of ``sgd_steppers.STEPPERS``) from ``mats``."""
        return STEPPERS[engine](self, mats)

    def measure(self, words, mats, threads="auto"):
        """The empirical trace moments of ``words`` at the matrices ``mats``."""
        return trace_moments(self.parameterization, words, mats, threads=threads)

    def word_labels(self, words):
        """Labels of words given without a field: their 1-based letters joined by dots."""
        return [".".join(str(int(x) + 1) for x in word) for word in words]

    def flat_state(self, mats):
        """All matrices flattened into one vector (for checkpoints)."""
        blocks = matrix_blocks(self.variant.matrices_per_index, mats)
        return np.concatenate([np.asarray(m, float).ravel() for m in blocks])

    def unflat_state(self, vector, template):
        """Inverse of :meth:`flat_state`, shaped like ``template``."""
        out, pos = [], 0
        for m in matrix_blocks(self.variant.matrices_per_index, template):
            size = np.size(m)
            out.append(np.array(vector[pos:pos + size]).reshape(np.shape(m)))
            pos += size
        return matrices_from_blocks(self.variant.matrices_per_index, out)

    def workload_key(self, mats):
        """A hashable description of the step's shape (BLAS thread choices are per shape)."""
        return (self.parameterization, self.batch, self.L, self.K, self.trainable,
                widths_of(self.parameterization, mats))

    def moments_key(self, words, mats):
        """A hashable description of the moment records' shape."""
        return (self.parameterization, len(words), widths_of(self.parameterization, mats))


def draw_samples(rng, problem, out=None):
    """The standard normals of one step: shape (B·L, d), row ``b·L + i`` is ``z_i`` of sample b."""
    if out is None:
        out = np.empty(problem.sample_shape)
    rng.standard_normal(out=out)
    return out


def widths_of(parameterization, mats):
    """The shapes of the model matrices (untied pairs flattened), as a hashable tuple."""
    blocks = matrix_blocks(VARIANTS[parameterization].matrices_per_index, mats)
    return tuple(tuple(int(x) for x in np.shape(m)) for m in blocks)


# ----------------------------------------------------------------------------- from a config

def problem_from_config(config, loss=None):
    """The :class:`Problem` of a validated config (``[model]``, ``[loss]``, ``[sgd]``)."""
    model, sgd = config["model"], config["sgd"]
    L = int(model.get("tokens", 1))
    C = model.get("covariance") or np.eye(L).tolist()
    if loss is None:
        loss = make_loss(config["loss"], L, int(model["K"]))
    return Problem(parameterization=model["parameterization"], K=int(model["K"]),
                   trainable=tuple(model["trainable"]), d=int(sgd["d"]),
                   covariance=np.array(C, float), learning_rate=float(sgd["learning_rate"]),
                   batch=int(sgd["batch"]), loss=loss,
                   weight_decay=float(model.get("weight_decay", 0.0)))


def sgd_field(config):
    """The field whose words ``hierarchy sgd`` records (the one ``hierarchy solve`` builds)."""
    return build_field(**build_arguments(config))


def sgd_initial_matrices(config):
    """The initial matrices of SGD: Gaussian, at ``sgd.d``, stream ``init.seed``."""
    if config["init"].get("source", "gaussian") != "gaussian":
        raise HierarchyError('SGD needs matrices: init.source must be "gaussian" (got '
                             f'{config["init"]["source"]!r})', field="init.source")
    return initial_matrices(config, d=int(config["sgd"]["d"]))


class SgdSetup:
    """What the ``hierarchy sgd`` job needs from the family for one config.

    Only :attr:`problem` is made up front (cheap, so that the job can refuse a config before
    any work); the field and the matrices are made on first use.

    Parameters
    ----------
    config : dict
        A validated config.

    Attributes
    ----------
    problem : Problem
    """

    def __init__(self, config):
        self.config = config
        self.problem = problem_from_config(config)

    @functools.cached_property
    def field(self):
        """The field of the recorded words (:func:`sgd_field`)."""
        return sgd_field(self.config)

    @property
    def words(self):
        """The recorded words, aligned with :attr:`labels`."""
        return list(self.field.words)

    @property
    def labels(self):
        """Labels of the recorded words."""
        return list(self.field.labels)

    @functools.cached_property
    def matrices(self):
        """The initial model matrices, shared by every seed (:func:`sgd_initial_matrices`)."""
        return sgd_initial_matrices(self.config)

    @property
    def summary_columns(self):
        """Columns reported in the summary's ``final`` and plotted: the words of degree ≤ 2."""
        return [i for i, word in enumerate(self.field.words) if len(word) <= 2]

    @property
    def plot_options(self):
        """Keyword arguments of :func:`hierarchy.core.plotting.make_sgd_figure`."""
        return {**figure_options(self.field.parameterization), "title": sgd_title(self.config)}


def sgd_setup(config):
    """The :class:`SgdSetup` of a validated config (what ``ATTENTION.sgd_problem`` returns)."""
    return SgdSetup(config)
