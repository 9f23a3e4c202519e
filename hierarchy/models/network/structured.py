"""The ODE of a network on structured inputs ``x ~ N(0, Sigma)``: one block of ``q_b, r_b`` per
distinct eigenvalue of ``Sigma`` (:mod:`.inputs`), for any activation and loss.

The expectations depend on the state only through the local fields' covariance
``C = sum_b f_b rho_b [[q_b, r_b], [r_b^T, t_b]]``, so the isotropic evaluators (term table,
closed forms, compiled kernel, quadrature: :func:`~.field.network_system`) serve unchanged.
What is new is how an update moves each block. The projection ``s = u.P_b x/sqrt(N)`` of a
vector ``u`` on block ``b`` is jointly Gaussian with the fields ``z = (lambda, nu)``, with
``E[s z] = f_b rho_b (u P_b w/(N f_b), u P_b w*/(N f_b))``; Gaussian regression gives
``E[s F(z)] = E[s z]^T C^+ E[z F(z)]`` for any ``F`` (``E[z F(z)]`` lies in the range of
``C``, so the pseudo-inverse is exact also for a singular ``C``, e.g. at ``w = 0``). With
``B = E[z (dl/dlambda)^T]`` (``(K + M) x K``) and ``A = C^+ B``:

    dq_b/dalpha = -eta rho_b (X_b A + A^T X_b^T) + eta^2 rho_b E[dl/dlambda dl/dlambda^T]
                  - 2 eta ridge q_b,
    dr_b/dalpha = -eta rho_b A^T [r_b; t_b] - eta ridge r_b,       X_b = [q_b, r_b],

and a trained ``v`` moves as in the isotropic model at ``C``. One block with ``rho = 1`` is
the isotropic ODE (``[q, r] C^+ B`` is the ``lambda`` rows of ``B``).

``B`` comes from the isotropic evaluator of an *augmented* network: the teacher gets ``K``
extra units with output weight 0 whose fields are copies of the student's (``nu_{M+k} =
lambda_k``, covariance ``[[Q, R, Q], [R^T, T, R^T], [Q, R, Q]]``); their ``R`` drifts are
``-eta E[dl/dlambda_i lambda_k]``, the full matrix that the symmetric ``Q`` drift does not
give. A loss without a term table (logistic, cross-entropy, expressions) needs no copies:
the compiled joint engine (:class:`~.joint_field.JointField`) integrates ``E[d_i lambda_k]``
and ``E[d_i nu_m]`` in full at ``C`` itself (``K + M`` fields, not ``2 K + M``), so it stays
within the engine's four fields (``K = M = 2`` without label noise), and certified. The
per-block update is linear in the block state given ``A``: it is one matrix product
``(L, s) @ (s, s)`` over all blocks (:meth:`StructuredSystem.block_map`), never Python per
block.

**Near-singular ``C``.** ``A = C^+ B`` along an eigenvector ``v`` of ``C`` (eigenvalue ``e``)
is ``v (v.B) / e``, and ``v.B = e E[d/dv dl/dlambda]`` by Stein's lemma: a ratio of two
vanishing numbers, whose weight in a block, ``X_b v``, vanishes only like ``sqrt(e)``. A
pseudo-inverse cut-off (``1e-12`` of the largest eigenvalue) dropped it below and amplified
the evaluator's rounding by ``1/e`` above: where two students' fields nearly coincide in
``C`` but not block by block, the field jumped by ``5e-5`` at the cut-off and was noisy at
``1e-4`` above it, under a stated error of 0 (closed forms). Now an eigenvector whose
eigenvalue is at most :data:`NULL_VARIANCE` of the largest, both in the fields' own units
(the correlation matrix: a field of tiny variance is not nearly dependent), takes ``v.B / e``
from ``B`` at ``C`` lifted along ``v`` (:meth:`StructuredSystem.null_terms`): ``h(x) = v.B(C + x v v^T) /
(e + x)`` at ``x = delta, 2 delta, 3 delta`` (``delta`` = :data:`LIFT` of the largest
eigenvalue), extrapolated to ``x = 0`` by the quadratic through them, with their second
difference (plus their quadrature errors) as its stated error. Stein's lemma holds at every
lift, so ``h`` is smooth in ``x`` and the term is continuous in ``C``, exact as ``e -> 0``.
"""

import dataclasses

import numpy as np
from scipy import sparse

from hierarchy.core.errors import HierarchyError
from hierarchy.models.network.derivation import needs_full_quadrature
from hierarchy.models.network.field import EngineTarget, joint_applies, network_system

#: an eigenvector of ``C`` whose eigenvalue is at most this fraction of the largest takes its
#: term of ``A`` from ``B`` at lifted covariances (the module docstring): above it the
#: regression amplifies the evaluator's error by at most ``|X_b v| / e <= sqrt(rho_b / e)``,
#: about ``1e4``; below it the term's weight ``|X_b v|`` is at most about ``1e-4``
NULL_VARIANCE = 1e-8
#: the lifts' step ``delta``, in units of the largest eigenvalue of ``C``
LIFT = 1e-4
#: a near-null ``v`` with ``max_b |G_b v|`` at most this fraction of ``max |G_b|`` (the block
#: grams ``[[q_b, r_b], [r_b^T, t_b]]``) multiplies nothing: its term is skipped (at ``w = 0``
#: it is 0 exactly; rounding leaves ``1e-17``)
UNREACHED = 1e-14


def augmented_network(net):
    """``net`` on isotropic inputs with ``K`` extra teacher units of output weight 0 (see the
    module docstring); its state is never integrated, only evaluated at a covariance."""
    K, M = net.K, net.M
    return dataclasses.replace(
        net, inputs=None, M=M + K, teacher_second_layer=tuple(net.teacher_second_layer)
        + (0.0,) * K, overlaps=tuple(tuple(float(i == j) for j in range(M + K))
                                     for i in range(M + K)))


def augmented_covariance(c, K):
    """``[[Q, R, Q], [R^T, T, R^T], [Q, R, Q]]`` of ``C = [[Q, R], [R^T, T]]``."""
    rows = np.concatenate([c, c[:K]], axis=0)
    return np.concatenate([rows, rows[:, :K]], axis=1)


def spectral_split(c):
    """``C``'s eigendecomposition in the fields' own units, split at :data:`NULL_VARIANCE`.

    The eigenvectors are those of the correlation matrix ``R = S^-1 C S^-1`` (``S`` the
    fields' standard deviations, 1 where a variance is not positive), so that a field of
    tiny variance beside fields of variance 1 (a dead unit decaying under a ridge) is not a
    near-null direction: only fields that are nearly *dependent* are. (Split in absolute
    units, such a field was lifted by ``1e-4`` of the largest variance, which for a relu
    student changes its correlations by O(1): the field was off by ``6e-3`` under a stated
    ``3e-13``.) Returns ``(vectors, values, null, variances, scale)``: the columns of
    ``vectors`` and ``null`` are ``S^-1 v`` for the kept and the near-null eigenvectors ``v``
    of ``R``, ``values`` and ``variances`` (clipped at 0) their eigenvalues, ``scale`` is
    ``S``; ``C^+ B = vectors @ ((vectors^T B) / values)`` on the kept part, in that order:
    the explicit inverse rounded every entry of ``A`` by ``eps / e`` (``1e-8`` at
    ``e = 5e-8``), which the blocks' ``[r_b; t_b]`` did not cancel; in the eigenbasis that
    rounding stays along ``v``, where the blocks weigh it by ``X_b v``. NaN eigenvectors for
    a ``C`` that is not finite (a rejected trial step, which the integrator must see).
    """
    n = len(c)
    if not np.all(np.isfinite(c)):
        return np.full((n, 1), np.nan), np.ones(1), np.zeros((n, 0)), np.zeros(0), np.ones(n)
    diagonal = np.diag(c)
    scale = np.sqrt(np.where(diagonal > 0, diagonal, 1.0))
    values, vectors = np.linalg.eigh(0.5 * (c + c.T) / np.outer(scale, scale))
    top = max(float(values[-1]), 0.0)
    kept = values > NULL_VARIANCE * top
    vectors = vectors / scale[:, None]
    return vectors[:, kept], values[kept], vectors[:, ~kept], np.maximum(values[~kept], 0.0), \
        scale


@dataclasses.dataclass(frozen=True)
class Expectations:
    """What the blocks need from the evaluator at ``C``.

    ``eta_b``: ``eta B = eta E[z dl/dlambda^T]`` (``(K + M, K)``); ``corrector``: ``eta^2
    E[dl/dlambda dl/dlambda^T]`` (``(K, K)``); ``v_drift``: the trained ``v``'s drift (no
    ridge); ``eg``: the risk; ``covariance``: ``C``.
    """

    eta_b: np.ndarray
    corrector: np.ndarray
    v_drift: np.ndarray
    eg: float
    covariance: np.ndarray
    #: ``A``'s terms along the near-null eigenvectors of ``C`` (``(K + M, K)``, 0 when none;
    #: :meth:`StructuredSystem.null_terms`)
    null_part: np.ndarray = None


def direct_moments(net, engine):
    """The :class:`~.joint_field.JointField` of ``net`` on isotropic inputs when it gives the
    blocks' moments directly (no term table, the joint engine applies), else None (the
    augmented network's evaluator serves)."""
    iso = dataclasses.replace(net, inputs=None)
    if engine == "quadrature" or not needs_full_quadrature(iso):
        return None
    if engine == "joint" or joint_applies(iso):
        from hierarchy.models.network.joint_field import JointField
        return JointField(iso)
    return None


class StructuredSystem(EngineTarget):
    """The per-block ODE (:class:`~hierarchy.ode.system.System`; see the module docstring).

    Parameters
    ----------
    net : hierarchy.models.network.model.Network
        With ``net.inputs`` a :class:`~.inputs.StructuredInputs`.
    engine : str
        The isotropic evaluator's engine (:func:`~.field.network_system`).
    """

    def __init__(self, net, engine="auto"):
        if net.inputs is None:
            raise HierarchyError("the structured field needs model.inputs with a structured "
                                 "covariance", field="model.inputs.covariance")
        self.net = net
        self.inputs = net.inputs
        self.augmented = augmented_network(net)
        self.direct = direct_moments(net, engine)
        self.evaluator = (self.direct if self.direct is not None
                          else network_system(self.augmented, engine).evaluator)
        self.labels = list(net.labels)
        self.n = len(self.labels)
        self._positions = {label: j for j, label in enumerate(self.labels)}
        K, M = net.K, net.M
        self.per_block = self.inputs.per_block(K, M)
        self._aug_n = len(self.augmented.labels)
        self._aug_index = {label: j for j, label in enumerate(self.augmented.labels)}
        self._r_rows = np.array([[self._aug_index[f"R{i + 1}.{m + 1}"] for m in range(M + K)]
                                 for i in range(K)])
        self._q_rows = np.array([[self._aug_index[f"Q{min(i, k) + 1}.{max(i, k) + 1}"]
                                  for k in range(K)] for i in range(K)])
        self._v_rows = np.array([self._aug_index[f"v{i + 1}"] for i in range(K)]
                                if net.trained_second_layer else [], dtype=np.int64)
        self.factor = 1.0
        self._last_split = None

    @property
    def engine(self):
        return f"{self.evaluator.engine} (structured, {self.inputs.blocks} blocks)"

    def index(self, label):
        """Position of ``label`` (``Q{k}.{i}@{b}`` with ``k > i`` is ``Q{i}.{k}@{b}``)."""
        name, at, block = label.partition("@")
        if name.startswith("Q") and "." in name:
            i, _, k = name[1:].partition(".")
            if i.isdigit() and k.isdigit() and int(i) > int(k):
                label = f"Q{k}.{i}{at}{block}"
        if label not in self._positions:
            raise HierarchyError(f"{label!r} is not a label of this network; labels: "
                                 f"{self.labels[0]} .. {self.labels[-1]}", field="label")
        return self._positions[label]

    # ------------------------------------------------------------------ expectations at C
    def expectations(self, u):
        """The :class:`Expectations` at state ``u``, with their :attr:`~Expectations.null_part`."""
        u = np.asarray(u, dtype=float)
        c = self.inputs.field_covariance(self.net, u)
        v = self._second_layer(u)
        out = self._expectations_at(c, v)
        terms = [(vector, value) for vector, value, _ in self.null_terms(u, c, v)]
        null_part = sum((np.outer(vector, value) for vector, value in terms),
                        np.zeros_like(out.eta_b))
        return dataclasses.replace(out, null_part=null_part)

    def _second_layer(self, u):
        net = self.net
        return u[self.n - net.K:] if net.trained_second_layer else np.array(net.second_layer,
                                                                            float)

    def _expectations_at(self, c, v):
        """The :class:`Expectations` at the covariance ``c`` (no null part)."""
        K, M = self.net.K, self.net.M
        if self.direct is not None:
            return self._direct_expectations(self.direct.moments_at(c, v)[0], c)
        out = self.evaluator.outputs_at(augmented_covariance(c, K), v)
        drift_r = out[self._r_rows]                       # -eta E[dl_i zeta_j], zeta = (nu, lambda)
        eta_b = -np.concatenate([drift_r[:, M:], drift_r[:, :M]], axis=1).T   # (K + M, K)
        corrector = out[self._aug_n + self._q_rows]
        return Expectations(eta_b=eta_b, corrector=corrector, v_drift=out[self._v_rows],
                            eg=float(out[2 * self._aug_n]), covariance=c)

    def _eta_b_error_at(self, c, v):
        """The evaluator's error bound on ``eta B`` at ``c``, ``(K + M, K)`` (its layout)."""
        K, M = self.net.K, self.net.M
        if self.direct is not None:
            return np.abs(self._direct_expectations(self.direct.moments_at(c, v)[1], c).eta_b)
        error = self.evaluator.quadrature_error_at(augmented_covariance(c, K), v)[self._r_rows]
        return np.concatenate([error[:, M:], error[:, :M]], axis=1).T

    def split(self, c):
        """:func:`spectral_split` of ``c``; the last one is kept (a call's field, its block map
        and its stated error share one eigendecomposition)."""
        key = (np.asarray(c, dtype=float).tobytes(), NULL_VARIANCE)
        if self._last_split is None or self._last_split[0] != key:
            self._last_split = (key, spectral_split(c))
        return self._last_split[1]

    def null_terms(self, u, c, v, errors=False):
        """``A``'s terms along the near-null eigenvectors of ``C`` (the module docstring):
        ``[(v, value (K,), error (K,) or None)]``, ``A = C_kept^+ eta_B + sum v value^T``.

        In the fields' own units (:func:`spectral_split`: ``v`` an eigenvector of the
        correlation matrix, ``e`` its eigenvalue, ``S`` the standard deviations), ``value``
        extrapolates ``h(x) = (S^-1 v).eta_B(C + x (S v)(S v)^T) / (e + x)`` from ``x = delta,
        2 delta, 3 delta`` (``delta`` = :data:`LIFT` of the largest eigenvalue) to 0
        (``3 h_1 - 3 h_2 + h_3``), and the term is ``S^-1 v value^T``; ``errors``: also its
        bound, the second difference ``|h_1 - 2 h_2 + h_3|`` plus ``7`` times the lifts'
        quadrature errors over ``e + delta``. An eigenvector that no block reaches
        (:data:`UNREACHED`) has none.
        """
        _, values, null, variances, scale = self.split(c)
        if null.shape[1] == 0:
            return []
        grams = self.inputs.block_grams(self.net, u)
        size = float(np.max(np.abs(grams), initial=0.0))
        delta = LIFT * float(np.max(values, initial=0.0))
        if not delta > 0:
            return []
        terms = []
        for vector, variance in zip(null.T, variances):
            if not np.max(np.abs(grams @ vector), initial=0.0) > UNREACHED * size:
                continue
            lifted = scale ** 2 * vector   # S v: the lift along v in the fields' units
            lifts = [c + q * delta * np.outer(lifted, lifted) for q in (1, 2, 3)]
            h = [vector @ self._expectations_at(lift, v).eta_b / (variance + q * delta)
                 for q, lift in zip((1, 2, 3), lifts)]
            error = None
            if errors:
                quadrature = np.max([np.abs(vector) @ self._eta_b_error_at(lift, v)
                                     for lift in lifts], axis=0)
                error = np.abs(h[0] - 2 * h[1] + h[2]) + 7 * quadrature / (variance + delta)
            terms.append((vector, 3 * h[0] - 3 * h[1] + h[2], error))
        return terms

    def _direct_expectations(self, moments, c):
        """The :class:`Expectations` from the joint engine's moments (``b[i, k] = E[d_i
        lambda_k]``, ``a[i, m] = E[d_i nu_m]``; the map :func:`~.moments.assemble` applies to
        isotropic data, with ``E|x|^2/N`` of the whitened fields 1)."""
        net = self.net
        eta_b = net.step * np.concatenate([moments["b"][0].T, moments["a"][0].T], axis=0)
        v_drift = (-net.step_second_layer * moments["dv"][0] if net.trained_second_layer
                   else np.zeros(0))
        return Expectations(eta_b=eta_b, corrector=net.step ** 2 * moments["c"][0],
                            v_drift=v_drift,
                            eg=float(moments["loss"][0]), covariance=c)

    def block_map(self, expectations):
        """``(W (s, s), h (s,), g (s,))``: a block's drift is ``rho_b (x_b W + c_b h + g)``.

        ``x_b`` is the block's state row (``Q`` with ``i <= k``, then ``R``), ``c_b`` its
        teacher scale; ``W`` the linear map ``X_b -> -(X_b A + A^T X_b^T), -A_q^T r_b``,
        ``h`` the teacher part ``-A_nu^T T`` of ``dr_b``, ``g`` the corrector on ``Q``.
        """
        K, M = self.net.K, self.net.M
        vectors, values, _, _, _ = self.split(expectations.covariance)
        a = vectors @ ((vectors.T @ expectations.eta_b) / values[:, None])       # (K + M, K)
        if expectations.null_part is not None:
            a = a + expectations.null_part
        s = self.per_block
        basis = np.eye(s)
        iu = np.triu_indices(K)
        nq = len(iu[0])
        q = np.zeros((s, K, K))
        q[:, iu[0], iu[1]] = basis[:, :nq]
        q[:, iu[1], iu[0]] = basis[:, :nq]
        r = basis[:, nq:].reshape(s, K, M)
        xa = np.concatenate([q, r], axis=2) @ a                                   # (s, K, K)
        dq = -(xa + np.swapaxes(xa, 1, 2))
        dr = np.swapaxes(a[:K], 0, 1) @ r                                         # (s, K, M)
        W = np.concatenate([dq[:, iu[0], iu[1]], -dr.reshape(s, K * M)], axis=1)
        h = np.concatenate([np.zeros(nq), -(a[K:].T @ self.net.overlap_matrix).reshape(-1)])
        g = np.concatenate([expectations.corrector[iu], np.zeros(K * M)])
        return W, h, g

    def drift_and_corrector(self, u, expectations=None):
        """``(f, g)`` at ``u``, ordered like :attr:`labels` (the ridge is in ``f``)."""
        net, inputs = self.net, self.inputs
        u = np.asarray(u, dtype=float)
        e = self.expectations(u) if expectations is None else expectations
        W, h, g = self.block_map(e)
        blocks = inputs.block_state(net, u)
        rho = inputs.eigenvalues[:, None]
        drift = rho * (blocks @ W + inputs.teacher_scales[:, None] * h[None])
        nq = net.K * (net.K + 1) // 2
        if net.ridge:
            drift[:, :nq] -= 2 * net.step * net.ridge * blocks[:, :nq]
            drift[:, nq:] -= net.step * net.ridge * blocks[:, nq:]
        f = np.zeros(self.n)
        f[:drift.size] = drift.reshape(-1)
        corrector = np.zeros(self.n)
        corrector[:drift.size] = (rho * g[None]).reshape(-1)
        if net.trained_second_layer:
            f[drift.size:] = e.v_drift - net.step_second_layer * net.ridge * u[drift.size:]
        return f, corrector

    def rhs(self, u, t=0.0):
        """``du/dalpha = f + g``."""
        f, g = self.drift_and_corrector(u)
        return f + g

    def jacobian(self, u, t=0.0):
        """The frozen-expectation Jacobian, for the implicit integrators' Newton iterations.

        With the expectations at ``C`` held fixed the field is linear in each block, so its
        Jacobian is block-diagonal, ``rho_b W^T`` (and the ridge) per block: a sparse
        ``(n, n)`` matrix built in one call, never Python per block. The coupling of all blocks
        through ``C`` (the expectations' dependence on the state) is left out; scipy's BDF and
        Radau use the Jacobian only to solve their Newton iterations, so the solution's
        accuracy is still set by their error control. This is what makes stiff spectra (power
        laws with ``L = 10^4``) solvable: a dense Jacobian would need ``n^2`` entries.
        """
        net, inputs = self.net, self.inputs
        W, _, _ = self.block_map(self.expectations(u))
        s, L, K = self.per_block, inputs.blocks, net.K
        nq = K * (K + 1) // 2
        decay = np.concatenate([np.full(nq, 2.0), np.ones(s - nq)]) * net.step * net.ridge
        blocks = inputs.eigenvalues[:, None, None] * W.T[None] - np.diag(decay)[None]
        if getattr(self, "_block_index", None) is None:
            first = np.arange(L)[:, None, None] * s
            self._block_index = ((first + np.arange(s)[None, :, None]).repeat(s, 2).ravel(),
                                 (first + np.arange(s)[None, None, :]).repeat(s, 1).ravel())
        # built from (row, column) pairs: SuperLU solves it ~3x faster than bsr's csc
        matrix = sparse.csc_matrix((blocks.ravel(), self._block_index), shape=(L * s, L * s))
        if net.trained_second_layer:
            v_part = sparse.identity(K, format="csc") * (-net.step_second_layer * net.ridge)
            matrix = sparse.block_diag([matrix, v_part], format="csc")
        return matrix

    def eg(self, u):
        """The population risk at ``u`` (no label noise)."""
        return self.expectations(u).eg

    def fields(self, u):
        """The local fields' covariance ``C`` at ``u`` (``(K + M, K + M)``)."""
        return self.inputs.field_covariance(self.net, u)

    def quadrature_error(self, u):
        """A bound on the quadrature error of ``f + g`` and of ``eg`` at ``u``: ``(rhs, eg)``.

        The evaluator's error ``dB`` of ``eta B`` moves ``A`` by ``C_kept^+ dB``, so a block's
        drift (``-(X_b A + A^T X_b^T)``, ``-A^T [r_b; t_b]``) by at most ``rho_b 3 sum_k |G_b
        v_k| |v_k.dB| / e_k`` over the kept eigenvectors (``G_b`` the block's gram), plus
        ``rho_b 3 sum_v |G_b v| |error_v|`` over the near-null ones
        (:meth:`null_terms`), plus ``rho_b`` times the corrector's error; 0 where everything
        is closed form and ``C`` has no near-null direction that a block reaches.
        """
        net, K = self.net, self.net.K
        u = np.asarray(u, dtype=float)
        c = self.inputs.field_covariance(net, u)
        v = self._second_layer(u)
        if self.direct is not None:
            bounds = self._direct_expectations(self.direct.moments_at(c, v)[1], c)
            eg_error, error_g, error_v = bounds.eg, np.abs(bounds.corrector), \
                np.abs(bounds.v_drift)
        else:
            error = self.evaluator.quadrature_error_at(augmented_covariance(c, K), v)
            eg_error = float(error[2 * self._aug_n])
            error_g, error_v = error[self._aug_n + self._q_rows], error[self._v_rows]
        error_b = self._eta_b_error_at(c, v)
        terms = self.null_terms(u, c, v, errors=True)
        if not (np.any(error_b) or np.any(error_g) or np.any(error_v) or terms):
            return np.zeros(self.n), eg_error
        grams = self.inputs.block_grams(net, u)
        vectors, values, _, _, _ = self.split(c)
        moved = np.linalg.norm(np.abs(vectors).T @ error_b, axis=1) / values
        reach = np.linalg.norm(grams @ vectors, axis=1)                       # (L, kept)
        amplified = reach @ moved
        for vector, _, term_error in terms:
            amplified = amplified + np.linalg.norm(grams @ vector, axis=1) * \
                np.linalg.norm(term_error)
        bound = self.inputs.eigenvalues * (3 * amplified + float(np.max(error_g, initial=0.0)))
        out = np.zeros(self.n)
        out[:len(bound) * self.per_block] = np.repeat(bound, self.per_block)
        if net.trained_second_layer:
            out[-K:] = error_v
        return out, eg_error


def structured_system(net, engine="auto"):
    """The :class:`StructuredSystem` of a network with structured inputs."""
    return StructuredSystem(net, engine)


def system_of(net, engine="auto"):
    """The ODE of any teacher or mixture network: :func:`~.field.network_system` for
    isotropic inputs and mixtures, :class:`StructuredSystem` for structured inputs."""
    return network_system(net, engine) if net.inputs is None else StructuredSystem(net, engine)
