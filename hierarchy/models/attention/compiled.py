"""The compiled attention hierarchy: ``build``, ``load`` and :class:`Solver`.

``build`` turns a model into a :class:`Solver`: it builds the truncated field
(:mod:`hierarchy.models.attention.operators`), renders its kernel (:mod:`hierarchy.jit.sparse_kernels`)
and compiles it through the cache (:mod:`hierarchy.jit.cache`). The metadata a solver needs
(labels, words, coefficient names, the model) and the kernel tables are stored with the
compiled module, so ``load(name)`` re-opens a solver without rebuilding the field or compiling.

``build`` also records its arguments in the cache's alias index (:func:`build_key`), so a
repeated ``build`` loads the module straight away, without building the field or rendering
the kernel; the key covers the sources that decide the kernel (templates, ``rules``,
``operators``, ``words``, ``sparse_kernels``), the package version and the toolchain, so any change
to them misses the index and takes the full path.

:meth:`Solver.solve` integrates with the shared loop :func:`hierarchy.ode.integrate.integrate`
and returns a :class:`~hierarchy.core.trajectory.Trajectory`; :meth:`Solver.system` binds
coefficients and gives the :class:`~hierarchy.ode.system.System` of the pipeline.
"""

import hashlib
import io
import json
import warnings
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sps

import hierarchy
from hierarchy.core.errors import HierarchyError
from hierarchy.core.resources import available_memory_bytes
from hierarchy.jit import cache, render, sparse_kernels
from hierarchy.models.attention.ladder import extrapolated_ladder
from hierarchy.models.attention.operators import build_field, coefficient_vector
from hierarchy.models.attention.words import (
    alphabet,
    label_position,
    parse_label,
    word_label,
)
from hierarchy.ode.integrate import (
    DEFAULT_BLOWUP,
    SolveInterrupted,
    check_method,
    integrate,
)
from hierarchy.ode.system import NumpySystem

__all__ = [
    "META_FILE",
    "SolveInterrupted",
    "Solver",
    "build",
    "build_key",
    "load",
    "method_that_fits",
    "solver_metadata",
]

META_FILE = "meta.json"
META_FORMAT = 1
#: the files (relative to the package) whose text decides a kernel, besides the arguments:
#: every module the field's words and rules are built from (``variants.py`` was missing: an
#: edit there left a stale solver that ``hierarchy.build`` kept returning; an audit)
KEY_SOURCES = ("models/attention/rules.py", "models/attention/operators.py",
               "models/attention/words.py", "models/attention/variants.py",
               "jit/sparse_kernels.py", "jit/render.py")
KEY_TEMPLATES = ("rhs_table.pyx.j2", "rhs_unrolled.pyx.j2", "_buffers.pyx.j2")


# ----------------------------------------------------------------------------- build / load

def _npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def solver_metadata(field, form):
    """The ``meta.json`` of a compiled solver: the model, its labels, words and kernel form.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
    form : {"unrolled", "table"}

    Returns
    -------
    dict
        What :class:`Solver` needs besides the module and its tables.
    """
    return {
        "format": META_FORMAT,
        "parameterization": field.parameterization,
        "K": int(field.K),
        "trainable": [int(k) for k in field.trainable],
        "degree": int(field.degree),
        "observables": list(getattr(field, "observables", [])),
        "all_words": bool(getattr(field, "all_words", False)),
        "form": form,
        "labels": list(field.labels),
        "coefficient_names": list(field.coefficient_names),
        "words": [[int(x) for x in word] for word in field.words],
    }


def _sources_digest():
    """sha256 of everything that decides a kernel's source besides the build arguments."""
    digest = hashlib.sha256()
    digest.update(json.dumps([hierarchy.__version__, META_FORMAT, cache.toolchain_description(
        cache.DEFAULT_COMPILE_ARGS)], sort_keys=True).encode())
    package = Path(hierarchy.__file__).resolve().parent
    for name in KEY_SOURCES:
        digest.update(b"\0" + name.encode() + b"\0" + (package / name).read_bytes())
    for name in KEY_TEMPLATES:
        digest.update(b"\0" + name.encode() + b"\0" + render.template_text(name).encode())
    return digest.hexdigest()


def build_key(parameterization, K, trainable, degree, observables=(), all_words=False,
              kernel="auto"):
    """The alias-index key of a ``build`` call, or None when it cannot be formed cheaply.

    Equal for argument lists that build the same module (trainable sorted, observables
    canonicalized and sorted) as long as the sources, templates, package version and
    toolchain are unchanged. None for arguments the words module rejects (the full path then
    reports them) or when a source file cannot be read.
    """
    try:
        alph = alphabet(parameterization, int(K))
        canonical = sorted({word_label(parse_label(o, alph), alph) for o in observables})
        args = [str(parameterization), int(K), sorted(int(k) for k in trainable), int(degree),
                canonical, bool(all_words), str(kernel)]
        sources = _sources_digest()
    except (HierarchyError, OSError, TypeError, ValueError):
        return None
    return hashlib.sha256((json.dumps(args) + sources).encode()).hexdigest()


def _from_index(key, parameterization, K, trainable, degree, all_words, kernel):
    """The solver the index records under ``key``, or None (missing, stale or corrupted)."""
    name = cache.index_lookup(key)
    if name is None:
        return None
    try:
        solver = load(name)
    except (HierarchyError, OSError, ValueError, KeyError, TypeError):
        return None
    same = (solver.parameterization == parameterization and solver.K == int(K)
            and sorted(solver.trainable) == sorted(int(k) for k in trainable)
            and solver.degree == int(degree) and solver.all_words == bool(all_words)
            and kernel in ("auto", solver.form))
    return solver if same else None


def build(parameterization, K, trainable, degree, observables=(), all_words=False,
          kernel="auto"):
    """Build (or fetch from the cache) the compiled solver of a truncated hierarchy.

    Parameters
    ----------
    parameterization : {"tied", "untied", "direct"}
    K : int
        Number of indices.
    trainable : sequence of int
        1-based trainable indices.
    degree : int
        Truncation degree ``M``.
    observables : sequence of str
        Extra word labels to keep (with every word they reach).
    all_words : bool
        Keep every canonical word up to ``degree``.
    kernel : {"auto", "unrolled", "table"}
        Kernel form; ``"auto"`` unrolls small systems and uses tables for large ones.

    Returns
    -------
    Solver
        A second call with the same arguments imports the cached module without compiling,
        and (through the alias index) without building the field: its ``field`` is then
        rebuilt on first use.
    """
    key = build_key(parameterization, K, trainable, degree, observables, all_words, kernel)
    if key is not None:
        solver = _from_index(key, parameterization, K, trainable, degree, all_words, kernel)
        if solver is not None:
            return solver
    field = build_field(parameterization, K, trainable, degree, observables=observables,
                        all_words=all_words)
    generated = sparse_kernels.generate(field, kernel)
    meta = solver_metadata(field, generated.form)
    files = {META_FILE: json.dumps(meta, sort_keys=True).encode()}
    files.update({f"{name}.npy": _npy_bytes(a) for name, a in generated.tables.items()})
    module = cache.compile_pyx(generated.source, generated.name_hint, files=files)
    if key is not None:
        cache.index_record(key, module.__name__, build=_index_info(meta))
    return Solver(module, meta, generated.tables, field=field)


def _index_info(meta):
    """The model part of a solver's metadata (what an index entry shows a reader)."""
    return {k: meta[k] for k in ("parameterization", "K", "trainable", "degree", "observables",
                                 "all_words", "form")}


def load(name_or_path):
    """Re-open a compiled solver by module name or by its folder/extension path.

    Parameters
    ----------
    name_or_path : str or path-like
        A module name as printed by ``hierarchy generate``/``hierarchy list``, or the path of
        its cache folder (or of the extension file inside it).

    Returns
    -------
    Solver
    """
    path = Path(name_or_path)
    if path.exists():
        folder = path if path.is_dir() else path.parent
        module = cache.load_module(folder.name, folder=folder.parent)
    else:
        module = cache.load_module(str(name_or_path))
    folder = cache.module_dir(module)
    meta_path = folder / META_FILE
    if not meta_path.exists():
        raise HierarchyError(f"{module.__name__} is not a hierarchy solver (no {META_FILE})",
                             field="name")
    meta = json.loads(meta_path.read_text())
    tables = {p.stem: np.load(p, allow_pickle=False) for p in folder.glob("*.npy")}
    return Solver(module, meta, tables)


# ----------------------------------------------------------------------------- coefficients

class _Coefficients:
    """The coefficients of a solve: constants or a function ``mu -> kappa``."""

    def __init__(self, solver, coefficients):
        self.names = list(solver.coefficient_names)
        self.n_coef = len(self.names)
        self.inputs = None
        if callable(coefficients):
            self.function = coefficients
            inputs = getattr(coefficients, "inputs", None)
            self.inputs = None if inputs is None else np.asarray(inputs, dtype=np.int64)
            self.constant = None
        else:
            self.function = None
            self.constant = coefficient_vector(self.names, coefficients, owner="solver")

    def __call__(self, mu):
        if self.function is None:
            return self.constant
        kappa = self.function(mu)
        if isinstance(kappa, dict):
            return coefficient_vector(self.names, kappa, owner="solver")
        kappa = np.asarray(kappa, dtype=np.float64)
        if kappa.shape != (self.n_coef,):
            raise HierarchyError(
                f"the coefficient function returned shape {kappa.shape}, expected "
                f"({self.n_coef},) ordered like {self.names}", field="coefficients")
        return kappa

    def derivative(self, mu):
        """``∂κ/∂μ`` on the input columns, by central finite differences: (n_coef, n_inputs)."""
        if self.function is None or self.inputs is None or self.inputs.size == 0:
            return None
        grad = np.empty((self.n_coef, self.inputs.size))
        probe = np.array(mu, dtype=np.float64)
        for a, j in enumerate(self.inputs):
            step = np.cbrt(np.finfo(float).eps) * max(1.0, abs(probe[j]))
            saved = probe[j]
            probe[j] = saved + step
            upper = self(probe)
            probe[j] = saved - step
            lower = self(probe)
            probe[j] = saved
            grad[:, a] = (upper - lower) / (2.0 * step)
        return grad


# ----------------------------------------------------------------------------- method choice

#: LSODA keeps dense n x n work arrays (its Jacobian and its LU: 16 n² bytes); it may use this
#: share of the available memory, beyond which :data:`LARGE_FIELD_METHOD` takes over (on 24 GB
#: about 18,000 words; untied K=2 degree 8 has 130,829).
LSODA_MEMORY_SHARE = 0.25
#: the method of a field too large for LSODA: explicit, as LSODA itself starts, so no
#: Jacobian is factorised. BDF with the analytic sparse Jacobian, the choice until this
#: release, had not taken its first step on the untied K = 2 default (degree 8, d = 400)
#: after 8 minutes and 6 GB, where RK45 solves it in 0.17 s (98 evaluations). A stiff
#: large field can still ask for BDF by name.
LARGE_FIELD_METHOD = "RK45"
#: state sizes already warned about by :func:`method_that_fits` (one warning each)
WARNED_SIZES = set()


def method_that_fits(method, n_words, available_bytes=None):
    """``method``, or :data:`LARGE_FIELD_METHOD` (with one warning) where LSODA's dense work
    arrays cannot fit.

    Parameters
    ----------
    method : str
    n_words : int
        State size.
    available_bytes : int, optional
        Default :func:`hierarchy.core.resources.available_memory_bytes`.

    Returns
    -------
    str
        The method to integrate with.
    """
    available = available_memory_bytes() if available_bytes is None else available_bytes
    if method != "LSODA" or 16.0 * n_words ** 2 <= LSODA_MEMORY_SHARE * available:
        return method
    if n_words not in WARNED_SIZES:
        WARNED_SIZES.add(n_words)
        warnings.warn(f"solve.method = 'LSODA' needs dense {n_words} x {n_words} work arrays "
                      f"({8 * n_words ** 2 / 2**30:.3g} GiB); integrating with "
                      f"{LARGE_FIELD_METHOD} instead (explicit; set solve.method = 'BDF' for "
                      "a stiff field: the analytic sparse Jacobian)", RuntimeWarning,
                      stacklevel=3)
    return LARGE_FIELD_METHOD


# ----------------------------------------------------------------------------- solver

class Solver:
    """A compiled truncated hierarchy ``dμ = Σ_c κ_c(μ) A_c μ``.

    Obtain one with :func:`build` or :func:`load`.

    Attributes
    ----------
    name : str
        Module name (``hierarchy list`` shows it).
    path : pathlib.Path
        Cache folder of the module.
    form : str
        Kernel form, ``"unrolled"`` or ``"table"``.
    labels, coefficient_names : list of str
    words : list of tuple
    parameterization, K, trainable, degree, observables, all_words
        The model the solver was built for.
    """

    def __init__(self, module, meta, tables, field=None):
        self._module = sparse_kernels.attach(module, tables)
        self.name = module.__name__
        self.path = cache.module_dir(module)
        self.form = meta["form"]
        self.parameterization = meta["parameterization"]
        self.K = meta["K"]
        self.trainable = tuple(meta["trainable"])
        self.degree = meta["degree"]
        self.observables = list(meta["observables"])
        self.all_words = meta["all_words"]
        self.labels = list(meta["labels"])
        self.coefficient_names = list(meta["coefficient_names"])
        self.words = [tuple(w) for w in meta["words"]]
        self._jac_indptr = np.asarray(tables["jac_indptr"])
        self._jac_indices = np.asarray(tables["jac_indices"])
        self._position = {label: i for i, label in enumerate(self.labels)}
        if field is not None:
            self.__dict__["field"] = field

    @property
    def module(self):
        """The compiled kernel module."""
        return self._module

    @property
    def module_name(self):
        """The compiled module's name (as ``name``)."""
        return self.name

    def __repr__(self):
        return (f"<Solver {self.name}: {self.parameterization} K={self.K} "
                f"trainable={list(self.trainable)} degree={self.degree}, {len(self)} words, "
                f"{self.form} kernel>")

    def __len__(self):
        return len(self.labels)

    @cached_property
    def field(self):
        """The :class:`hierarchy.models.attention.operators.Field` (rebuilt on first use
        after ``load``)."""
        field = build_field(self.parameterization, self.K, self.trainable, self.degree,
                            observables=self.observables, all_words=self.all_words)
        if list(field.labels) != self.labels:
            raise HierarchyError(
                f"solver {self.name} was built by another version of "
                "hierarchy.models.attention.operators; rebuild it with hierarchy.build",
                field="name")
        return field

    @cached_property
    def alphabet(self):
        """The :class:`hierarchy.models.attention.words.Alphabet` of the model."""
        return alphabet(self.parameterization, self.K)

    def index(self, label):
        """State position of a word, given the label of any representative."""
        return label_position(label, self.alphabet, self._position, self.degree)

    def coefficient_vector(self, coefficients):
        """Coefficients as an array ordered like :attr:`coefficient_names`.

        ``coefficients`` is a dict name -> value (``gamma`` defaults to 0) or an array; see
        :func:`hierarchy.models.attention.operators.coefficient_vector`.
        """
        return coefficient_vector(self.coefficient_names, coefficients, owner="solver")

    # ------------------------------------------------------------------ evaluation

    def _state(self, mu):
        mu = np.ascontiguousarray(mu, dtype=np.float64)
        if mu.shape != (len(self),):
            raise HierarchyError(f"state must have shape ({len(self)},), got {mu.shape}",
                                 field="mu")
        return mu

    def _rhs_kappa(self, mu, kappa):
        out = np.empty(len(self))
        self._module.rhs(np.ascontiguousarray(mu, dtype=np.float64), kappa, out)
        return out

    def rhs(self, mu, coefficients, t=0.0):
        """Right-hand side ``Σ_c κ_c A_c μ``.

        Parameters
        ----------
        mu : array_like, shape (n,)
        coefficients : dict, array_like or callable
            Constants (dict name -> value or array ordered like ``coefficient_names``), or
            a function ``mu -> kappa``.
        t : float
            Unused (the hierarchy is autonomous); accepted for ``solve_ivp`` signatures.
        """
        mu = self._state(mu)
        return self._rhs_kappa(mu, _Coefficients(self, coefficients)(mu))

    @property
    def jacobian_pattern(self):
        """``(indptr, indices)`` of the union sparsity pattern of all operators (CSR)."""
        return self._jac_indptr, self._jac_indices

    def _structural_jacobian(self, kappa):
        data = np.empty(self._jac_indices.size)
        self._module.jac_data(kappa, data)
        return sps.csr_matrix((data, self._jac_indices, self._jac_indptr),
                              shape=(len(self), len(self)))

    def _jacobian(self, mu, coef):
        jac = self._structural_jacobian(coef(mu))
        grad = coef.derivative(mu)
        if grad is None:
            return jac
        # Low-rank part Σ_c (A_c μ) ⊗ ∂κ_c/∂μ, nonzero only in the coefficient inputs' columns.
        parts = np.column_stack([self._rhs_kappa(mu, unit) for unit in np.eye(coef.n_coef)])
        low_rank = parts @ grad
        rows = np.repeat(np.arange(len(self)), coef.inputs.size)
        cols = np.tile(coef.inputs, len(self))
        extra = sps.csr_matrix((low_rank.ravel(), (rows, cols)), shape=jac.shape)
        return (jac + extra).tocsr()

    def jacobian(self, mu, coefficients):
        """Jacobian ``∂(dμ)/∂μ`` as a scipy.sparse CSR matrix.

        For constant coefficients this is ``Σ_c κ_c A_c``. For a coefficient function with
        an ``inputs`` attribute (the state positions it reads), the low-rank part
        ``Σ_c (A_c μ) ⊗ ∂κ_c/∂μ`` is added on those columns, with ``∂κ/∂μ`` taken by central
        finite differences of the function over its inputs. A function without ``inputs``
        gets the structural part only.
        """
        mu = self._state(mu)
        return self._jacobian(mu, _Coefficients(self, coefficients))

    def system(self, coefficients):
        """The :class:`~hierarchy.ode.system.System` of this hierarchy with ``coefficients``.

        Parameters
        ----------
        coefficients : dict, array_like or callable
            As for :meth:`rhs`.

        Returns
        -------
        hierarchy.ode.system.NumpySystem
            ``rhs(y, t)`` and ``jacobian(y, t)`` on the compiled kernel, the solver's labels
            and canonical ``index``.
        """
        coef = _Coefficients(self, coefficients)
        return NumpySystem(lambda y, t: self._rhs_kappa(y, coef(y)), self.labels,
                           index=self.index,
                           jacobian=lambda y, t: self._jacobian(np.ascontiguousarray(y), coef))

    # ------------------------------------------------------------------ integration

    def solve(self, mu0, t_span, coefficients, t_eval=None, method="LSODA", rtol=1e-8,
              atol=1e-10, blowup=DEFAULT_BLOWUP, progress=None, max_step=np.inf,
              extrapolate=False, min_degree=2, tolerance=1e-4):
        """Integrate the hierarchy with the shared loop :func:`hierarchy.ode.integrate.integrate`.

        With ``extrapolate=True`` the answer is what ``hierarchy solve`` reports: every
        degree from ``min_degree`` to :attr:`degree` is solved and each word extrapolated
        across them, with an error estimate and a validity horizon
        (:meth:`solve_extrapolated`, which takes the remaining arguments).

        Parameters
        ----------
        mu0 : array_like, shape (n,)
            Initial moments, ordered like :attr:`labels`.
        t_span : (float, float)
        coefficients : dict, array_like or callable
            Constants, or a function ``mu -> kappa`` (e.g. a potential's
            ``CoefficientFunction``, whose ``inputs`` feed the implicit methods' Jacobian).
        t_eval : array_like, optional
            Output times; default: the integrator's own steps.
        method : {"LSODA", "RK45", "RK23", "DOP853", "BDF", "Radau"}
            ``BDF`` and ``Radau`` receive the analytic sparse Jacobian (see
            :meth:`jacobian`); ``LSODA`` becomes :data:`LARGE_FIELD_METHOD` where its dense
            work arrays would not fit in memory (:func:`method_that_fits`, with a warning).
        rtol, atol : float
        blowup : float
            The run stops when a moment exceeds this magnitude or stops being finite.
        progress : hierarchy.core.progress.Progress, optional
            Shows the integration time; None shows nothing.
        max_step : float

        Returns
        -------
        hierarchy.core.trajectory.Trajectory
            On blow-up, ``status == Status.BLOWUP`` and the trajectory at the output times
            before the stopping time (the stopping state is ``t_stop``/``mu_stop``); an
            integrator failure gives ``Status.FAILED``; both name the words involved.
            ``result["2.1.1"]`` accepts any representative of a word.

        Raises
        ------
        SolveInterrupted
            On Ctrl-C (or SIGTERM under :func:`hierarchy.core.io.interruptible`), with the
            trajectory so far.
        """
        check_method(method)
        t0, t1 = float(t_span[0]), float(t_span[1])
        if not t1 > t0:
            raise HierarchyError(f"t_span must be increasing, got {t_span}", field="t_span")
        if extrapolate:
            times = np.linspace(t0, t1, 101) if t_eval is None else t_eval
            return self.solve_extrapolated(mu0, times, coefficients, min_degree=min_degree,
                                           tolerance=tolerance, method=method, rtol=rtol,
                                           atol=atol, progress=progress)
        mu0 = self._state(mu0)
        method = method_that_fits(method, mu0.size)
        coef = _Coefficients(self, coefficients)
        return integrate(lambda t, y: self._rhs_kappa(y, coef(y)), mu0, (t0, t1),
                         t_eval=t_eval, method=method, rtol=rtol, atol=atol,
                         jac=lambda t, y: self._jacobian(np.ascontiguousarray(y), coef),
                         max_step=max_step, blowup=blowup, progress=progress,
                         labels=self.labels, index=self.index,
                         subject="the truncated hierarchy", entries="words")

    def solve_extrapolated(self, mu0, t_eval, coefficients, min_degree=2, tolerance=1e-4,
                           method="LSODA", rtol=1e-8, atol=1e-10, progress=None):
        """The ``M -> infinity`` answer, its error estimate and its validity horizon.

        Solves every degree from ``min_degree`` to :attr:`degree` from the same start (the
        lower degrees built, or loaded from the cache, for this model) and extrapolates each
        word across the degrees, exactly as ``hierarchy solve`` with ``[solve] extrapolate``
        does (:func:`hierarchy.models.attention.ladder.extrapolated_ladder`).

        Parameters
        ----------
        mu0 : array_like, shape (n,)
            Initial moments, ordered like :attr:`labels`.
        t_eval : array_like
            Increasing output times; the first is the start.
        coefficients : dict, array_like or callable
            As for :meth:`solve`. A callable must list the state positions it reads in
            ``inputs`` (as :func:`~hierarchy.models.attention.coefficients.make_coefficients`
            gives), so that it can be read on the lower degrees' states.
        min_degree : int
            Lowest degree of the ladder (at least 4 degrees are needed for an estimate).
        tolerance : float
            Relative tolerance of the validity horizon (``[solve] tolerance``).
        method, rtol, atol, progress
            As for :meth:`solve` (``rtol`` also sets the extrapolation's input accuracy).

        Returns
        -------
        hierarchy.core.trajectory.Trajectory
            ``y``: the extrapolated answer; columns ``error`` (its estimate, ``(T, n)``) and
            ``valid`` (error within ``tolerance`` times the word's largest magnitude so far);
            info ``valid_until`` (label -> last time of the validity horizon, NaN when even
            the start is not valid), ``beyond_horizon``, ``degrees``, ``tolerance``.
        """
        from hierarchy.core.extrapolation import LADDER_BLOWUP, MIN_TERMS, valid_until
        from hierarchy.core.trajectory import Trajectory

        times = np.asarray(t_eval, dtype=float)
        if times.ndim != 1 or times.size < 2 or np.any(np.diff(times) <= 0):
            raise HierarchyError("t_eval must be at least two increasing times", field="t_eval")
        degrees = range(int(min_degree), self.degree + 1)
        if len(degrees) < MIN_TERMS or min_degree < 2:
            raise HierarchyError(f"min_degree = {min_degree}: the extrapolation needs at least "
                                 f"{MIN_TERMS} degrees from min_degree >= 2 up to the solver's "
                                 f"degree {self.degree}", field="min_degree")
        mu0 = self._state(mu0)
        runs = []
        for degree in degrees:
            lower = self if degree == self.degree else self._lower(degree)
            begin = mu0[[self.index(label) for label in lower.labels]]
            run = lower.solve(begin, (times[0], times[-1]), _on_lower(coefficients, self, lower),
                              t_eval=times, method=method, rtol=rtol, atol=atol,
                              blowup=LADDER_BLOWUP, progress=progress)
            runs.append((lower, run))
        _, estimate, error = extrapolated_ladder(self, runs, times.size, rtol)
        valid, until = valid_until(times, estimate, error, tolerance)
        return Trajectory(
            t=times, y=estimate, labels=list(self.labels),
            message=f"extrapolated across degrees {degrees[0]}..{degrees[-1]}",
            columns={"error": error, "valid": valid},
            info={"valid_until": dict(zip(self.labels, until.tolist())),
                  "beyond_horizon": bool(not valid.all()), "degrees": list(degrees),
                  "tolerance": float(tolerance)},
            index=self.index)

    def _lower(self, degree):
        """The solver of this model at a lower ``degree`` (observables that fit kept)."""
        observables = [label for label in self.observables
                       if len(self.words[self.index(label)]) <= degree]
        return build(self.parameterization, self.K, self.trainable, degree,
                     observables=observables, all_words=self.all_words)


def _on_lower(coefficients, top, lower):
    """``coefficients`` of ``top`` read on ``lower``'s states (constants pass through)."""
    if not callable(coefficients):
        return coefficients
    inputs = getattr(coefficients, "inputs", None)
    if inputs is None:
        raise HierarchyError("extrapolate needs constant coefficients or a coefficient "
                             "function with inputs (the state positions it reads)",
                             field="coefficients")
    inputs = np.asarray(inputs, dtype=np.int64)
    positions = np.array([lower.index(top.labels[j]) for j in inputs], dtype=np.int64)

    def on_lower(mu):
        full = np.zeros(len(top))
        full[inputs] = np.asarray(mu)[positions]
        return coefficients(full)

    on_lower.inputs = positions
    return on_lower
