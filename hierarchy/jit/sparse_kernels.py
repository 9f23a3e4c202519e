"""Render a truncated field ``dμ = Σ_c κ_c A_c μ`` as a Cython kernel module.

Two kernel forms, chosen by size (``kernel="auto"``):

``"unrolled"``
    One C statement per state row (and per Jacobian entry) with the operator entries as
    literals. Fastest for small systems, but the C source (and the compile time) grows with
    the number of entries, so it is used only up to :data:`UNROLL_LIMIT` entries.
``"table"``
    A fixed loop over compact integer tables. The tables are *not* in the C source: they are
    stored as ``.npy`` sidecar files next to the module and handed to it by :func:`attach`
    at load time, so the generated source — and the compile time — does not depend on the
    size of the system.

Table layout (one fused pass over the rows, entries sorted by row then column)::

    row_ptr[i] .. row_ptr[i+1]   the entries of row i (all coefficients together)
    cols[j]                      column of entry j (uint16 when the system has at most
                                 65536 words, else int32)
    codes[j]                     the (coefficient, value) pair of entry j (uint8 when the
                                 operators have at most 256 distinct pairs -- they are small
                                 integers and halves -- else uint16/int32)
    pair_coef[p], pair_value[p]  the pairs
    jpos[j]                      position of entry j in the union Jacobian pattern

Each call first forms the weights ``w[p] = κ[pair_coef[p]] · pair_value[p]`` and then
``out[i] = Σ_j w[codes[j]] μ[cols[j]]`` with four independent partial sums (so the loop is
not bound by the latency of one chain of additions): three bytes per entry (uint16 column,
uint8 code) instead of the twelve of a float64 CSR matrix, in one pass for all
coefficients. The loop is bound by its four loads per entry, so the byte count decides
whether the tables of a 10k--100k word system stay in the L2 cache (measured by
``tools/bench_rhs.py``; a word reordering for locality, run-length grouping by code and
packed 64-bit loads were measured too and were not faster).

Both forms export the same functions: ``rhs(mu, kappa, out)`` and
``jac_data(kappa, data)`` (``data`` holds ``Σ_c κ_c A_c`` on the union sparsity pattern
``jac_indptr``/``jac_indices``, returned by :func:`generate` as tables).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from hierarchy.core.errors import HierarchyError
from hierarchy.jit.render import render_template

#: (numpy dtype, C type) of the entry codes, smallest first: the first that holds them all
CODE_TYPES = ((np.uint8, "unsigned char"), (np.uint16, "unsigned short"), (np.int32, "int"))
#: (numpy dtype, C type) of the entry columns, smallest first (tests force the wide one)
COLUMN_TYPES = ((np.uint16, "unsigned short"), (np.int32, "int"))
#: C type -> the buffer format characters the table kernel accepts for it
TYPE_CODES = {"unsigned char": "B", "unsigned short": "H", "int": "il"}
STACK_PAIRS = 2048  # weight tables up to this size live on the stack, larger ones are malloc'd
KERNELS = ("auto", "unrolled", "table")
UNROLL_LIMIT = 1000  # total operator entries; above, unrolling costs more compile time than it saves
ROWS_PER_FUNCTION = 64  # unrolled statements are split into functions to keep gcc fast


@dataclass
class GeneratedKernel:
    """A rendered kernel: the Cython source and the arrays it needs at load time.

    Attributes
    ----------
    source : str
        Cython source of the module.
    name_hint : str
        Readable module-name prefix (``rhs_<parameterization>_K2_t1_M8_table``).
    form : str
        ``"unrolled"`` or ``"table"``.
    tables : dict of str -> numpy.ndarray
        ``jac_indptr``/``jac_indices`` (both forms) and the kernel tables (table form).
    """

    source: str
    name_hint: str
    form: str
    tables: dict


# ----------------------------------------------------------------------------- structure

def _operator_list(field):
    ops = []
    for name in field.coefficient_names:
        mat = sps.csr_matrix(field.operators[name], dtype=np.float64, copy=True)
        mat.sum_duplicates()
        mat.eliminate_zeros()
        mat.sort_indices()
        ops.append(mat)
    return ops


def union_pattern(ops, n):
    """CSR pattern (indptr, indices; int32, sorted) of the union of the operators' patterns."""
    total = sps.csr_matrix((n, n))
    for mat in ops:
        total = total + abs(mat)
    total = sps.csr_matrix(total)
    total.sort_indices()
    return total.indptr.astype(np.int32), total.indices.astype(np.int32)


def _entries(ops, n, indptr, indices):
    """All operator entries sorted by (row, column, coefficient), with Jacobian positions."""
    rows, cols, coefs, vals = [], [], [], []
    for c, mat in enumerate(ops):
        coo = mat.tocoo()
        rows.append(coo.row.astype(np.int64))
        cols.append(coo.col.astype(np.int64))
        coefs.append(np.full(coo.nnz, c, np.int64))
        vals.append(coo.data)
    row, col, coef, val = (np.concatenate(a) if a else np.zeros(0) for a in (rows, cols, coefs, vals))
    order = np.lexsort((coef, col, row))
    row, col, coef, val = row[order], col[order], coef[order], val[order]
    union_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    union_keys = union_rows * n + indices
    jpos = np.searchsorted(union_keys, row * n + col)
    return row, col, coef, val, jpos


def _smallest_type(types, count):
    """The first ``(dtype, ctype)`` of ``types`` that can hold ``count`` distinct values."""
    return next((d, c) for d, c in types if count <= np.iinfo(d).max + 1)


def _tables(row, col, coef, val, jpos, n):
    """The tables of the table kernel and the C types of codes and columns (module docstring)."""
    pairs = np.stack([coef.astype(np.float64), val], axis=1) if row.size else np.zeros((0, 2))
    distinct, codes = np.unique(pairs, axis=0, return_inverse=True)
    codes = codes.ravel()
    code_dtype, code_ctype = _smallest_type(CODE_TYPES, distinct.shape[0])
    col_dtype, col_ctype = _smallest_type(COLUMN_TYPES, n)
    row_ptr = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(row, minlength=n), out=row_ptr[1:])
    tables = {
        "row_ptr": row_ptr,
        "cols": col.astype(col_dtype),
        "codes": codes.astype(code_dtype),
        "pair_coef": distinct[:, 0].astype(np.int32),
        "pair_value": distinct[:, 1].astype(np.float64),
        "jpos": jpos.astype(np.int32),
    }
    return tables, code_ctype, col_ctype


# ----------------------------------------------------------------------------- unrolled form

def _literal(value):
    return repr(float(value))


def _sum_expression(terms):
    """C expression ``Σ v·x`` for (value, text) pairs, with ±1 written without a factor."""
    parts = []
    for value, text in terms:
        sign = "-" if value < 0 else "+"
        mag = abs(value)
        parts.append((sign, text if mag == 1.0 else f"{_literal(mag)}*{text}"))
    head_sign, head = parts[0]
    expr = ("-" if head_sign == "-" else "") + head
    return expr + "".join(f" {s} {t}" for s, t in parts[1:])


def _unrolled_statements(row, col, coef, val, jpos, n, nnz_jac):
    rhs_lines = [[] for _ in range(n)]
    bounds = np.flatnonzero(np.r_[True, row[1:] != row[:-1]]) if row.size else np.zeros(0, int)
    for start, end in zip(bounds, np.append(bounds[1:], row.size)):
        i = int(row[start])
        groups = []
        for c in np.unique(coef[start:end]):
            sel = np.arange(start, end)[coef[start:end] == c]
            inner = _sum_expression([(val[j], f"mu[{col[j]}]") for j in sel])
            groups.append((1.0, f"k[{c}]*({inner})"))
        rhs_lines[i] = _sum_expression(groups)
    rhs = [f"out[{i}] = {expr or '0.0'}" for i, expr in enumerate(rhs_lines)]
    by_pos = [[] for _ in range(nnz_jac)]
    for j in range(row.size):
        by_pos[int(jpos[j])].append((val[j], f"k[{coef[j]}]"))
    jac = [f"data[{p}] = {_sum_expression(terms)}" for p, terms in enumerate(by_pos)]
    return rhs, jac


def _chunks(lines, size):
    return [lines[i:i + size] for i in range(0, len(lines), size)] or [[]]


# ----------------------------------------------------------------------------- entry points

def describe(field):
    """One-line identity of a field, written into the generated source."""
    return (f"parameterization={field.parameterization} K={field.K} "
            f"trainable={list(field.trainable)} degree={field.degree} "
            f"observables={list(getattr(field, 'observables', []))} "
            f"all_words={bool(getattr(field, 'all_words', False))} words={len(field.labels)}")


def name_hint(field, form):
    """Readable module-name prefix of a field's kernel: model, K, trainable, degree, form."""
    trainable = "".join(str(k) for k in field.trainable)
    return f"rhs_{field.parameterization}_K{field.K}_t{trainable}_M{field.degree}_{form}"


def choose_form(field, kernel="auto"):
    """The kernel form for ``kernel`` ("auto" picks by the number of operator entries)."""
    if kernel not in KERNELS:
        raise HierarchyError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}",
                             field="kernel")
    if kernel != "auto":
        return kernel
    entries = sum(field.operators[name].nnz for name in field.coefficient_names)
    return "unrolled" if entries <= UNROLL_LIMIT else "table"


def generate(field, kernel="auto"):
    """Render the kernel module of a field.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
        Needs ``operators``, ``coefficient_names``, ``labels`` and the identity attributes
        (``parameterization``, ``K``, ``trainable``, ``degree``).
    kernel : {"auto", "unrolled", "table"}

    Returns
    -------
    GeneratedKernel
    """
    form = choose_form(field, kernel)
    n, n_coef = len(field.labels), len(field.coefficient_names)
    ops = _operator_list(field)
    indptr, indices = union_pattern(ops, n)
    row, col, coef, val, jpos = _entries(ops, n, indptr, indices)
    context = dict(description=describe(field), n=n, n_coef=n_coef, nnz_jac=int(indices.size),
                   coefficient_names=list(field.coefficient_names))
    tables = {"jac_indptr": indptr, "jac_indices": indices}
    if form == "unrolled":
        rhs, jac = _unrolled_statements(row, col, coef, val, jpos, n, int(indices.size))
        source = render_template("rhs_unrolled.pyx.j2", rhs_chunks=_chunks(rhs, ROWS_PER_FUNCTION),
                         jac_chunks=_chunks(jac, 4 * ROWS_PER_FUNCTION), **context)
    else:
        kernel_tables, code_ctype, col_ctype = _tables(row, col, coef, val, jpos, n)
        tables.update(kernel_tables)
        digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes()
                                         for a in kernel_tables.values())).hexdigest()
        source = render_template("rhs_table.pyx.j2", code_ctype=code_ctype,
                         code_codes=TYPE_CODES[code_ctype], col_ctype=col_ctype,
                         col_codes=TYPE_CODES[col_ctype], n_entries=int(row.size),
                         n_pairs=int(kernel_tables["pair_value"].size),
                         stack_pairs=int(kernel_tables["pair_value"].size) <= STACK_PAIRS,
                         tables_sha256=digest, **context)
    return GeneratedKernel(source, name_hint(field, form), form, tables)


TABLE_NAMES = ("row_ptr", "cols", "codes", "pair_coef", "pair_value", "jpos")


TABLES_ATTACHED = "__hierarchy_tables_attached__"  # module attribute set by attach
_attach_lock = threading.Lock()


def attach(module, tables):
    """Hand the load-time tables to a compiled kernel module, once.

    No-op for unrolled kernels and for a table kernel whose tables are installed already
    (replacing them could free arrays another thread is reading).

    Parameters
    ----------
    module : module
        A compiled kernel (``FORM`` is ``"unrolled"`` or ``"table"``).
    tables : dict of str -> numpy.ndarray
        :attr:`GeneratedKernel.tables` (or the same arrays read back from the cache).

    Returns
    -------
    module
        ``module``, ready to evaluate.
    """
    if module.FORM != "table":
        return module
    with _attach_lock:
        if not getattr(module, TABLES_ATTACHED, False):
            module.set_tables(*(np.ascontiguousarray(tables[name]) for name in TABLE_NAMES))
            setattr(module, TABLES_ATTACHED, True)
    return module
