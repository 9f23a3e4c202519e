"""Online SGD of attention-indexed models, and the record of its trace moments.

The three parameterizations of MATH.md, one minibatch step each (``α`` the learning rate,
``γ`` the weight decay, ``g_b = ∂L/∂G`` of sample ``b`` from :mod:`hierarchy.models.attention.losses`, the
batch of ``B`` fresh samples averaging the per-sample gradients):

- tied (§2, eq. 7), centered ``G_ijk = Tr[S_k(x_j x_iᵀ − C_ij I)]/√d``, ``S_k = W_kW_kᵀ``::

      W_k ← W_k − α mean_b Σ_ij g_bij (x_j x_iᵀ + x_i x_jᵀ − 2C_ij I) W_k/√d − (αγ/d) W_k

- untied (§3, eq. 25), ``G_ijk = x_iᵀU_kV_kᵀx_j/√d`` (not centered)::

      U_k ← U_k − α mean_b Σ_ij g_bij x_i x_jᵀ V_k/√d − (αγ/d) U_k
      V_k ← V_k − α mean_b Σ_ij g_bij x_j x_iᵀ U_k/√d − (αγ/d) V_k

- direct (§4, eq. 395), ``G`` centered as for tied::

      S_k ← S_k − α (mean_b Σ_ij g_bij (x_i x_jᵀ − C_ij I)/√d + (γ/d) S_k)

Only the trainable indices move. Tokens: ``x_i = Σ_j chol(C)_ij z_j`` with ``z`` standard
normal. Step ``n`` corresponds to the time ``t = n·α·c/d`` of the hierarchy, ``c = 4`` (tied
``t``), ``1`` (untied slow ``τ``), ``1`` (direct ``t``); a run of ``n`` steps uses ``n·B``
samples.

Random streams (documented so that runs are reproducible and the two engines agree): the
samples of SGD seed ``s`` come from ``numpy.random.Generator(numpy.random.PCG64(s))``; every
step draws ``standard_normal((B·L, d))`` in C order, row ``b·L + i`` being ``z_i`` of sample
``b``. The initial matrices do not depend on ``s``: they come from
``hierarchy.models.attention.initial.initial_matrices(config, d=sgd.d)`` (stream ``init.seed``), so every SGD
seed, the matrix flow and the hierarchy start from the same matrices. At each recorded time
the loss is the minibatch mean of the batch drawn at that state (the last time draws one more
batch, used for the loss only).

Two engines make the same steps on the same stream: ``"cython"`` (compiled through
:func:`hierarchy.jit.cache.compile_pyx`, BLAS ``dgemm`` from ``scipy.linalg.cython_blas``) and
``"numpy"`` (the plain reference, and the test oracle).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import pathlib
import signal
import sys
import time

import numpy as np

from hierarchy.core.blas_threads import blas_threads
from hierarchy.core.errors import HierarchyError

PARAMETERIZATIONS = ("tied", "untied", "direct")
TIME_FACTOR = {"tied": 4.0, "untied": 1.0, "direct": 1.0}  # t = n · α · factor / d
ENGINES = ("cython", "numpy")


# ----------------------------------------------------------------------------- the problem

@dataclasses.dataclass(frozen=True)
class Problem:
    """Everything one SGD step needs except the matrices and the samples.

    Attributes
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
    trainable : tuple of int
        1-based trainable indices.
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

    @property
    def L(self):
        return self.covariance.shape[0]

    @functools.cached_property
    def chol(self):
        """Lower Cholesky factor of ``C`` (PSD ``C`` allowed: a tiny jitter is added)."""
        C = self.covariance
        try:
            return np.linalg.cholesky(C)
        except np.linalg.LinAlgError:
            w, v = np.linalg.eigh(C)
            if w.min() < -1e-10 * max(1.0, w.max()):
                raise HierarchyError("model.covariance must be positive semi-definite",
                                     field="model.covariance") from None
            return np.linalg.cholesky(C + 1e-12 * max(1.0, w.max()) * np.eye(len(C)))

    @property
    def identity_covariance(self):
        return bool(np.array_equal(self.covariance, np.eye(self.L)))

    @property
    def step_time(self):
        """Hierarchy time per SGD step (MATH.md time maps)."""
        return TIME_FACTOR[self.parameterization] * self.learning_rate / self.d

    @property
    def trainable0(self):
        return np.array([k - 1 for k in self.trainable], dtype=np.int64)


def problem_from_config(config, loss=None):
    """The :class:`Problem` of a validated config (``[model]``, ``[loss]``, ``[sgd]``)."""
    model, sgd = config["model"], config["sgd"]
    L = int(model.get("tokens", 1))
    C = model.get("covariance") or np.eye(L).tolist()
    if loss is None:
        from hierarchy.models.attention.losses import make_loss

        loss = make_loss(config["loss"], L, int(model["K"]))
    return Problem(parameterization=model["parameterization"], K=int(model["K"]),
                   trainable=tuple(model["trainable"]), d=int(sgd["d"]), covariance=np.array(C, float),
                   learning_rate=float(sgd["learning_rate"]), batch=int(sgd["batch"]), loss=loss,
                   weight_decay=float(model.get("weight_decay", 0.0)))


def draw_samples(rng, problem, out=None):
    """The standard normals of one step: shape (B·L, d), row ``b·L + i`` is ``z_i`` of sample b."""
    if out is None:
        out = np.empty((problem.batch * problem.L, problem.d))
    rng.standard_normal(out=out)
    return out


def sample_rng(seed):
    """The sample stream of SGD seed ``seed`` (see the module docstring)."""
    return np.random.Generator(np.random.PCG64(int(seed)))


# ----------------------------------------------------------------------------- numpy reference

def numpy_step(problem, mats, z):
    """One SGD step in plain numpy (the reference implementation).

    Parameters
    ----------
    problem : Problem
    mats : list
        tied ``[W_k]`` (d × d_k); untied ``[(U_k, V_k)]``; direct ``[S_k]`` (d × d).
    z : ndarray, shape (B·L, d)
        Standard normals of the step (:func:`draw_samples`).

    Returns
    -------
    new_mats : list
        The matrices after the step (new arrays; the inputs are not modified).
    G : ndarray, shape (B, L, L, K)
        The minibatch pre-activations at the old matrices.
    """
    B, L, d = problem.batch, problem.L, problem.d
    x = np.einsum("ij,bjd->bid", problem.chol, z.reshape(B, L, d))  # x_i = Σ_j chol_ij z_j
    step = {"tied": _tied_numpy, "untied": _untied_numpy, "direct": _direct_numpy}
    return step[problem.parameterization](problem, mats, x)


def _mean_contraction(g, C):
    return float(np.mean(np.einsum("bij,ij->b", g, C)))


def _tied_numpy(problem, mats, x):
    B, d, C, lr = problem.batch, problem.d, problem.covariance, problem.learning_rate
    xw = [x @ W for W in mats]                                       # (B, L, d_k): rows x_iᵀW_k
    G = np.stack([(p @ p.transpose(0, 2, 1) - C * np.sum(W * W)) / np.sqrt(d)
                  for p, W in zip(xw, mats)], axis=-1)
    dG = problem.loss.gradient(G)
    new = [W.copy() for W in mats]
    flat_x = x.reshape(B * problem.L, d)
    for k in problem.trainable0:
        g = dG[..., k]
        sym = g + g.transpose(0, 2, 1)
        outer = flat_x.T @ (sym @ xw[k]).reshape(-1, mats[k].shape[1]) / B   # mean Σ g(x_j x_iᵀ+x_i x_jᵀ)W
        grad = (outer - 2.0 * _mean_contraction(g, C) * mats[k]) / np.sqrt(d)
        new[k] = mats[k] - lr * grad - (lr * problem.weight_decay / d) * mats[k]
    return new, G


def _untied_numpy(problem, mats, x):
    B, d, lr = problem.batch, problem.d, problem.learning_rate
    xu = [x @ U for U, _ in mats]
    xv = [x @ V for _, V in mats]
    G = np.stack([p @ q.transpose(0, 2, 1) / np.sqrt(d) for p, q in zip(xu, xv)], axis=-1)
    dG = problem.loss.gradient(G)
    new = [(U.copy(), V.copy()) for U, V in mats]
    flat_x = x.reshape(B * problem.L, d)
    decay = lr * problem.weight_decay / d
    for k in problem.trainable0:
        U, V = mats[k]
        g = dG[..., k]
        grad_u = flat_x.T @ (g @ xv[k]).reshape(-1, V.shape[1]) / (B * np.sqrt(d))
        grad_v = flat_x.T @ (g.transpose(0, 2, 1) @ xu[k]).reshape(-1, U.shape[1]) / (B * np.sqrt(d))
        new[k] = (U - lr * grad_u - decay * U, V - lr * grad_v - decay * V)
    return new, G


def _direct_numpy(problem, mats, x):
    B, d, C, lr = problem.batch, problem.d, problem.covariance, problem.learning_rate
    G = np.stack([(x @ S @ x.transpose(0, 2, 1) - C * np.trace(S)) / np.sqrt(d) for S in mats], axis=-1)
    dG = problem.loss.gradient(G)
    new = [S.copy() for S in mats]
    flat_x = x.reshape(B * problem.L, d)
    for k in problem.trainable0:
        g = dG[..., k]
        outer = flat_x.T @ (g @ x).reshape(-1, d) / B                 # mean Σ g_ij x_i x_jᵀ
        grad = (outer - _mean_contraction(g, C) * np.eye(d)) / np.sqrt(d)
        new[k] = mats[k] - lr * (grad + (problem.weight_decay / d) * mats[k])
    return new, G


# ----------------------------------------------------------------------------- steppers

class NumpyStepper:
    """SGD state advanced by :func:`numpy_step`.

    Parameters
    ----------
    problem : Problem
    mats : list
        Initial matrices (copied).
    """

    engine = "numpy"

    def __init__(self, problem, mats):
        self.problem = problem
        self.mats = _copy_mats(problem.parameterization, mats)
        self.last_G = None

    def step(self, z):
        """Advance one step with the samples ``z``; returns the step's ``G``."""
        self.mats, self.last_G = numpy_step(self.problem, self.mats, z)
        return self.last_G

    def forward(self, z):
        """``G`` of the samples ``z`` at the current matrices, without a step."""
        probe = dataclasses.replace(self.problem, loss=_NoGradient(self.problem))
        return numpy_step(probe, self.mats, z)[1]

    def matrices(self):
        return self.mats


class _NoGradient:
    """Stands in for the loss when only ``G`` is wanted."""

    def __init__(self, problem):
        self.shape_tail = (problem.L, problem.L, problem.K)

    def gradient(self, G):
        return np.zeros_like(G)


@functools.lru_cache(maxsize=None)
def kernel():
    """The compiled kernel module (built once, cached on disk by :mod:`hierarchy.jit.cache`)."""
    from hierarchy.jit.cache import compile_pyx

    source = (pathlib.Path(__file__).resolve().parents[1] / "models" / "attention" / "_sgd.pyx").read_text()
    return compile_pyx(source, "sgd_kernel")


class CythonStepper:
    """SGD state advanced by the compiled kernel (same steps as :class:`NumpyStepper`).

    The matrices of all indices live side by side in one array (tied ``[W_1|W_2|…]``, untied
    ``[U_1 V_1|U_2 V_2|…]``, direct ``[S_1|S_2|…]``); :meth:`matrices` returns views.
    """

    engine = "cython"

    def __init__(self, problem, mats):
        self.problem = problem
        self.kernel = kernel()
        p, B, L, d = problem.parameterization, problem.batch, problem.L, problem.d
        blocks = [m for pair in mats for m in pair] if p == "untied" else list(mats)
        blocks = [np.asarray(m, dtype=float) for m in blocks]
        for m in blocks:
            if m.shape[0] != d:
                raise HierarchyError(f"matrices have {m.shape[0]} rows but sgd.d = {d}", field="sgd.d")
        self.state = np.ascontiguousarray(np.concatenate(blocks, axis=1))
        widths = [m.shape[1] for m in blocks]
        starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
        if p == "untied":
            self.offsets, self.widths = starts[0::2].copy(), np.array(widths[0::2], dtype=np.int64)
        else:
            self.offsets, self.widths = starts, np.array(widths, dtype=np.int64)
        self.block_starts, self.block_widths = starts, widths
        self.P = np.empty((B * L, self.state.shape[1]))
        hw = d if p == "direct" else (2 if p == "untied" else 1) * int(self.widths.max())
        self.H = np.empty((B * L, hw))
        self.G = np.empty((B, L, L, problem.K))
        self.small = np.empty((L, L))
        self.chol = np.ascontiguousarray(problem.chol)
        self.C = np.ascontiguousarray(problem.covariance)
        self.identity = problem.identity_covariance
        self.trainable = problem.trainable0
        self.last_G = None

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
            kern.tied_update(z, self.state, self.P, self.offsets, self.widths, self.trainable,
                             self.chol, self.C, self.identity, dG, self.H, lr, wd)
        elif prob.parameterization == "untied":
            kern.untied_update(z, self.state, self.P, self.offsets, self.widths, self.trainable,
                               self.chol, self.identity, dG, self.H, lr, wd)
        else:
            kern.direct_update(z, self.state, self.trainable, self.chol, self.C, self.identity, dG,
                               self.H, self.small, lr, wd)

    def step(self, z):
        """Advance one step with the samples ``z``; returns the step's ``G`` (a copy)."""
        G = self.forward(z)
        self.update(z, self.problem.loss.gradient(G))
        self.last_G = G
        return G

    def matrices(self):
        blocks = [self.state[:, s:s + w] for s, w in zip(self.block_starts, self.block_widths)]
        if self.problem.parameterization == "untied":
            return list(zip(blocks[0::2], blocks[1::2]))
        return blocks


def make_stepper(problem, mats, engine="cython"):
    """A stepper of the given engine (``"cython"`` or ``"numpy"``)."""
    if engine == "cython":
        return CythonStepper(problem, mats)
    if engine == "numpy":
        return NumpyStepper(problem, mats)
    raise HierarchyError(f"engine = {engine!r}; allowed: {', '.join(ENGINES)}", field="engine")


def _copy_mats(parameterization, mats):
    if parameterization == "untied":
        return [(np.array(U, dtype=float), np.array(V, dtype=float)) for U, V in mats]
    return [np.array(m, dtype=float) for m in mats]


def flat_state(parameterization, mats):
    """All matrices flattened into one vector (for checkpoints)."""
    blocks = [m for pair in mats for m in pair] if parameterization == "untied" else list(mats)
    return np.concatenate([np.asarray(m, float).ravel() for m in blocks])


def unflat_state(parameterization, vector, template):
    """Inverse of :func:`flat_state`, shaped like ``template``."""
    blocks = [m for pair in template for m in pair] if parameterization == "untied" else list(template)
    out, pos = [], 0
    for m in blocks:
        size = np.size(m)
        out.append(np.array(vector[pos:pos + size]).reshape(np.shape(m)))
        pos += size
    return list(zip(out[0::2], out[1::2])) if parameterization == "untied" else out


# ----------------------------------------------------------------------------- simulation

@dataclasses.dataclass
class Trajectory:
    """What one SGD run recorded.

    Attributes
    ----------
    t : ndarray (T,)
        Recorded times (hierarchy time, ``steps · step_time``).
    steps : ndarray (T,)
        SGD steps at those times.
    mu : ndarray (T, n)
        Empirical moments of the words, in the order given.
    loss : ndarray (T,)
        Minibatch mean loss at the recorded states.
    samples : ndarray (T,)
        Samples used up to each time (``steps · B``).
    complete : bool
        False when the run was interrupted or diverged (only the first ``recorded`` rows
        are filled).
    recorded : int
        Rows filled.
    seconds : float
        Wall time of the stepping loop.
    diverged : dict or None
        Where the run diverged (:func:`divergence`): ``step``, ``t``, ``row`` (the first
        row not recorded), ``quantity`` (e.g. ``"moment 1.1.1 = inf (non-finite)"``) and
        ``value``; None if it did not.
    threads : dict
        BLAS threads used for the steps and the moments, with the timings they were
        chosen by.
    """

    t: np.ndarray
    steps: np.ndarray
    mu: np.ndarray
    loss: np.ndarray
    samples: np.ndarray
    complete: bool
    recorded: int
    seconds: float = 0.0
    state: dict = dataclasses.field(default_factory=dict)
    diverged: dict = None
    threads: dict = dataclasses.field(default_factory=dict)


def record_steps(times, problem):
    """The SGD steps nearest to the requested times (sorted, unique)."""
    steps = np.rint(np.asarray(times, dtype=float) / problem.step_time).astype(np.int64)
    if steps.size == 0 or steps.min() < 0:
        raise HierarchyError("record times must be >= 0", field="solve.t_final")
    return np.unique(steps)


def simulate(problem, mats, *, seed, times, words=None, field=None, engine="cython",
             progress=False, resume=None, on_checkpoint=None, checkpoint_every=30.0,
             threads="auto"):
    """Run online SGD and record the moments of the given words at the requested times.

    Parameters
    ----------
    problem : Problem
    mats : list
        Initial matrices (see :func:`numpy_step`); not modified.
    seed : int
        SGD seed: the sample stream is :func:`sample_rng` ``(seed)``.
    times : array_like
        Hierarchy times to record at (rounded to whole steps, see :func:`record_steps`).
    words : list of tuple, optional
        Words whose moments to record; or ``field`` (a :class:`~hierarchy.models.attention.operators.Field`)
        to record every word of a field, aligned with ``field.labels``.
    engine : {"cython", "numpy"}
    progress : bool or str
        Show a progress bar on stderr (a string is used as its title).
    resume : dict, optional
        A state from an earlier :class:`Trajectory` ``.state`` (or a checkpoint) to continue.
    on_checkpoint : callable, optional
        Called with a partial :class:`Trajectory` (``state`` filled) every
        ``checkpoint_every`` seconds and when interrupted.
    threads : "auto", int or None
        BLAS threads: ``"auto"`` times steps and moment records with one thread and with
        all of them and keeps the faster of each (:mod:`hierarchy.core.blas_threads`); an int
        forces that count; None leaves the library default. The choice is in
        ``Trajectory.threads``.

        With ``"auto"`` the first steps of the run itself are timed, in blocks of
        :data:`THREAD_TRIAL_STEPS` (sample draw included, as the draw competes with
        spinning BLAS threads), alternating one thread and all of them, after a warm-up
        block, and again every :data:`THREAD_RECHECK_S` seconds; the moment records are
        timed separately. The decision is kept for runs of the same shape in the process
        (the next seeds).

    Returns
    -------
    Trajectory
        ``complete`` False if a ``KeyboardInterrupt`` (or SIGTERM under
        :func:`hierarchy.core.io.interruptible`) stopped the run, or if it diverged (see
        :func:`divergence`; ``diverged`` then says where): what was recorded before is
        kept and ``state`` holds what :func:`simulate` needs to continue.
    """
    from hierarchy.models.attention.moments import trace_moments

    if words is None:
        if field is None:
            raise HierarchyError("simulate needs words or field", field="words")
        words = field.words
    words = list(words)
    steps = record_steps(times, problem)
    n_final, T = int(steps[-1]), len(steps)
    traj = Trajectory(t=steps * problem.step_time, steps=steps, mu=np.full((T, len(words)), np.nan),
                      loss=np.full(T, np.nan), samples=steps * problem.batch, complete=False, recorded=0)
    rng = sample_rng(seed)
    n = row = 0
    if resume is not None:
        mats = unflat_state(problem.parameterization, resume["matrices"], mats)
        rng.bit_generator.state = json.loads(str(resume["rng"]))
        n, row = int(resume["step"]), int(resume["row"])
        traj.mu[:row], traj.loss[:row] = resume["mu"][:row], resume["loss"][:row]
    step_threads, moment_threads = _thread_choice(problem, mats, words, engine, threads, traj)
    labels = _labels(field, words)
    stepper = make_stepper(problem, mats, engine)
    z = np.empty((problem.batch * problem.L, problem.d))
    title = progress if isinstance(progress, str) else "sgd"
    bar = _ProgressBar(n_final + 1 - n, title) if progress else None
    first, clock, last_ckpt = n, time.perf_counter(), time.monotonic()
    rewind = None

    def snapshot():
        traj.recorded = row
        traj.complete = row == T
        traj.seconds = time.perf_counter() - clock
        traj.state = {"matrices": flat_state(problem.parameterization, stepper.matrices()),
                      "rng": json.dumps(rng.bit_generator.state), "step": n, "row": row,
                      "mu": traj.mu.copy(), "loss": traj.loss.copy()}
        return traj

    def diverged(quantity, value):
        traj.diverged = {"step": int(n), "t": float(n * problem.step_time), "row": int(row),
                         "quantity": quantity, "value": float(value)}

    chooser = step_threads if hasattr(step_threads, "holding") else None
    blas = chooser.holding() if chooser is not None else blas_threads(step_threads)

    def advance():
        draw_samples(rng, problem, out=z)
        return stepper.forward(z) if n == n_final else stepper.step(z)

    try:
        blas.__enter__()
        while row < T and traj.diverged is None:
            # One iteration is atomic: an interrupt lands between iterations, so (matrices,
            # rng state, n, row) always describe the same point and the run can resume there.
            # An exception raised by code inside the iteration rewinds the random stream.
            # Overflow is detected below (divergence), so numpy's warnings about it are off.
            with _signals_deferred(), np.errstate(all="ignore"):
                rewind = rng.bit_generator.state
                recording = n == steps[row]
                if recording:
                    mu_row = trace_moments(problem.parameterization, words, stepper.matrices(),
                                           threads=moment_threads)
                    bad = divergence(mu_row, labels=labels)
                    if bad is not None:
                        diverged(*bad)
                        rewind = None
                        break
                    traj.mu[row] = mu_row
                G = chooser(advance) if chooser is not None else advance()
                bad = divergence(G, labels=None, quantity="pre-activation G")
                if bad is not None:
                    traj.mu[row] = np.nan
                    diverged(*bad)
                    rewind = None
                    break
                if recording:
                    loss = float(np.mean(problem.loss.value(G)))
                    if not np.isfinite(loss):
                        traj.mu[row] = np.nan
                        diverged("loss", loss)
                        rewind = None
                        break
                    traj.loss[row] = loss
                    row += 1
                if n == n_final:
                    continue
                n += 1
                rewind = None
            if bar is not None:
                bar.update(n - first)
            if on_checkpoint is not None and time.monotonic() - last_ckpt > checkpoint_every:
                on_checkpoint(snapshot())
                last_ckpt = time.monotonic()
    except KeyboardInterrupt:
        if rewind is not None:
            rng.bit_generator.state = rewind
        traj.mu[row:], traj.loss[row:] = np.nan, np.nan
        if on_checkpoint is not None:
            on_checkpoint(snapshot())
    finally:
        blas.__exit__(None, None, None)
        if bar is not None:
            bar.close()
    for name, choice in (("step", step_threads), ("moments", moment_threads)):
        if hasattr(choice, "report"):
            traj.threads[name] = choice.report()
    return snapshot()


# A moment or pre-activation above this magnitude (or a non-finite one) counts as divergence.
DIVERGENCE_THRESHOLD = 1e12


def divergence(values, labels=None, quantity="moment", threshold=DIVERGENCE_THRESHOLD):
    """Whether an SGD quantity has diverged, and which entry did.

    Parameters
    ----------
    values : array_like
        Recorded moments (one per word) or a step's pre-activations ``G``.
    labels : sequence of str, optional
        Names of the entries of ``values`` (the word labels), for the report.
    quantity : str
        What ``values`` is, for the report.
    threshold : float
        Entries above this magnitude count as exploded (:data:`DIVERGENCE_THRESHOLD`).

    Returns
    -------
    (str, float) or None
        ``None`` when every entry is finite and at most ``threshold`` in magnitude; else the
        first bad entry (non-finite first, then the largest) as ``(description, value)``.
        Non-finite weights show up here too: they make ``G`` (and the moments) non-finite.
    """
    flat = np.asarray(values, dtype=float).ravel()
    if flat.size == 0 or np.max(np.abs(flat)) <= threshold:  # NaN fails the comparison
        return None
    finite = np.isfinite(flat)
    index = int(np.argmin(finite)) if not finite.all() else int(np.argmax(np.abs(flat)))
    name = quantity if labels is None else f"{quantity} {labels[index]}"
    value = flat[index]
    what = "non-finite" if not np.isfinite(value) else f"above {threshold:g} in magnitude"
    return f"{name} = {value:.6g} ({what})", value


def _labels(field, words):
    if field is not None and len(field.words) == len(words):
        return list(field.labels)
    return [".".join(str(int(x) + 1) for x in word) for word in words]


# SGD steps per timed block when the step's BLAS thread count is measured, and seconds
# after which it is measured again (the best count moves with the machine's load).
THREAD_TRIAL_STEPS = 8
THREAD_RECHECK_S = 20.0


def _thread_choice(problem, mats, words, engine, threads, traj):
    """Choosers (or fixed counts) of the BLAS threads of the steps and of the moments."""
    from hierarchy.core.blas_threads import candidate_counts, shared_chooser

    if threads != "auto":
        traj.threads = {"step": {"threads": threads}, "moments": {"threads": threads}}
        return threads, threads
    candidates = candidate_counts()  # read before any limit is set
    shapes = widths_of(problem.parameterization, mats)
    step = shared_chooser(("sgd-step", engine, problem.parameterization, problem.batch, problem.L,
                           problem.K, problem.trainable, shapes), candidates,
                          block=THREAD_TRIAL_STEPS, warmup=THREAD_TRIAL_STEPS,
                          recheck_s=THREAD_RECHECK_S)
    moments = shared_chooser(("sgd-moments", problem.parameterization, len(words), shapes), candidates)
    return step, moments


def widths_of(parameterization, mats):
    """The shapes of the model matrices (untied pairs flattened), as a hashable tuple."""
    blocks = [m for pair in mats for m in pair] if parameterization == "untied" else list(mats)
    return tuple(tuple(int(x) for x in np.shape(m)) for m in blocks)


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT/SIGTERM for the block (delivered when it ends)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _ProgressBar:
    """A one-line progress bar on stderr, drawn at most twice a second, after 2 s of work."""

    def __init__(self, total, title, delay=2.0):
        self.total, self.title = max(int(total), 1), title
        self.start = time.monotonic()
        self.delay, self.last, self.shown = delay, 0.0, False

    def update(self, done):
        now = time.monotonic()
        if now - self.start < self.delay or now - self.last < 0.5:
            return
        self.last, self.shown = now, True
        frac = min(done / self.total, 1.0)
        elapsed = now - self.start
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r{self.title} [{bar:<30}] {100 * frac:5.1f}% {done}/{self.total} steps "
                         f"{elapsed:6.1f}s eta {eta:6.1f}s")
        sys.stderr.flush()

    def close(self):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ----------------------------------------------------------------------------- hierarchy sgd

def record_times(config):
    """The requested record times of a config: ``[solve]`` ``points`` times in ``[0, t_final]``."""
    solve = config["solve"]
    return np.linspace(0.0, float(solve["t_final"]), int(solve["points"]))


def sgd_field(config):
    """The field whose words ``hierarchy sgd`` records (the one ``hierarchy solve`` builds)."""
    from hierarchy.models.attention.operators import build_field

    model, hier = config["model"], config["hierarchy"]
    return build_field(model["parameterization"], int(model["K"]), tuple(model["trainable"]),
                       int(hier["degree"]), observables=tuple(hier.get("observables", ())))


def sgd_initial_matrices(config):
    """The initial matrices of SGD: Gaussian, at ``sgd.d``, stream ``init.seed``."""
    from hierarchy.models.attention.initial import initial_matrices

    if config["init"].get("source", "gaussian") != "gaussian":
        raise HierarchyError('SGD needs matrices: init.source must be "gaussian" (got '
                             f'{config["init"]["source"]!r})', field="init.source")
    return initial_matrices(config, d=int(config["sgd"]["d"]))


def run_sgd(config, out_dir, *, resume=False, engine="cython", progress=True, checkpoint_every=30.0):
    """``hierarchy sgd CONFIG --out DIR``: run every seed, write results and plots.

    Writes ``result.npz`` (``t``, ``mu`` = seed average, ``mu_seeds`` (S, T, n), ``loss``,
    ``loss_seeds``, ``steps``, ``samples``), ``result.json`` (config, version, labels,
    summary) and ``sgd.png``. Progress is checkpointed (``result.state.npz``: matrices and
    random-stream state of the seed in flight); an interrupted run saves what it has, marked
    incomplete, and ``resume=True`` continues it.

    Parameters
    ----------
    config : dict
        A validated config (:func:`hierarchy.config.loader.load_config`).
    out_dir : str or path-like
    resume : bool
        Continue the run found in ``out_dir`` (same config required).
    engine : {"cython", "numpy"}
    progress : bool
        Progress bar on stderr.

    Returns
    -------
    dict
        The summary written to ``result.json``.
    """
    from hierarchy.core.io import Checkpoint, interruptible

    problem = problem_from_config(config)
    check_horizon(problem, config)
    field = sgd_field(config)
    mats = sgd_initial_matrices(config)
    seeds = list(config["sgd"]["seeds"])
    steps = record_steps(record_times(config), problem)
    times = steps * problem.step_time
    S, T, n = len(seeds), len(steps), len(field.labels)
    ckpt = Checkpoint(out_dir, config, min_interval=checkpoint_every)
    store = {"mu_seeds": np.full((S, T, n), np.nan), "loss_seeds": np.full((S, T), np.nan),
             "done": np.zeros(S, dtype=bool), "seconds": np.zeros(S)}
    in_flight = None
    if resume:
        previous = ckpt.resume()
        if previous is not None and previous.get("complete"):
            return previous["summary"]
        state = (previous or {}).get("state")
        if state is not None:
            for key in store:
                store[key] = np.array(state[key])
            in_flight = {key[4:]: state[key] for key in state if key.startswith("cur_")} or None
    threads = {}

    def summary_of(complete, **extra):
        summary = _summary(problem, seeds, store, steps, engine, complete=complete, **extra)
        summary["blas_threads"] = threads
        return summary

    def save(traj=None, index=None, force=False, keep_state=True, summary=None):
        arrays = dict(store)
        if traj is not None and traj.recorded:
            arrays["mu_seeds"] = arrays["mu_seeds"].copy()
            arrays["mu_seeds"][index, :traj.recorded] = traj.mu[:traj.recorded]
            arrays["loss_seeds"] = arrays["loss_seeds"].copy()
            arrays["loss_seeds"][index, :traj.recorded] = traj.loss[:traj.recorded]
        state = {key: value for key, value in store.items()}
        if traj is not None:
            state.update({f"cur_{key}": np.asarray(value) for key, value in traj.state.items()})
        ckpt.save(t=times, mu=_seed_mean(arrays["mu_seeds"]), labels=field.labels,
                  summary=summary or summary_of(False), extra_arrays=_extra(arrays, steps, problem),
                  state=state if keep_state else None, force=force)

    with interruptible():
        try:
            for index, seed in enumerate(seeds):
                if store["done"][index]:
                    continue
                title = f"sgd seed {seed} ({index + 1}/{S})" if progress else False
                traj = simulate(problem, mats, seed=seed, times=times, field=field, engine=engine,
                                progress=title, resume=in_flight,
                                on_checkpoint=lambda tr, i=index: save(tr, i),
                                checkpoint_every=checkpoint_every)
                in_flight = None
                threads = traj.threads
                if traj.diverged is not None:
                    summary = summary_of(False, diverged=_divergence_report(traj, seed))
                    save(traj, index, force=True, keep_state=False, summary=summary)
                    return summary  # resuming would only diverge again: no resume state
                if not traj.complete:
                    save(traj, index, force=True)
                    return summary_of(False)
                store["mu_seeds"][index], store["loss_seeds"][index] = traj.mu, traj.loss
                store["done"][index], store["seconds"][index] = True, traj.seconds
                save(force=True)
        except KeyboardInterrupt:
            # Stopped outside a seed's stepping loop (compiling, measuring threads): the
            # files on disk (a resumed run's checkpoint, or the seeds done) stay as they are.
            if in_flight is None:
                save(force=True)
            return summary_of(False)
    summary = summary_of(True, field=field)
    mu = _seed_mean(store["mu_seeds"])
    ckpt.finish(t=times, mu=mu, labels=field.labels, summary=summary,
                extra_arrays=_extra(store, steps, problem))
    plot_sgd(pathlib.Path(out_dir) / "sgd.png", times, store["mu_seeds"], store["loss_seeds"], field)
    return summary


def check_horizon(problem, config):
    """Refuse a learning rate for which not one SGD step fits in ``solve.t_final``.

    Raises
    ------
    HierarchyError
        ``sgd.learning_rate`` so large that ``t_final`` rounds to zero steps.
    """
    t_final = float(config["solve"]["t_final"])
    if int(record_steps([t_final], problem)[-1]) >= 1:
        return
    factor = TIME_FACTOR[problem.parameterization]
    limit = 2.0 * t_final * problem.d / factor
    raise HierarchyError(
        f"sgd.learning_rate = {problem.learning_rate:g}: one SGD step is "
        f"{problem.step_time:.3g} of hierarchy time, so not a single step fits in solve.t_final "
        f"= {t_final:g}; allowed: learning_rate < {limit:.6g} (2·t_final·sgd.d/{factor:g})",
        field="sgd.learning_rate")


def _divergence_report(traj, seed):
    where = traj.diverged
    message = (f"SGD diverged at step {where['step']} (t = {where['t']:.6g}) of seed {seed}: "
               f"{where['quantity']}; lower sgd.learning_rate")
    return dict(where, seed=int(seed), message=message)


def _seed_mean(mu_seeds):
    with np.errstate(invalid="ignore"), _quiet_nan_warnings():
        return np.nanmean(mu_seeds, axis=0)


@contextlib.contextmanager
def _quiet_nan_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _extra(store, steps, problem):
    return {"mu_seeds": store["mu_seeds"], "loss_seeds": store["loss_seeds"],
            "loss": _seed_mean(store["loss_seeds"][:, :, None])[:, 0],
            "steps": steps, "samples": steps * problem.batch}


def _summary(problem, seeds, store, steps, engine, complete, field=None, diverged=None):
    n_steps = int(steps[-1])
    seconds = float(np.sum(store["seconds"]))
    done = int(np.sum(store["done"]))
    summary = {
        "complete": bool(complete), "engine": engine, "seeds": list(seeds), "seeds_done": done,
        "d": problem.d, "batch": problem.batch, "learning_rate": problem.learning_rate,
        "steps": n_steps, "samples": n_steps * problem.batch, "step_time": problem.step_time,
        "t_final": n_steps * problem.step_time, "seconds": seconds,
        "seconds_per_step": seconds / max(done * n_steps, 1),
    }
    if diverged is not None:
        summary["diverged"] = diverged
    if field is not None:
        mu = _seed_mean(store["mu_seeds"])[-1]
        summary["final"] = {label: float(mu[i]) for i, label in enumerate(field.labels)
                            if len(field.words[i]) <= 2}
        summary["final_loss"] = float(np.nanmean(store["loss_seeds"][:, -1]))
    return summary


def plot_sgd(path, t, mu_seeds, loss_seeds, field, max_panels=6):
    """PNG of the degree ≤ 2 moments (seed mean and min–max band) and of the loss."""
    from hierarchy.core.plotting import make_sgd_figure, save_figure  # matplotlib loads only when plotting

    shown = [i for i, w in enumerate(field.words) if len(w) <= 2]
    fig = make_sgd_figure(t, mu_seeds[:, :, shown], loss_seeds, [field.labels[i] for i in shown],
                          field.parameterization, max_panels)
    save_figure(fig, path)
    return fig
