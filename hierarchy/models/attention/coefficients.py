"""Coefficient functions ``κ(μ)`` of a truncated field, from a loss (docs/math.md §5).

:func:`make_coefficients` returns a callable that reads the order parameters from the state
``μ`` and returns the coefficient vector ordered like ``field.coefficient_names``:

- tied: ``Gamma[k,l] = Γ_kl(q)``, ``q_kl = μ`` at label ``"k.l"`` (docs/math.md §5);
- untied: ``beta[k]``, ``a1[k,l]``, ``a2[k,l]`` at ``(m*(q), q⁽¹⁾, q⁽²⁾)`` with the slaved mean
  ``m*`` (Newton, warm-started) and ``β_k = −ψ_k/(t^A_k + t^B_k)``, ``ψ`` from eq. (27) (§3);
- direct: ``A[k,l] = ∂Φ/∂Ω_kl``, ``B[k,l] = ∂Φ/∂Ψ_kl`` (§4);
- ``gamma`` is the weight decay.

Overlaps outside the admissible cone are projected first (:mod:`hierarchy.models.attention.gaussian`).

For a finite-d state (SGD, matrix flows, weak recovery) call :func:`potential_gradients`::

    potential_gradients("tied",   loss, q=q, C=C)                 -> {"Phi", "Gamma", "error"}
    potential_gradients("untied", loss, m=m, q1=q1, q2=q2, C=C)   -> {"Phi", "b", "a1", "a2", "error"}
    potential_gradients("direct", loss, Omega=Om, Psi=Ps, C=C)    -> {"Phi", "A", "B", "error"}

with ``q, q1, q2, Omega, Psi`` ``(K, K)`` arrays (``q_kl = Tr(S_k S_l)/d``,
``q⁽¹⁾_kl = Tr(M_k M_lᵀ)/d``, ``q⁽²⁾_kl = Tr(M_k M_l)/d``, ``Ω_kl = Tr(S_k S_lᵀ)/d``,
``Ψ_kl = Tr(S_k S_l)/d``), ``m`` ``(K,)`` (``m_k = Tr(M_k)/√d``), ``C`` the ``L×L`` token
covariance (default identity), ``project=True`` to evaluate at the cone projection, and the
accuracy options of :class:`hierarchy.models.attention.potential.Potential` (``tol``, ``rule``, ...) as keywords.
The untied mean is used as given there; :meth:`UntiedCoefficients.mean_star` solves for ``m*``.
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.gaussian import (
    check_covariance,
    project_pair,
    project_tied,
)
from hierarchy.models.attention.losses import make_loss
from hierarchy.models.attention.moments import untied_means
from hierarchy.models.attention.potential import potential_for
from hierarchy.models.attention.rules import parse_coefficient_name
from hierarchy.models.attention.words import canonical_word, word_label


def _symmetric(values, pairs, K):
    """``(K, K)`` symmetric matrix from values at the upper-triangle ``pairs``."""
    out = np.zeros((K, K))
    for value, (k, l) in zip(values, pairs):
        out[k, l] = out[l, k] = value
    return out


def _upper_pairs(K):
    return [(k, l) for k in range(K) for l in range(k, K)]


def potential_gradients(parameterization, loss, *, C=None, q=None, m=None, q1=None, q2=None,
                        Omega=None, Psi=None, project=True, **accuracy):
    """``Φ`` and its Price-theorem gradients at a given state (see the module docstring).

    Returns
    -------
    dict
        tied ``{"Phi", "Gamma"}``; untied ``{"Phi", "b", "a1", "a2"}``; direct
        ``{"Phi", "A", "B"}``; each also ``"error"`` (quadrature error estimate, 0 if exact).
    """
    C = check_covariance(C, loss.L)
    potential = potential_for(loss, **accuracy)
    if parameterization == "tied":
        q = project_tied(q) if project else np.asarray(q, dtype=float)
        out = potential.price(C, q, q)
        return {"Phi": out.value, "Gamma": out.a1 + out.a2, "error": out.error}
    if parameterization == "untied":
        if project:
            q1, q2 = project_pair(q1, q2)
        out = potential.price(C, q1, q2, m=np.asarray(m, dtype=float))
        return {"Phi": out.value, "b": out.b, "a1": out.a1, "a2": out.a2, "error": out.error}
    if parameterization == "direct":
        if project:
            Omega, Psi = project_pair(Omega, Psi)
        out = potential.price(C, Omega, Psi)
        return {"Phi": out.value, "A": out.a1, "B": out.a2, "error": out.error}
    raise HierarchyError(f"parameterization must be tied, untied or direct; got {parameterization!r}",
                         field="model.parameterization")


class CoefficientFunction:
    """``κ(μ)`` for one field and loss.

    Attributes
    ----------
    names : list of str
        ``field.coefficient_names``.
    inputs : ndarray of int
        Positions in the state that the coefficients read.
    weight_decay : float
    covariance : ndarray
        Token covariance ``C``.
    potential : hierarchy.models.attention.potential.Potential
    error : float
        Quadrature error estimate of the last evaluation (0 for exact losses).
    """

    parameterization = None

    def __init__(self, field, loss, covariance=None, weight_decay=0.0, **accuracy):
        if field.K != loss.K:
            raise HierarchyError(f"the loss has K={loss.K} indices but model.K = {field.K}",
                                 field="model.K")
        self.field, self.loss = field, loss
        self.K, self.trainable = field.K, tuple(field.trainable)
        self.names = list(field.coefficient_names)
        self.covariance = check_covariance(covariance, loss.L)
        self.weight_decay = float(weight_decay)
        self.potential = potential_for(loss, **accuracy)
        self.error = 0.0
        self._slots = [parse_coefficient_name(name) for name in self.names]
        self._positions = {}
        self.inputs = np.array(self._input_positions(), dtype=np.intp)

    def _position(self, word):
        """State position of a word (tuple of letters), canonicalised."""
        alph = self.field.alphabet
        label = word_label(canonical_word(word, alph), alph)
        if label not in self._positions:
            try:
                self._positions[label] = self.field.index(label)
            except HierarchyError:
                raise HierarchyError(
                    f"the coefficients need the word {label!r}, which this field does not keep; "
                    "add it to hierarchy.observables", field="hierarchy.observables") from None
        return self._positions[label]

    def _assemble(self, blocks):
        """Coefficient vector from ``{"Gamma": (K,K) array, "beta": (K,) array, ...}``."""
        kappa = np.empty(len(self.names))
        for c, (kind, indices) in enumerate(self._slots):
            kappa[c] = self.weight_decay if kind == "gamma" else blocks[kind][indices]
        return kappa

    def as_dict(self, mu):
        """``{name: value}`` at state ``mu``."""
        return dict(zip(self.names, self(mu)))


class TiedCoefficients(CoefficientFunction):
    """``Gamma[k,l] = Γ_kl(P(q))`` with ``q_kl = μ_(k,l)`` (docs/math.md §5)."""

    parameterization = "tied"

    def _input_positions(self):
        alph = self.field.alphabet
        self._pairs = _upper_pairs(self.K)
        return [self._position((alph.letter(0, k + 1), alph.letter(0, l + 1))) for k, l in self._pairs]

    def overlaps(self, mu):
        """The ``(K, K)`` matrix ``q`` read from the state."""
        return _symmetric(np.asarray(mu)[self.inputs], self._pairs, self.K)

    def __call__(self, mu):
        q = project_tied(self.overlaps(mu))
        out = self.potential.price(self.covariance, q, q)
        self.error = out.error
        return self._assemble({"Gamma": out.a1 + out.a2})


class DirectCoefficients(TiedCoefficients):
    """``A[k,l] = ∂Φ/∂Ω_kl``, ``B[k,l] = ∂Φ/∂Ψ_kl`` at the projected ``(Ω, Ψ)`` (docs/math.md §5)."""

    parameterization = "direct"

    def _input_positions(self):
        alph = self.field.alphabet
        self._pairs = _upper_pairs(self.K)
        S = lambda k: alph.letter(0, k + 1)  # noqa: E731
        St = lambda k: alph.letter(1, k + 1)  # noqa: E731
        omega = [self._position((S(k), St(l))) for k, l in self._pairs]
        psi = [self._position((S(k), S(l))) for k, l in self._pairs]
        return omega + psi

    def overlaps(self, mu):
        """``(Ω, Ψ)`` read from the state."""
        values = np.asarray(mu)[self.inputs]
        n = len(self._pairs)
        return (_symmetric(values[:n], self._pairs, self.K), _symmetric(values[n:], self._pairs, self.K))

    def __call__(self, mu):
        omega, psi = project_pair(*self.overlaps(mu))
        out = self.potential.price(self.covariance, omega, psi)
        self.error = out.error
        return self._assemble({"A": out.a1, "B": out.a2})


class UntiedCoefficients(CoefficientFunction):
    """``beta[k]``, ``a1[k,l]``, ``a2[k,l]`` at the slaved mean ``m*(q)`` (docs/math.md §5).

    Parameters (besides the common ones)
    ------------------------------------
    teacher_mean : array_like or dict, optional
        ``m_k = Tr(M_k)/√d`` of the non-trainable indices (a length-``K`` sequence, whose
        trainable entries are the first Newton guess, or ``{k: value}`` with 1-based ``k``);
        default 0.
    newton_tol : float
        Newton stops when ``|∂Φ/∂m_𝒦| ≤ newton_tol · (1 + |∂²Φ/∂m²|)``.
    """

    parameterization = "untied"

    def __init__(self, field, loss, covariance=None, weight_decay=0.0, teacher_mean=None,
                 newton_tol=1e-11, max_newton=60, **accuracy):
        super().__init__(field, loss, covariance, weight_decay, **accuracy)
        self._m = self._initial_mean(teacher_mean)
        self._trainable = np.array([k - 1 for k in self.trainable], dtype=np.intp)
        self.newton_tol, self.max_newton = float(newton_tol), int(max_newton)
        self.m_star = self._m.copy()

    @property
    def teacher_means(self):
        """The means ``m_k`` this function was built with (non-trainable entries stay fixed).

        A read-only copy, shape ``(K,)``: trainable entries are the first Newton guess.
        """
        out = self._m.copy()
        out.setflags(write=False)
        return out

    def _initial_mean(self, teacher_mean):
        m = np.zeros(self.K)
        if teacher_mean is None:
            return m
        if isinstance(teacher_mean, dict):
            for k, value in teacher_mean.items():
                m[int(k) - 1] = float(value)
            return m
        values = np.atleast_1d(np.asarray(teacher_mean, dtype=float))
        if values.shape != (self.K,):
            raise HierarchyError(f"teacher_mean must have length model.K = {self.K}", field="teacher_mean")
        return values.copy()

    def _input_positions(self):
        alph = self.field.alphabet
        M = lambda k: alph.letter(0, k)  # noqa: E731  (1-based k)
        Mt = lambda k: alph.letter(1, k)  # noqa: E731
        A = lambda k: alph.letter(2, k)  # noqa: E731
        B = lambda k: alph.letter(3, k)  # noqa: E731
        self._pairs = _upper_pairs(self.K)
        q1 = [self._position((M(k + 1), Mt(l + 1))) for k, l in self._pairs]
        q2 = [self._position((M(k + 1), M(l + 1))) for k, l in self._pairs]
        traces = [self._position((X(k),)) for k in self.trainable for X in (A, B)]
        # ψ words of eq. (27): for trainable k, every l and r: (M_l^(r), B_k), (A_k, M_l^(r))
        psi = [self._position(word) for k in self.trainable for l in range(1, self.K + 1)
               for Mr in (M(l), Mt(l)) for word in ((Mr, B(k)), (A(k), Mr))]
        return q1 + q2 + traces + psi

    def _read(self, mu):
        values = np.asarray(mu)[self.inputs]
        n, T = len(self._pairs), len(self.trainable)
        q1 = _symmetric(values[:n], self._pairs, self.K)
        q2 = _symmetric(values[n:2 * n], self._pairs, self.K)
        traces = values[2 * n:2 * n + 2 * T].reshape(T, 2)
        psi_words = values[2 * n + 2 * T:].reshape(T, self.K, 2, 2)  # (k, l, r, which word)
        return q1, q2, traces, psi_words

    def overlaps(self, mu):
        """``(q⁽¹⁾, q⁽²⁾)`` read from the state."""
        q1, q2, _, _ = self._read(mu)
        return q1, q2

    def _expect(self, m, q1, q2):
        return self.potential.price(self.covariance, q1, q2, m=m)

    def fast_gradient(self, m, q1, q2):
        """The fast-phase gradient ``b = ∂Φ/∂m`` ``(K,)`` at ``(m, P(q⁽¹⁾, q⁽²⁾))`` (eq. 28)."""
        q1, q2 = project_pair(q1, q2)
        return self._expect(np.asarray(m, dtype=float), q1, q2).b

    def mean_star(self, q1, q2, start=None):
        """Slaved mean ``m*``: ``∂Φ/∂m_𝒦 = 0`` with ``∂²Φ/∂m_𝒦²`` positive definite (Assumption 5).

        Damped Newton from ``start`` (default: the previous solution). Non-trainable entries
        stay at the teacher mean.

        Raises
        ------
        HierarchyError
            When Newton finds no strongly convex critical point.
        """
        q1, q2 = project_pair(q1, q2)
        m = np.array(self.m_star if start is None else start, dtype=float)
        fixed = np.setdiff1d(np.arange(self.K), self._trainable)
        m[fixed] = self._m[fixed]
        tr = self._trainable
        ex = self._expect(m, q1, q2)
        for _ in range(self.max_newton):
            b = ex.b[tr]
            J = ex.mean_hessian[np.ix_(tr, tr)]
            eigen = np.linalg.eigvalsh(J)
            scale = 1.0 + np.max(np.abs(J))
            if np.max(np.abs(b)) <= self.newton_tol * scale and eigen[0] > 1e-10 * scale:
                self.m_star = m
                self.error = ex.error
                return m.copy()
            # Newton step when convex, else a gradient step of the curvature's size
            step = np.linalg.solve(J, b) if eigen[0] > 1e-10 * scale else b / scale
            m, ex = self._line_search(m, ex, step, b, q1, q2)
            if m is None:
                break
        key = "loss.expression" if self.loss.name == "expression" else "loss.name"
        raise HierarchyError(
            f"{key}: no strongly convex critical point of the potential in the trainable means "
            f"(Assumption 5 fails) at q1={np.round(q1, 6).tolist()}, "
            f"q2={np.round(q2, 6).tolist()}; this loss is not supported by "
            'model.parameterization = "untied" (the tied and direct ones need no such point)',
            field=key)

    def _line_search(self, m, ex, step, b, q1, q2):
        slope = float(b @ step)
        t = 1.0
        while t > 1e-10:
            trial = m.copy()
            trial[self._trainable] -= t * step
            new = self._expect(trial, q1, q2)
            if new.value <= ex.value - 1e-4 * t * slope or abs(new.value - ex.value) <= 1e-15 * (1 + abs(ex.value)):
                return trial, new
            t /= 2
        return None, None

    def __call__(self, mu):
        q1, q2, traces, psi_words = self._read(mu)
        q1, q2 = project_pair(q1, q2)
        m = self.mean_star(q1, q2)
        ex = self._expect(m, q1, q2)
        self.error = ex.error
        a1, a2 = ex.a1, ex.a2
        beta = np.zeros(self.K)
        for position, k in enumerate(self._trainable):
            a = np.stack([a1[k], a2[k]], axis=1)  # (l, r)
            psi = 2 * np.sum(a * psi_words[position].sum(axis=2))
            beta[k] = -psi / (traces[position, 0] + traces[position, 1])
        return self._assemble({"beta": beta, "a1": a1, "a2": a2})


_CLASSES = {"tied": TiedCoefficients, "untied": UntiedCoefficients, "direct": DirectCoefficients}


def coefficients_from_config(field, config, mats=None):
    """The coefficient function a validated config describes (``[model]``, ``[loss]``).

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
    config : dict
        A validated config (:func:`hierarchy.config.loader.load_config`).
    mats : list, optional
        The run's initial matrices. For untied models the fixed means
        ``m_k = Tr(U_kV_kᵀ)/√d`` are read from them, so the hierarchy, the matrix flow and
        SGD started from the same matrices see the same teacher mean; without matrices the
        means are 0 (their limit for Gaussian ``U, V``).
    """
    model = config["model"]
    tokens = int(model.get("tokens", 1))
    loss = make_loss(config["loss"], tokens, int(model["K"]))
    covariance = np.asarray(model.get("covariance") or np.eye(tokens), dtype=float)
    means = untied_means(mats) if mats is not None and field.parameterization == "untied" else None
    return make_coefficients(field, loss, covariance=covariance,
                             weight_decay=float(model.get("weight_decay", 0.0)), teacher_mean=means)


def make_coefficients(field, loss, covariance=None, weight_decay=0.0, teacher_mean=None, **accuracy):
    """The coefficient function ``κ(μ)`` of ``field`` for ``loss``.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Needs ``parameterization, K, trainable, alphabet, coefficient_names, index(label)``.
    loss : hierarchy.models.attention.losses.Loss
    covariance : array_like, optional
        Token covariance ``C`` (``L×L``); default identity.
    weight_decay : float
        ``gamma``.
    teacher_mean : array_like or dict, optional
        Untied only: means ``m_k`` of the non-trainable indices (default 0).
    **accuracy
        Options of :class:`hierarchy.models.attention.potential.Potential` (``tol``, ``rule``, ``order``, ...);
        untied also ``newton_tol``, ``max_newton``.

    Returns
    -------
    CoefficientFunction
        ``kappa = f(mu)`` ordered like ``field.coefficient_names``; ``f.inputs`` lists the state
        positions it reads.
    """
    kind = field.parameterization
    if kind not in _CLASSES:
        raise HierarchyError(f"parameterization must be tied, untied or direct; got {kind!r}",
                             field="model.parameterization")
    if kind == "untied":
        return UntiedCoefficients(field, loss, covariance, weight_decay, teacher_mean=teacher_mean, **accuracy)
    if teacher_mean is not None:
        raise HierarchyError("teacher_mean applies to the untied model only (tied and direct G are centered)",
                             field="teacher_mean")
    return _CLASSES[kind](field, loss, covariance, weight_decay, **accuracy)
