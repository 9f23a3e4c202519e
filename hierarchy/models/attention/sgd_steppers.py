"""One online-SGD step of the attention family: the numpy reference and the compiled kernel.

The three parameterizations of ``docs/math.md``, one minibatch step each (``α`` the learning
rate, ``γ`` the weight decay, ``g_b = ∂L/∂G`` of sample ``b`` from
:mod:`hierarchy.models.attention.losses`, the batch of ``B`` fresh samples averaging the
per-sample gradients):

- tied (§2, eq. 7), centered ``G_ijk = Tr[S_k(x_j x_iᵀ − C_ij I)]/√d``, ``S_k = W_kW_kᵀ``::

      W_k ← W_k − α mean_b Σ_ij g_bij (x_j x_iᵀ + x_i x_jᵀ − 2C_ij I) W_k/√d − (αγ/d) W_k

- untied (§3, eq. 25), ``G_ijk = x_iᵀU_kV_kᵀx_j/√d`` (not centered)::

      U_k ← U_k − α mean_b Σ_ij g_bij x_i x_jᵀ V_k/√d − (αγ/d) U_k
      V_k ← V_k − α mean_b Σ_ij g_bij x_j x_iᵀ U_k/√d − (αγ/d) V_k

- direct (§4, eq. 395), ``G`` centered as for tied::

      S_k ← S_k − α (mean_b Σ_ij g_bij (x_i x_jᵀ − C_ij I)/√d + (γ/d) S_k)

Only the trainable indices move. Tokens: ``x_i = Σ_j chol(C)_ij z_j`` with ``z`` standard
normal. Two steppers make the same steps on the same samples: :class:`CythonStepper`
(the kernel ``_sgd.pyx`` compiled through :func:`hierarchy.jit.cache.compile_pyx`, BLAS
``dgemm`` from ``scipy.linalg.cython_blas``) and :class:`NumpyStepper` (the plain
reference, and the test oracle).

A stepper holds the matrices and offers ``step(z)`` (advance; returns the step's ``G``),
``forward(z)`` (``G`` without a step) and ``matrices()``. Model matrices are lists with one
entry per index: tied ``[W_k]`` (d × d_k), untied ``[(U_k, V_k)]``, direct ``[S_k]`` (d × d).
"""

import dataclasses
import functools
import pathlib

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.jit.cache import compile_pyx
from hierarchy.sgd.engines import EngineUnavailable

#: the kernel's source, next to this module
KERNEL_SOURCE = pathlib.Path(__file__).resolve().parent / "_sgd.pyx"


# ----------------------------------------------------------------------------- packing

def matrix_blocks(matrices_per_index, mats):
    """The model matrices as a flat list of blocks (untied ``(U_k, V_k)`` pairs flattened).

    Parameters
    ----------
    matrices_per_index : int
        :attr:`hierarchy.models.attention.variants.Variant.matrices_per_index`.
    mats : list
        One entry per index: a matrix, or a tuple of ``matrices_per_index`` matrices.

    Returns
    -------
    list of array_like
    """
    if matrices_per_index == 1:
        return list(mats)
    return [m for group in mats for m in group]


def matrices_from_blocks(matrices_per_index, blocks):
    """Inverse of :func:`matrix_blocks`: group the blocks back per index."""
    blocks = list(blocks)
    if matrices_per_index == 1:
        return blocks
    return [tuple(blocks[i:i + matrices_per_index])
            for i in range(0, len(blocks), matrices_per_index)]


def copy_matrices(matrices_per_index, mats):
    """Float copies of the model matrices, in the same nesting."""
    return matrices_from_blocks(matrices_per_index,
                                [np.array(m, dtype=float)
                                 for m in matrix_blocks(matrices_per_index, mats)])


# ----------------------------------------------------------------------------- numpy reference

def numpy_step(problem, mats, z):
    """One SGD step in plain numpy (the reference implementation).

    Parameters
    ----------
    problem : hierarchy.models.attention.sgd_problem.Problem
    mats : list
        The model matrices (see the module docstring).
    z : ndarray, shape (B·L, d)
        Standard normals of the step (``Problem.draw_samples``).

    Returns
    -------
    new_mats : list
        The matrices after the step (new arrays; the inputs are not modified).
    G : ndarray, shape (B, L, L, K)
        The minibatch pre-activations at the old matrices.
    """
    B, L, d = problem.batch, problem.L, problem.d
    x = np.einsum("ij,bjd->bid", problem.chol, z.reshape(B, L, d))  # x_i = Σ_j chol_ij z_j
    return NUMPY_STEPS[problem.parameterization](problem, mats, x)


def mean_contraction(g, C):
    """``mean_b Σ_ij g_bij C_ij`` of per-sample loss derivatives ``g`` (B, L, L)."""
    return float(np.mean(np.einsum("bij,ij->b", g, C)))


def tied_numpy_step(problem, mats, x):
    """Tied step of :func:`numpy_step` on the tokens ``x`` (B, L, d)."""
    B, d, C, lr = problem.batch, problem.d, problem.covariance, problem.learning_rate
    xw = [x @ W for W in mats]                                       # (B, L, d_k): rows x_iᵀW_k
    G = np.stack([(p @ p.transpose(0, 2, 1) - C * np.sum(W * W)) / np.sqrt(d)
                  for p, W in zip(xw, mats)], axis=-1)
    dG = problem.loss.gradient(G)
    new = [W.copy() for W in mats]
    flat_x = x.reshape(B * problem.L, d)
    for k in problem.trainable_positions:
        g = dG[..., k]
        sym = g + g.transpose(0, 2, 1)
        outer = flat_x.T @ (sym @ xw[k]).reshape(-1, mats[k].shape[1]) / B   # mean Σ g(x_j x_iᵀ+x_i x_jᵀ)W
        grad = (outer - 2.0 * mean_contraction(g, C) * mats[k]) / np.sqrt(d)
        new[k] = mats[k] - lr * grad - (lr * problem.weight_decay / d) * mats[k]
    return new, G


def untied_numpy_step(problem, mats, x):
    """Untied step of :func:`numpy_step` on the tokens ``x`` (B, L, d)."""
    B, d, lr = problem.batch, problem.d, problem.learning_rate
    xu = [x @ U for U, _ in mats]
    xv = [x @ V for _, V in mats]
    G = np.stack([p @ q.transpose(0, 2, 1) / np.sqrt(d) for p, q in zip(xu, xv)], axis=-1)
    dG = problem.loss.gradient(G)
    new = [(U.copy(), V.copy()) for U, V in mats]
    flat_x = x.reshape(B * problem.L, d)
    decay = lr * problem.weight_decay / d
    for k in problem.trainable_positions:
        U, V = mats[k]
        g = dG[..., k]
        grad_u = flat_x.T @ (g @ xv[k]).reshape(-1, V.shape[1]) / (B * np.sqrt(d))
        grad_v = flat_x.T @ (g.transpose(0, 2, 1) @ xu[k]).reshape(-1, U.shape[1]) / (B * np.sqrt(d))
        new[k] = (U - lr * grad_u - decay * U, V - lr * grad_v - decay * V)
    return new, G


def direct_numpy_step(problem, mats, x):
    """Direct step of :func:`numpy_step` on the tokens ``x`` (B, L, d)."""
    B, d, C, lr = problem.batch, problem.d, problem.covariance, problem.learning_rate
    G = np.stack([(x @ S @ x.transpose(0, 2, 1) - C * np.trace(S)) / np.sqrt(d) for S in mats], axis=-1)
    dG = problem.loss.gradient(G)
    new = [S.copy() for S in mats]
    flat_x = x.reshape(B * problem.L, d)
    for k in problem.trainable_positions:
        g = dG[..., k]
        outer = flat_x.T @ (g @ x).reshape(-1, d) / B                 # mean Σ g_ij x_i x_jᵀ
        grad = (outer - mean_contraction(g, C) * np.eye(d)) / np.sqrt(d)
        new[k] = mats[k] - lr * (grad + (problem.weight_decay / d) * mats[k])
    return new, G


#: parameterization -> its numpy step
NUMPY_STEPS = {"tied": tied_numpy_step, "untied": untied_numpy_step, "direct": direct_numpy_step}


class ZeroGradient:
    """Stands in for the loss when only ``G`` is wanted (the matrices do not move)."""

    def gradient(self, G):
        return np.zeros_like(G)


class NumpyStepper:
    """SGD state advanced by :func:`numpy_step`.

    Parameters
    ----------
    problem : hierarchy.models.attention.sgd_problem.Problem
    mats : list
        Initial matrices (copied).
    """

    engine = "numpy"

    def __init__(self, problem, mats):
        self.problem = problem
        self.mats = copy_matrices(problem.variant.matrices_per_index, mats)
        self.last_G = None

    def step(self, z):
        """Advance one step with the samples ``z``; returns the step's ``G``."""
        self.mats, self.last_G = numpy_step(self.problem, self.mats, z)
        return self.last_G

    def forward(self, z):
        """``G`` of the samples ``z`` at the current matrices, without a step."""
        probe = dataclasses.replace(self.problem, loss=ZeroGradient())
        return numpy_step(probe, self.mats, z)[1]

    def matrices(self):
        """The current model matrices."""
        return self.mats


# ----------------------------------------------------------------------------- compiled kernel

@functools.cache
def compiled_kernel():
    """``(module, None)`` once the kernel is compiled, or ``(None, reason)`` if it cannot be.

    Tried once per process (and cached on disk by :mod:`hierarchy.jit.cache`).
    """
    try:
        return compile_pyx(KERNEL_SOURCE.read_text(), "sgd_kernel"), None
    except HierarchyError as exc:
        return None, str(exc)


def kernel():
    """The compiled kernel module.

    Raises
    ------
    hierarchy.sgd.engines.EngineUnavailable
        When it cannot be compiled here (the reason is the message).
    """
    module, reason = compiled_kernel()
    if module is None:
        raise EngineUnavailable(reason, field="engine")
    return module


class CythonStepper:
    """SGD state advanced by the compiled kernel (same steps as :class:`NumpyStepper`).

    The matrices of all indices live side by side in one array (tied ``[W_1|W_2|…]``, untied
    ``[U_1 V_1|U_2 V_2|…]``, direct ``[S_1|S_2|…]``); :meth:`matrices` returns views.

    Raises
    ------
    hierarchy.sgd.engines.EngineUnavailable
        When the kernel cannot be compiled (no compiler, no Cython).
    HierarchyError
        When the matrices do not have ``d`` rows.
    """

    engine = "cython"

    def __init__(self, problem, mats):
        self.problem = problem
        self.kernel = kernel()
        per_index = problem.variant.matrices_per_index
        B, L, d = problem.batch, problem.L, problem.d
        blocks = [np.asarray(m, dtype=float) for m in matrix_blocks(per_index, mats)]
        for m in blocks:
            if m.shape[0] != d:
                raise HierarchyError(f"matrices have {m.shape[0]} rows but sgd.d = {d}", field="sgd.d")
        self.state = np.ascontiguousarray(np.concatenate(blocks, axis=1))
        widths = [m.shape[1] for m in blocks]
        starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
        # per index: where its first matrix starts and how wide one of its matrices is
        self.offsets = starts[0::per_index].copy()
        self.widths = np.array(widths[0::per_index], dtype=np.int64)
        self.block_starts, self.block_widths = starts, widths
        self.P = np.empty((B * L, self.state.shape[1]))
        self.H = np.empty((B * L, self.work_width()))
        self.G = np.empty((B, L, L, problem.K))
        self.small = np.empty((L, L))
        self.chol = np.ascontiguousarray(problem.chol)
        self.C = np.ascontiguousarray(problem.covariance)
        self.identity = problem.identity_covariance
        self.trainable_positions = problem.trainable_positions
        self.last_G = None

    def work_width(self):
        """Columns of the kernel's work array ``H``."""
        if self.problem.parameterization == "direct":
            return self.problem.d
        return self.problem.variant.matrices_per_index * int(self.widths.max())

    def forward(self, z):
        """``G`` of the samples ``z`` at the current matrices (also leaves the products in P)."""
        kern, p = self.kernel, self.problem.parameterization
        if p == "tied":
            kern.tied_forward(z, self.state, self.P, self.offsets, self.widths, self.chol, self.C,
                              self.identity, self.G)
        elif p == "untied":
            kern.untied_forward(z, self.state, self.P, self.offsets, self.widths, self.chol,
                                self.identity, self.G)
        else:
            kern.direct_forward(z, self.state, self.P, self.chol, self.C, self.identity, self.small, self.G)
        return self.G

    def update(self, z, dG):
        """Apply the step for the loss derivatives ``dG`` of the last :meth:`forward`."""
        kern, prob = self.kernel, self.problem
        dG = np.ascontiguousarray(dG, dtype=float)
        lr, wd = prob.learning_rate, prob.weight_decay
        if prob.parameterization == "tied":
            kern.tied_update(z, self.state, self.P, self.offsets, self.widths,
                             self.trainable_positions, self.chol, self.C, self.identity, dG,
                             self.H, lr, wd)
        elif prob.parameterization == "untied":
            kern.untied_update(z, self.state, self.P, self.offsets, self.widths,
                               self.trainable_positions, self.chol, self.identity, dG, self.H,
                               lr, wd)
        else:
            kern.direct_update(z, self.state, self.trainable_positions, self.chol, self.C,
                               self.identity, dG, self.H, self.small, lr, wd)

    def step(self, z):
        """Advance one step with the samples ``z``; returns the step's ``G``."""
        G = self.forward(z)
        self.update(z, self.problem.loss.gradient(G))
        self.last_G = G
        return G

    def matrices(self):
        """The current model matrices (views into the packed state)."""
        blocks = [self.state[:, s:s + w] for s, w in zip(self.block_starts, self.block_widths)]
        return matrices_from_blocks(self.problem.variant.matrices_per_index, blocks)


#: engine name -> stepper class (the engines of :data:`hierarchy.sgd.engines.ENGINES`)
STEPPERS = {"cython": CythonStepper, "numpy": NumpyStepper}
