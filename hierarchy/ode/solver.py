"""Compiled solvers of truncated hierarchies: ``build``, ``load`` and the ODE driver.

``build`` turns a model into a :class:`Solver`: it builds the truncated field
(:mod:`hierarchy.models.attention.operators`), renders its kernel (:mod:`hierarchy.jit.codegen`) and compiles it
through the cache (:mod:`hierarchy.jit.cache`). The metadata a solver needs (labels, words,
coefficient names, the model) and the kernel tables are stored with the compiled module, so
``load(name)`` re-opens a solver without rebuilding the field or compiling.

``build`` also records its arguments in the cache's alias index (:func:`build_key`), so a
repeated ``build`` loads the module straight away, without building the field or rendering
the kernel; the key covers the sources that decide the kernel (templates, ``rules``,
``operators``, ``words``, ``codegen``), the package version and the toolchain, so any change
to them misses the index and takes the full path.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import time
import warnings
from dataclasses import dataclass, field as dataclass_field
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sps

from hierarchy.jit import cache
from hierarchy.jit import codegen
from hierarchy.config.loader import available_memory_bytes
from hierarchy.core.errors import HierarchyError

META_FILE = "meta.json"
META_FORMAT = 1
METHODS = ("RK45", "RK23", "DOP853", "LSODA", "BDF", "Radau")
IMPLICIT_METHODS = ("BDF", "Radau")


# ----------------------------------------------------------------------------- build / load

def _npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _metadata(field, form):
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


KEY_SOURCES = ("models/attention/rules.py", "models/attention/operators.py",
               "models/attention/words.py", "jit/codegen.py")
KEY_TEMPLATES = ("rhs_table.pyx.j2", "rhs_unrolled.pyx.j2", "_buffers.pyx.j2")


def _sources_digest():
    """sha256 of everything that decides a kernel's source besides the build arguments."""
    from hierarchy import __version__

    digest = hashlib.sha256()
    digest.update(json.dumps([__version__, META_FORMAT, cache.toolchain_description(
        cache.DEFAULT_COMPILE_ARGS)], sort_keys=True).encode())
    package = Path(__file__).resolve().parent.parent
    for name in KEY_SOURCES:
        digest.update(b"\0" + name.encode() + b"\0" + (package / name).read_bytes())
    for name in KEY_TEMPLATES:
        digest.update(b"\0" + name.encode() + b"\0" + codegen.template_text(name).encode())
    return digest.hexdigest()


def build_key(parameterization, K, trainable, degree, observables=(), all_words=False,
              kernel="auto"):
    """The alias-index key of a ``build`` call, or None when it cannot be formed cheaply.

    Equal for argument lists that build the same module (trainable sorted, observables
    canonicalized and sorted) as long as the sources, templates, package version and
    toolchain are unchanged. None for arguments the words module rejects (the full path then
    reports them) or when a source file cannot be read.
    """
    from hierarchy.models.attention.words import alphabet, parse_label, word_label

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
    from hierarchy.models.attention.operators import build_field

    key = build_key(parameterization, K, trainable, degree, observables, all_words, kernel)
    if key is not None:
        solver = _from_index(key, parameterization, K, trainable, degree, all_words, kernel)
        if solver is not None:
            return solver
    field = build_field(parameterization, K, trainable, degree, observables=observables,
                        all_words=all_words)
    generated = codegen.generate(field, kernel)
    meta = _metadata(field, generated.form)
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


# ----------------------------------------------------------------------------- results

@dataclass
class SolveResult:
    """Trajectory of a solve.

    Attributes
    ----------
    t : numpy.ndarray
        Times, shape ``(T,)``.
    mu : numpy.ndarray
        States, shape ``(T, n)``, columns ordered like ``labels``.
    labels : list of str
    status : int
        0 reached the end, 1 stopped by the blow-up guard, -1 the integrator failed,
        2 interrupted (carried by :class:`SolveInterrupted`).
    message : str
    diverged_labels : list of str
        Words that were non-finite or above the threshold when the run stopped (empty when
        ``status == 0``).
    method : str
    nfev, njev, nlu : int
        Right-hand-side, Jacobian and LU counts of the integrator.
    wall_s : float
        Wall time of the integration.
    t_stop, mu_stop : float, numpy.ndarray
        Time and state where the integration stopped (the blow-up event, the failure or the
        end of the span); with ``t_eval`` this point is usually not among ``t``.
    """

    t: np.ndarray
    mu: np.ndarray
    labels: list
    status: int
    message: str
    diverged_labels: list = dataclass_field(default_factory=list)
    method: str = ""
    nfev: int = 0
    njev: int = 0
    nlu: int = 0
    wall_s: float = 0.0
    t_stop: float = float("nan")
    mu_stop: np.ndarray = None

    @property
    def success(self):
        return self.status == 0

    def __getitem__(self, label):
        """Trajectory of one word (by label)."""
        try:
            return self.mu[:, self.labels.index(label)]
        except ValueError:
            raise HierarchyError(f"{label!r} is not a word of this result", field="label") from None


class SolveInterrupted(KeyboardInterrupt):
    """A ``KeyboardInterrupt`` (or SIGTERM under :func:`hierarchy.core.io.interruptible`)
    that stopped :meth:`Solver.solve`; ``result`` holds the trajectory up to that point
    (``status == 2``)."""

    def __init__(self, result):
        super().__init__(result.message)
        self.result = result


# ----------------------------------------------------------------------------- coefficients

class _Coefficients:
    """The coefficients of a solve: constants or a function ``mu -> kappa``."""

    def __init__(self, solver, coefficients):
        self.n_coef = len(solver.coefficient_names)
        self.inputs = None
        if callable(coefficients):
            self.function = coefficients
            inputs = getattr(coefficients, "inputs", None)
            self.inputs = None if inputs is None else np.asarray(inputs, dtype=np.int64)
            self.constant = None
        else:
            self.function = None
            self.constant = solver.coefficient_vector(coefficients)
        self._solver = solver

    def __call__(self, mu):
        if self.function is None:
            return self.constant
        kappa = self.function(mu)
        if isinstance(kappa, dict):
            return self._solver.coefficient_vector(kappa)
        kappa = np.asarray(kappa, dtype=np.float64)
        if kappa.shape != (self.n_coef,):
            raise HierarchyError(
                f"the coefficient function returned shape {kappa.shape}, expected "
                f"({self.n_coef},) ordered like {self._solver.coefficient_names}",
                field="coefficients")
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


# ----------------------------------------------------------------------------- solver

# LSODA keeps dense n x n work arrays (its Jacobian and its LU: 16 n² bytes); it may use this
# share of the available memory, beyond which BDF with the analytic sparse Jacobian takes over
# (on 24 GB about 18,000 words; untied K=2 degree 8 has 130,829).
LSODA_MEMORY_SHARE = 0.25
_METHOD_WARNED = set()


def _method_that_fits(method, n_words, available_bytes=None):
    """``method``, or ``BDF`` (with one warning) where LSODA's dense work arrays cannot fit."""
    available = available_memory_bytes() if available_bytes is None else available_bytes
    if method != "LSODA" or 16.0 * n_words ** 2 <= LSODA_MEMORY_SHARE * available:
        return method
    if n_words not in _METHOD_WARNED:
        _METHOD_WARNED.add(n_words)
        warnings.warn(f"solve.method = 'LSODA' needs dense {n_words} x {n_words} work arrays "
                      f"({8 * n_words ** 2 / 2**30:.3g} GiB); integrating with BDF and the "
                      "analytic sparse Jacobian instead", RuntimeWarning, stacklevel=3)
    return "BDF"


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
        self._module = codegen.attach(module, tables)
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
        return self.name

    def __repr__(self):
        return (f"<Solver {self.name}: {self.parameterization} K={self.K} "
                f"trainable={list(self.trainable)} degree={self.degree}, {len(self)} words, "
                f"{self.form} kernel>")

    def __len__(self):
        return len(self.labels)

    @cached_property
    def field(self):
        """The :class:`hierarchy.models.attention.operators.Field` (rebuilt on first use after ``load``)."""
        from hierarchy.models.attention.operators import build_field

        field = build_field(self.parameterization, self.K, self.trainable, self.degree,
                            observables=self.observables, all_words=self.all_words)
        if list(field.labels) != self.labels:
            raise HierarchyError(
                f"solver {self.name} was built by another version of hierarchy.models.attention.operators; "
                "rebuild it with hierarchy.build", field="name")
        return field

    @cached_property
    def _alphabet(self):
        from hierarchy.models.attention.words import alphabet

        return alphabet(self.parameterization, self.K)

    def index(self, label):
        """State position of a word, given the label of any representative."""
        from hierarchy.models.attention.words import label_position

        return label_position(label, self._alphabet, self._position, self.degree)

    def coefficient_vector(self, coefficients):
        """Coefficients as an array ordered like :attr:`coefficient_names`.

        ``coefficients`` is a dict name -> value (``gamma`` defaults to 0) or an array.
        """
        names = self.coefficient_names
        if not isinstance(coefficients, dict):
            kappa = np.asarray(coefficients, dtype=np.float64)
            if kappa.shape != (len(names),):
                raise HierarchyError(f"coefficients must have length {len(names)} "
                                     f"({', '.join(names)})", field="coefficients")
            return kappa
        unknown = sorted(set(coefficients) - set(names))
        if unknown:
            raise HierarchyError(f"unknown coefficient(s) {unknown}; this solver takes "
                                 f"{', '.join(names)}", field="coefficients")
        missing = [c for c in names if c not in coefficients and c != "gamma"]
        if missing:
            raise HierarchyError(f"missing coefficient(s) {missing}", field="coefficients")
        return np.array([float(coefficients.get(c, 0.0)) for c in names])

    # ------------------------------------------------------------------ evaluation

    def _state(self, mu):
        mu = np.ascontiguousarray(mu, dtype=np.float64)
        if mu.shape != (len(self),):
            raise HierarchyError(f"state must have shape ({len(self)},), got {mu.shape}",
                                 field="mu")
        return mu

    def _rhs_kappa(self, mu, kappa):
        out = np.empty(len(self))
        self._module.rhs(mu, kappa, out)
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

    # ------------------------------------------------------------------ integration

    def solve(self, mu0, t_span, coefficients, t_eval=None, method="LSODA", rtol=1e-8,
              atol=1e-10, blowup=1e8, progress=False, max_step=np.inf):
        """Integrate the hierarchy with scipy's ODE integrators.

        The loop of ``scipy.integrate.solve_ivp`` is run here directly on its integrator
        classes (``scipy.integrate.RK45``, ``LSODA``, ``BDF``, ...), so that the blow-up
        guard sees every accepted step, survives non-finite states (where solve_ivp's event
        root-finding fails) and keeps the outputs computed before the stop.

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
            :meth:`jacobian`).
        rtol, atol : float
        blowup : float
            The run stops when a moment exceeds this magnitude or stops being finite.
        progress : bool
            Print the integration time to stderr about once a second.
        max_step : float

        Returns
        -------
        SolveResult
            On blow-up, ``status == 1`` and the trajectory at the output times before the
            stopping time (the stopping state is ``t_stop``/``mu_stop``); an integrator
            failure gives ``status == -1``; both name the words involved.
        """
        import scipy.integrate

        if method not in METHODS:
            raise HierarchyError(f"method must be one of {', '.join(METHODS)}, got {method!r}",
                                 field="solve.method")
        t0, t1 = float(t_span[0]), float(t_span[1])
        if not t1 > t0:
            raise HierarchyError(f"t_span must be increasing, got {t_span}", field="t_span")
        mu0 = self._state(mu0)
        method = _method_that_fits(method, mu0.size)
        coef = _Coefficients(self, coefficients)
        options = dict(rtol=rtol, atol=atol, max_step=max_step)
        if method in IMPLICIT_METHODS:
            options["jac"] = lambda t, y: self._jacobian(np.ascontiguousarray(y), coef)
        integrator = getattr(scipy.integrate, method)(
            lambda t, y: self._rhs_kappa(y, coef(y)), t0, mu0, t1, **options)
        recorder = _Recorder(t0, mu0, t_eval, blowup)
        start = time.perf_counter()
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                status = _integrate(integrator, recorder, progress, t1)
        except KeyboardInterrupt as interrupt:
            if progress:
                print(file=sys.stderr)  # end the progress line
            stopped = self._result(integrator, recorder, 2, blowup, method,
                                   time.perf_counter() - start)
            raise SolveInterrupted(stopped) from interrupt
        wall = time.perf_counter() - start
        return self._result(integrator, recorder, status, blowup, method, wall)

    def _result(self, integrator, recorder, status, blowup, method, wall):
        t, mu = recorder.arrays(len(self))
        t_stop, mu_stop = recorder.stop
        diverged = []
        if status == 0:
            message = "reached the end of the time span"
        elif status == 2:
            message = f"interrupted at t = {t_stop:.6g}"
        elif status == 1:
            diverged = self._offending(recorder.bad_state, blowup)
            message = (f"the truncated hierarchy blew up at t = {t_stop:.6g}: "
                       f"{', '.join(diverged)} exceeded {blowup:g} or became non-finite")
        else:
            diverged = self._offending(mu_stop, blowup)
            message = (f"the integrator failed after t = {t_stop:.6g} ({recorder.failure}); "
                       f"largest or non-finite words: {', '.join(diverged)}")
        return SolveResult(t=t, mu=mu, labels=list(self.labels), status=status, message=message,
                           diverged_labels=diverged, method=method, nfev=int(integrator.nfev),
                           njev=int(integrator.njev), nlu=int(integrator.nlu), wall_s=wall,
                           t_stop=float(t_stop), mu_stop=mu_stop)

    def _offending(self, y, blowup, show=8):
        """Labels of the non-finite or over-threshold words, else of the largest ones."""
        size = np.where(np.isfinite(y), np.abs(y), np.inf)
        bad = np.flatnonzero(size > blowup)
        if bad.size == 0:
            bad = np.argsort(size)[::-1][:3]
        bad = bad[np.argsort(size[bad])[::-1]][:show]
        return [self.labels[i] for i in bad]


def _exceeds(y, threshold):
    return not np.all(np.isfinite(y)) or np.max(np.abs(y), initial=0.0) > threshold


class _Recorder:
    """Collects the output states of an integration and where it stopped."""

    def __init__(self, t0, mu0, t_eval, blowup):
        self.blowup = blowup
        self.t_eval = None if t_eval is None else np.sort(np.asarray(t_eval, dtype=float))
        self.next = 0  # first output time not yet written
        self.ts, self.ys = [], []
        if self.t_eval is None:
            self.ts.append(t0)
            self.ys.append(np.array(mu0))
        else:
            self.next = np.searchsorted(self.t_eval, t0, side="left")
            if self.next < self.t_eval.size and self.t_eval[self.next] == t0:
                self.ts.append(t0)
                self.ys.append(np.array(mu0))
                self.next += 1
        self.stop = (t0, np.array(mu0))
        self.bad_state = None
        self.failure = ""

    def record_step(self, t, y, dense):
        """Write the outputs of an accepted step up to ``t`` (``dense()`` interpolates it)."""
        if self.t_eval is None:
            self.ts.append(t)
            self.ys.append(np.array(y))
        else:
            end = np.searchsorted(self.t_eval, t, side="right")
            if end > self.next:
                times = self.t_eval[self.next:end]
                states = np.asarray(dense()(times)).reshape(len(y), times.size)
                self.ts.extend(times.tolist())
                self.ys.extend(states.T)
                self.next = end
        self.stop = (t, np.array(y))

    def arrays(self, n):
        if not self.ts:
            return np.zeros(0), np.zeros((0, n))
        return np.asarray(self.ts, dtype=float), np.vstack(self.ys)


def _first_bad_time(dense, t_old, t, threshold, iterations=60):
    """Bisect a step for the first time a moment is non-finite or above ``threshold``."""
    good, bad = t_old, t
    for _ in range(iterations):
        middle = 0.5 * (good + bad)
        if middle in (good, bad):
            break
        if _exceeds(dense(middle), threshold):
            bad = middle
        else:
            good = middle
    return good, bad


def _integrate(integrator, recorder, progress, t_final):
    """Step ``integrator`` to the end (0), a blow-up (1) or a failure (-1).

    The guard is checked after every accepted step; on a blow-up the crossing is located
    inside the step by bisection on the step's interpolant, and the outputs before it are
    kept.
    """
    last_report = time.perf_counter()
    while integrator.status == "running":
        try:
            message = integrator.step()
        except HierarchyError:
            raise
        except (ArithmeticError, RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
            message = f"{type(exc).__name__}: {exc}"  # e.g. a singular Newton matrix
            integrator.status = "failed"
        if integrator.status == "failed":
            recorder.failure = message or "step size too small"
            return -1
        t_old, t, y = integrator.t_old, integrator.t, integrator.y
        if _exceeds(y, recorder.blowup):
            dense = integrator.dense_output()
            good, bad = _first_bad_time(dense, t_old, t, recorder.blowup)
            recorder.record_step(good, dense(good), lambda: dense)
            bad_state = dense(bad)
            recorder.bad_state = bad_state if _exceeds(bad_state, recorder.blowup) else y
            recorder.stop = (bad, recorder.bad_state)
            return 1
        recorder.record_step(t, y, integrator.dense_output)
        if progress and time.perf_counter() - last_report > 1.0:
            last_report = time.perf_counter()
            print(f"\rt = {t:.6g} / {t_final:g}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return 0
