"""Structured inputs of the ``network`` family: ``x ~ N(0, Sigma)`` with any covariance spectrum.

``[model.inputs]`` (absent, or ``covariance = "identity"``: isotropic inputs, today's model)
describes ``Sigma`` by its distinct eigenvalues ``rho_b`` (``b = 1..L``) and the fractions
``f_b`` of the ``N`` directions their eigenspaces hold (``sum f_b = 1``):

- ``"spectrum"``: ``eigenvalues`` and ``fractions`` as given;
- ``"power-law"``: ``rho_b`` proportional to ``b^-exponent``, ``f_b = 1/L`` (``blocks = L``),
  scaled so that ``sum f_b rho_b = 1``;
- ``"file"``: ``path`` to a ``.npy`` file holding an ``N x N`` covariance or an ``n x N``
  sample matrix (``n > N``; centred, covariance ``X^T X/(n - 1)``), scaled so that
  ``tr Sigma / N = 1`` (the data standardised to unit mean variance per input); its eigenvalues
  form ``blocks = "all"`` blocks (equal eigenvalues merged), or ``L`` blocks of consecutive
  eigenvalues (sorted), each with the mean of its eigenvalues (the trace is kept).

The teacher: ``t_b = c_b T`` in block ``b`` (``T`` from ``[model.teacher] overlaps``), with
``c_b = 1`` (a teacher isotropic in ``Sigma``'s eigenbasis), ``teacher_scales = [c_1..c_L]``,
or ``source_exponent = s``: ``c_b`` proportional to ``rho_b^s``, normalised so that the
teacher's field covariance ``sum f_b rho_b t_b`` is ``(sum f_b rho_b) T``.

The state is the per-block densities ``q_b = w P_b w/(N f_b)``, ``r_b = w P_b w*/(N f_b)``
(labels ``Q{i}.{k}@{b}``, ``R{i}.{n}@{b}``, block by block), then a trained ``v``; the local
fields' covariance is ``C = sum_b f_b rho_b [[q_b, r_b], [r_b^T, t_b]]``
(:meth:`StructuredInputs.field_covariance`). :class:`StructuredInputs` is a data law of
:mod:`.laws` (one centred component of covariance ``C``). SGD draws ``x = Sigma^{1/2} g`` in
the standard basis: block ``b`` owns a run of consecutive coordinates (:meth:`layout`), on
which ``Sigma`` is ``rho_b``.
"""

import dataclasses
import functools
import hashlib
import math
import os

import numpy as np

from hierarchy.config import fields
from hierarchy.core.errors import HierarchyError
from hierarchy.core.resources import format_gib, memory_budget_bytes
from hierarchy.models.network.laws import Component

COVARIANCES = ("identity", "spectrum", "power-law", "file")
KEYS = ("covariance", "eigenvalues", "fractions", "exponent", "blocks", "path",
        "teacher_scales", "source_exponent", "sha256")
DEFAULTS = {"covariance": "identity", "eigenvalues": [], "fractions": [], "exponent": 1.0,
            "blocks": "", "path": "", "teacher_scales": [], "source_exponent": 0.0,
            "sha256": ""}
#: which keys each covariance reads (the others must keep their defaults)
READS = {"identity": (), "spectrum": ("eigenvalues", "fractions"),
         "power-law": ("exponent", "blocks"), "file": ("path", "blocks", "sha256")}
#: most blocks (the state has ``L (K(K+1)/2 + K M)`` entries)
MAX_BLOCKS = 100_000
#: largest dimension of a covariance file (its eigendecomposition is ``O(N^3)``)
MAX_FILE_DIMENSION = 4096
#: largest magnitude of an eigenvalue, an exponent or a teacher scale
MAX_VALUE = 1e6
MAX_EXPONENT = 20.0
#: ``|sum f_b - 1|`` allowed
FRACTION_TOL = 1e-12
#: eigenvalues of a covariance file below ``-INDEFINITE * max`` make it indefinite; those
#: within ``INDEFINITE * max`` of 0 are 0
INDEFINITE = 1e-10
#: asymmetry ``max|S - S^T|`` allowed in a covariance file, relative to ``max|S|``
ASYMMETRY = 1e-10

KEY_HELP = {
    "model.inputs.covariance": ("The input covariance Sigma: `identity` (x ~ N(0, I_N), the "
                                "isotropic model), `spectrum` (distinct eigenvalues and their "
                                "fractions), `power-law` (rho_b ~ b^-exponent, f_b = 1/L, "
                                "sum f_b rho_b = 1) or `file` (a .npy covariance or sample "
                                "matrix). Not with `model.data = \"mixture\"`.",
                                " | ".join(COVARIANCES)),
    "model.inputs.eigenvalues": ("`spectrum`: the distinct eigenvalues rho_b of Sigma.",
                                 f"list of L <= {MAX_BLOCKS} numbers in (0, {MAX_VALUE:g}]"),
    "model.inputs.fractions": ("`spectrum`: the fraction f_b of the N directions in each "
                               "eigenspace.", f"L positive numbers summing to 1 (within "
                               f"{FRACTION_TOL:g})"),
    "model.inputs.exponent": ("`power-law`: the exponent a of rho_b ~ b^-a.",
                              f"number in [0, {MAX_EXPONENT:g}]"),
    "model.inputs.blocks": ("`power-law`: the number L of blocks; `file`: L blocks of "
                            "consecutive eigenvalues (each with their mean), or `all` (one "
                            "block per distinct eigenvalue: values within 1e-9 of the "
                            "largest are one). `\"\"`: 1 block for `power-law`; with `file` "
                            "it must be given (1 block would be x ~ N(0, I)).",
                            f'integer in 1..{MAX_BLOCKS} (`file`: also "all")'),
    "model.inputs.sha256": ("`file`: the sha256 of the file's bytes, recorded by the package "
                            "(`result.json`'s config), so that `--resume` and a study's jobs "
                            "never take another file at the same path for it; given, it must "
                            "match.", "\"\" or the file's sha256"),
    "model.inputs.path": ("`file`: a .npy file (relative to the working directory) holding "
                          "an N x N symmetric positive semi-definite covariance or an n x N "
                          "sample matrix with n > N; scaled to tr Sigma / N = 1.",
                          f"path of a regular file, N <= {MAX_FILE_DIMENSION}"),
    "model.inputs.teacher_scales": ("The teacher per block: t_b = c_b T (labels of the start "
                                    "and of result.npz per block); `[]`: c_b = 1, or from "
                                    "`source_exponent`.",
                                    f"[] or L numbers in [0, {MAX_VALUE:g}]"),
    "model.inputs.source_exponent": ("The source exponent s: c_b ~ rho_b^s, normalised so "
                                     "that sum f_b rho_b c_b = sum f_b rho_b (0: a teacher "
                                     "isotropic in Sigma's eigenbasis); the scales it "
                                     f"gives must be at most {MAX_VALUE:g}, as teacher_scales.",
                                     f"number in [-{MAX_EXPONENT:g}, {MAX_EXPONENT:g}]"),
}


@functools.lru_cache(maxsize=16)
def block_labels(K, M, trained, L):
    """``Q{i}.{k}@{b}`` (``i <= k``) and ``R{i}.{n}@{b}`` block by block, then ``v{i}``."""
    q = [f"Q{i}.{k}" for i in range(1, K + 1) for k in range(i, K + 1)]
    r = [f"R{i}.{n}" for i in range(1, K + 1) for n in range(1, M + 1)]
    labels = [f"{name}@{b}" for b in range(1, L + 1) for name in q + r]
    labels += [f"v{i}" for i in range(1, K + 1)] if trained else []
    return tuple(labels)


@dataclasses.dataclass(frozen=True, eq=False)
class StructuredInputs:
    """``Sigma``'s spectrum and the teacher per block (see the module docstring).

    Parameters
    ----------
    covariance : str
        How it was given (``spectrum``, ``power-law``, ``file``).
    eigenvalues, fractions, teacher_scales : numpy.ndarray, shape (L,)
        ``rho_b``, ``f_b`` and ``c_b``.
    """

    covariance: str
    eigenvalues: np.ndarray
    fractions: np.ndarray
    teacher_scales: np.ndarray

    @property
    def blocks(self):
        """``L``."""
        return len(self.eigenvalues)

    @property
    def weights(self):
        """``f_b rho_b``: block ``b``'s share of the local fields' covariance."""
        return self.fractions * self.eigenvalues

    @property
    def trace(self):
        """``tr Sigma / N = sum f_b rho_b``."""
        return float(np.sum(self.weights))

    def labels(self, K, M, trained):
        """The state labels (:func:`block_labels`)."""
        return block_labels(K, M, bool(trained), self.blocks)

    # ------------------------------------------------------------------ the state, per block
    @staticmethod
    def per_block(K, M):
        """``K(K+1)/2 + K M``: the entries of one block."""
        return K * (K + 1) // 2 + K * M

    def block_state(self, net, u):
        """``(L, K(K+1)/2 + K M)``: the blocks of ``u`` (a view), ``Q`` (``i <= k``) then ``R``."""
        s = self.per_block(net.K, net.M)
        return np.asarray(u, dtype=float)[:self.blocks * s].reshape(self.blocks, s)

    def block_matrices(self, net, u):
        """``(q (L, K, K), r (L, K, M))`` of the state ``u``."""
        K, M = net.K, net.M
        blocks = self.block_state(net, u)
        iu = np.triu_indices(K)
        q = np.zeros((self.blocks, K, K))
        q[:, iu[0], iu[1]] = blocks[:, :len(iu[0])]
        q[:, iu[1], iu[0]] = blocks[:, :len(iu[0])]
        return q, blocks[:, len(iu[0]):].reshape(self.blocks, K, M)

    def block_grams(self, net, u):
        """``(L, K + M, K + M)``: ``[[q_b, r_b], [r_b^T, t_b]]`` of every block."""
        q, r = self.block_matrices(net, u)
        t = self.teacher_scales[:, None, None] * net.overlap_matrix[None]
        return np.concatenate([np.concatenate([q, r], axis=2),
                               np.concatenate([np.swapaxes(r, 1, 2), t], axis=2)], axis=1)

    def field_covariance(self, net, u):
        """``C = sum_b f_b rho_b [[q_b, r_b], [r_b^T, t_b]]`` (one matrix product over blocks)."""
        K, M = net.K, net.M
        summed = self.weights @ self.block_state(net, u)                    # (s,)
        iu = np.triu_indices(K)
        q = np.zeros((K, K))
        q[iu] = summed[:len(iu[0])]
        q = q + np.triu(q, 1).T
        r = summed[len(iu[0]):].reshape(K, M)
        t = float(self.weights @ self.teacher_scales) * net.overlap_matrix
        return np.block([[q, r], [r.T, t]])

    # ------------------------------------------------------------------ the data law
    def components(self, net, u):
        """One centred component of covariance :meth:`field_covariance` (``E|x|^2/N`` in
        the corrector is per block, ``rho_b``: the structured field applies it)."""
        return [Component(1.0, np.zeros(net.K + net.M), self.field_covariance(net, u))]

    def time_factor(self, step):
        """1: the clock is ``alpha = steps/N``."""
        return 1.0

    # ------------------------------------------------------------------ SGD
    def layout(self, dimension):
        """``(L + 1,)`` block boundaries in ``0..N``: block ``b`` owns the coordinates
        ``bounds[b]..bounds[b+1]``, ``round(f_b N)`` of them by largest remainders."""
        exact = self.fractions * int(dimension)
        counts = np.floor(exact).astype(np.int64)
        short = int(dimension) - int(counts.sum())
        if short > 0:
            counts[np.argsort(counts - exact, kind="stable")[:short]] += 1
        return np.concatenate([[0], np.cumsum(counts)])

    def input_scale(self, dimension):
        """``(N,)``: ``sqrt(rho_b)`` on block ``b``'s coordinates, so ``x = scale * g``."""
        counts = np.diff(self.layout(dimension))
        return np.repeat(np.sqrt(self.eigenvalues), counts)

    def check_dimension(self, net, dimension, field="sgd.dimension"):
        """Refuse an ``N`` that gives some block fewer than ``K + M`` coordinates."""
        counts = np.diff(self.layout(dimension))
        need = net.K + net.M
        if counts.min() < need:
            b = int(np.argmin(counts))
            raise HierarchyError(f"{field} = {dimension} gives block {b + 1} of model.inputs "
                                 f"(f = {self.fractions[b]:.3g}) {counts[b]} coordinates; every "
                                 f"block needs at least K + M = {need} (N >= "
                                 f"{math.ceil(need / self.fractions.min())})", field=field)


# ------------------------------------------------------------------------- the config

def inputs_from_config(config):
    """The :class:`StructuredInputs` of ``[model.inputs]``, or None for isotropic inputs.

    Parameters
    ----------
    config : dict
        A merged config (``[model.inputs]``, ``[model] data``).

    Raises
    ------
    HierarchyError
        One line naming the first bad key, before any expensive work (a covariance file's
        header is read before its data).
    """
    model = config.get("model", {})
    given = model.get("inputs", {})
    fields.check_is_table(given, "model.inputs")
    for key in given:
        if key not in KEYS:
            raise HierarchyError(f"unknown config key model.inputs.{key}"
                                 f"{fields.nearest(key, KEYS)}; allowed in [model.inputs]: "
                                 f"{', '.join(KEYS)}", field=f"model.inputs.{key}")
    table = {**DEFAULTS, **given}
    kind = fields.choice(table, "model.inputs", "covariance", COVARIANCES)
    for key in KEYS[1:]:
        if key in READS[kind] or key in ("teacher_scales", "source_exponent"):
            continue
        if table[key] != DEFAULTS[key]:
            raise HierarchyError(f"model.inputs.{key} is not read with covariance = "
                                 f"{kind!r} (it reads: {', '.join(READS[kind]) or 'nothing'})",
                                 field=f"model.inputs.{key}")
    if kind == "identity":
        for key in ("teacher_scales", "source_exponent"):
            if table[key] != DEFAULTS[key]:
                raise HierarchyError(f"model.inputs.{key} needs a structured covariance "
                                     f"(spectrum | power-law | file); covariance is "
                                     f'"identity"', field=f"model.inputs.{key}")
        return None
    if model.get("data", "teacher") != "teacher":
        raise HierarchyError('model.inputs: a structured covariance is for model.data = '
                             '"teacher"; mixtures have their own [model.mixture]',
                             field="model.inputs.covariance")
    if kind == "file" and table["blocks"] == "":
        # the default of 1 block would silently replace the file's covariance by x ~ N(0, I)
        raise HierarchyError('model.inputs.blocks must be given with covariance = "file": '
                             '"all" (one block per distinct eigenvalue) or L (L blocks of '
                             'consecutive eigenvalues); 1 block would be x ~ N(0, I)',
                             field="model.inputs.blocks")
    rho, f = {"spectrum": _spectrum, "power-law": _power_law, "file": _file}[kind](table)
    if kind == "file":
        given["sha256"] = _content_digest(table)
    scales = _teacher_scales(table, rho, f)
    return StructuredInputs(covariance=kind, eigenvalues=rho, fractions=f,
                            teacher_scales=scales)


def _spectrum(table):
    rho = _numbers(table, "eigenvalues", "numbers in (0, %g]" % MAX_VALUE)
    if not np.all((rho > 0) & (rho <= MAX_VALUE)):
        raise HierarchyError(f"model.inputs.eigenvalues must be numbers in (0, {MAX_VALUE:g}]; "
                             f"got {fields.show(table['eigenvalues'])}",
                             field="model.inputs.eigenvalues")
    f = _numbers(table, "fractions", "positive numbers summing to 1")
    if len(f) != len(rho) or not np.all(f > 0):
        raise HierarchyError(f"model.inputs.fractions must be {len(rho)} positive numbers "
                             f"(one per eigenvalue) summing to 1; got "
                             f"{fields.show(table['fractions'])}", field="model.inputs.fractions")
    total = math.fsum(f.tolist())
    if abs(total - 1.0) > FRACTION_TOL:
        raise HierarchyError(f"model.inputs.fractions must sum to 1 (within {FRACTION_TOL:g}); "
                             f"they sum to {total:.17g}", field="model.inputs.fractions")
    return rho, f


def _numbers(table, key, allowed):
    field = f"model.inputs.{key}"
    values = table[key]
    if (not isinstance(values, (list, tuple)) or not 1 <= len(values) <= MAX_BLOCKS
            or not all(fields.is_real(v) for v in values)):
        size = len(values) if isinstance(values, (list, tuple)) else None
        detail = (f"{size} entries" if size is not None and size > MAX_BLOCKS
                  else fields.show(values))
        raise HierarchyError(f"{field} must be a list of 1..{MAX_BLOCKS} {allowed}; got "
                             f"{detail}", field=field)
    return np.array(values, dtype=float)


def _power_law(table):
    exponent = fields.real(table, "model.inputs", "exponent", 0.0, False, MAX_EXPONENT)
    L = 1 if table["blocks"] == "" else fields.integer(table, "model.inputs", "blocks", 1,
                                                       MAX_BLOCKS)
    rho = np.arange(1, L + 1, dtype=float) ** -exponent
    f = np.full(L, 1.0 / L)
    return rho / float(f @ rho), f


#: copies of a covariance file's array while it is read (the array, scaled, centred)
FILE_COPIES = 3


def _content_digest(table):
    """The sha256 of the covariance file's bytes, recorded in the config as
    ``model.inputs.sha256``: a config names its file by a path, so without it ``--resume``
    (and a study's job hash) took another file at the same path, or the same path from
    another working folder, for the one the stored results were computed with. A config that
    gives ``sha256`` (one written by the package into ``result.json``) must match."""
    digest = hashlib.sha256()
    with open(table["path"], "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    found = digest.hexdigest()
    if table["sha256"] not in ("", found):
        raise HierarchyError(f"model.inputs.sha256: the file {table['path']!r} is not the one "
                             f"the config records (its sha256 is {found[:12]}..., the config "
                             f"says {str(table['sha256'])[:12]}...)", field="model.inputs.sha256")
    return found


def _file(table):
    field = "model.inputs.path"
    path = fields.string(table, "model.inputs", "path")
    if not path:
        raise HierarchyError(f'{field} must name a .npy file (covariance = "file")', field=field)
    if not os.path.isfile(path):
        raise HierarchyError(f"{field}: {path!r} is not a regular file", field=field)
    try:
        header = np.load(path, mmap_mode="r", allow_pickle=False)
        if not isinstance(header, np.ndarray):  # an .npz archive
            raise ValueError("an archive of arrays (.npz), not one array")
        shape, dtype = header.shape, header.dtype
    except (OSError, ValueError) as error:
        raise HierarchyError(f"{field}: {path!r} is not a readable .npy array "
                             f"({fields.one_line(str(error))})", field=field) from None
    if len(shape) != 2 or not np.issubdtype(dtype, np.number) or np.issubdtype(
            dtype, np.complexfloating):
        raise HierarchyError(f"{field}: {path!r} must hold a real 2-d array (an N x N "
                             f"covariance or an n x N sample matrix); got shape {shape}, "
                             f"{dtype}", field=field)
    rows, N = shape
    if not 1 <= N <= MAX_FILE_DIMENSION:
        raise HierarchyError(f"{field}: the dimension N = {N} must be in "
                             f"1..{MAX_FILE_DIMENSION}", field=field)
    if rows < N:
        raise HierarchyError(f"{field}: a sample matrix needs more rows (samples) than columns "
                             f"(dimensions); got {rows} x {N}", field=field)
    need = FILE_COPIES * 8 * rows * N
    if need > memory_budget_bytes():
        raise HierarchyError(f"{field}: {path!r} holds {rows} x {N} numbers, which need about "
                             f"{format_gib(need)} to read, more than the "
                             f"{format_gib(memory_budget_bytes())} available; give fewer "
                             "samples or their covariance (an N x N file)", field=field)
    data = np.array(header, dtype=float)
    del header
    if not np.all(np.isfinite(data)):
        raise HierarchyError(f"{field}: {path!r} holds NaN or infinite entries", field=field)
    # the file's scale does not matter (tr Sigma / N = 1 below): divided out first, so that
    # its products neither overflow (entries of 1e200) nor underflow (1e-170) to zero
    data = data / max(float(np.max(np.abs(data))), np.finfo(float).tiny)
    if rows == N:
        scale = max(float(np.max(np.abs(data))), np.finfo(float).tiny)
        if float(np.max(np.abs(data - data.T))) > ASYMMETRY * scale:
            raise HierarchyError(f"{field}: a square array is read as a covariance and must be "
                                 "symmetric", field=field)
        sigma = 0.5 * (data + data.T)
    else:
        centred = data - data.mean(axis=0)
        sigma = centred.T @ centred / (rows - 1)
    values = np.linalg.eigvalsh(sigma)[::-1]
    top = float(values[0])
    if top <= 0 or values[-1] < -INDEFINITE * top:
        raise HierarchyError(f"{field}: the covariance must be positive semi-definite and "
                             f"non-zero; its eigenvalues span [{values[-1]:.3g}, {top:.3g}]",
                             field=field)
    values = np.where(values < INDEFINITE * top, 0.0, values)
    values = values / values.mean()                                      # tr Sigma / N = 1
    return _file_blocks(table, values)


#: sorted eigenvalues of a file closer than this (relative to the largest) are one block of
#: ``blocks = "all"``
EQUAL_EIGENVALUES = 1e-9


def _file_blocks(table, values):
    """``(rho, f)`` of the sorted eigenvalues: merged when equal (``"all"``) or in ``L`` runs."""
    N = len(values)
    if table["blocks"] == "all":
        # equal to rounding: a rotated covariance's repeated eigenvalues differ in their last
        # bits (a rotated 40 x 40 of 4 values gave 25 blocks merging only equal bits)
        starts = np.flatnonzero(np.concatenate(
            [[True], values[:-1] - values[1:] > EQUAL_EIGENVALUES * values[0]]))
        counts = np.diff(np.append(starts, N))
        rho = np.array([values[a:a + n].mean() for a, n in zip(starts, counts)])
        return rho, counts / N
    L = fields.integer(table, "model.inputs", "blocks", 1, MAX_BLOCKS)
    if L > N:
        raise HierarchyError(f"model.inputs.blocks = {L} is more than the file's dimension "
                             f"N = {N}", field="model.inputs.blocks")
    groups = np.array_split(values, L)
    return (np.array([g.mean() for g in groups]),
            np.array([len(g) / N for g in groups]))


def _teacher_scales(table, rho, f):
    given, s = table["teacher_scales"], table["source_exponent"]
    if not fields.is_real(s) or abs(s) > MAX_EXPONENT:
        raise HierarchyError(f"model.inputs.source_exponent must be a number in "
                             f"[-{MAX_EXPONENT:g}, {MAX_EXPONENT:g}]; got {fields.show(s)}",
                             field="model.inputs.source_exponent")
    if isinstance(given, (list, tuple)) and not given:
        if s == 0:
            return np.ones(len(rho))
        if s < 0 and np.any(rho == 0):
            raise HierarchyError("model.inputs.source_exponent must be >= 0 when Sigma has a "
                                 "zero eigenvalue (rho^s is infinite there)",
                                 field="model.inputs.source_exponent")
        with np.errstate(over="ignore", invalid="ignore"):
            powered = np.where(rho > 0, rho, 1.0) ** float(s) * (rho > 0)
            scales = powered * float(f @ rho) / float(f @ (rho * powered))
        if not np.all(np.isfinite(scales) & (scales <= MAX_VALUE)):
            raise HierarchyError(f"model.inputs.source_exponent = {s:g} makes the teacher's "
                                 f"scales c_b ~ rho_b^s reach {np.nanmax(scales):.3g} (or "
                                 f"overflow): they must be at most {MAX_VALUE:g}, as "
                                 "teacher_scales; take an exponent nearer 0",
                                 field="model.inputs.source_exponent")
        return scales
    if s != 0:
        raise HierarchyError("model.inputs: give teacher_scales or source_exponent, not both",
                             field="model.inputs.teacher_scales")
    scales = _numbers(table, "teacher_scales", f"numbers in [0, {MAX_VALUE:g}]")
    if len(scales) != len(rho) or not np.all((scales >= 0) & (scales <= MAX_VALUE)):
        raise HierarchyError(f"model.inputs.teacher_scales must be [] or {len(rho)} numbers in "
                             f"[0, {MAX_VALUE:g}] (one per block); got "
                             f"{fields.show(given)}", field="model.inputs.teacher_scales")
    return scales
