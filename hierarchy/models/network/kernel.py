"""The compiled term table (``templates/network_field.pyx.j2``), through :mod:`hierarchy.jit`.

The template holds C versions of the closed forms of :mod:`.closed_forms` (the erf arcsine
integrals, the relu arc-cosine forms) and a Wick sum, and one loop over the rows of the term
table: ``out[target] += coefficient * prod v[v_index] * E_row(C)``. The table itself is data
(arrays built here from :func:`~.derivation.term_table`), so one compiled module serves every
network; at ``K = M = 8`` the table has thousands of ``I4`` rows, which a loop handles and one
giant expression would not. Groups without a closed form (quadrature) are evaluated by the
numpy reference (:class:`~.field.TableField`, handed in) and added.

:func:`compiled_field` returns None when the module cannot be had (no compiler, a compile
error), after a :class:`RuntimeWarning` naming the reason, once per reason and process; the
field then runs on numpy (same numbers, many times slower).
"""

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.jit.fallback import CompiledModules
from hierarchy.jit.render import render_template
from hierarchy.models.network import quadrature
from hierarchy.models.network.derivation import row_weights
from hierarchy.models.network.model import second_layer_of

TEMPLATE = "network_field.pyx.j2"
#: the row kinds of the kernel, in the order of its enum
KINDS = ("covariance", "erf_i2", "erf_i3", "erf_i4", "erf_j2", "erf_d", "erf_gx", "relu_gg",
         "relu_dd", "relu_dxg", "relu_dx", "relu_gx", "relu_g", "relu_d", "wick")
#: what runs on numpy when the kernel cannot be compiled (the fallback warning's subject)
WHAT = "the network family's term-table field"

_compiled = CompiledModules(WHAT)


#: the template's variables
CONTEXT = {"kinds": list(KINDS)}


def kernel_source():
    """The Cython source of the term-table kernel."""
    return render_template(TEMPLATE, **CONTEXT)


def kernel_module():
    """The compiled module, or None (with a warning once per reason); a warm run finds it
    without rendering the template
    (:meth:`~hierarchy.jit.fallback.CompiledModules.template_module`)."""
    return _compiled.template_module(TEMPLATE, "network_field", CONTEXT)


def table_arrays(table, plans):
    """The closed-form rows of ``table`` as the kernel's flat arrays, and the other groups.

    ``plans``: each group's closed form (:func:`~.closed_forms.table_plans`, kept by the
    reference field).

    Returns
    -------
    dict, list
        The arrays (``kind``, ``fields``, ``coefficient``, ``v_index``, ``target``,
        ``wick_start``, ``wick_coefficient``, ``pair_start``, ``pairs``), and the indices of
        the groups left to quadrature.
    """
    V = max((g.v_index.shape[1] for g in table.groups), default=1)
    kind, fields, coefficient, v_index, target = [], [], [], [], []
    wick_start, wick_coefficient, pair_start, pairs = [0], [], [0], []
    rest = []
    for j, group in enumerate(table.groups):
        how = plans[j]
        if how is None:
            rest.append(j)
            continue
        name, detail = how
        rows = group.rows
        if name == "wick":
            local = np.zeros((rows, 4), dtype=np.int64)
            local[:, :group.fields.shape[1]] = group.fields
            for _ in range(rows):
                for c, term_pairs in detail:
                    wick_coefficient.append(c)
                    pairs.extend(term_pairs)
                    pair_start.append(len(pairs))
                wick_start.append(len(wick_coefficient))
        else:
            local = np.zeros((rows, 4), dtype=np.int64)
            local[:, :len(detail)] = group.fields[:, list(detail)]
            wick_start.extend([len(wick_coefficient)] * rows)
        kind += [KINDS.index(name)] * rows
        fields.append(local)
        coefficient.append(group.coefficient)
        padded = np.full((rows, V), -1, dtype=np.int64)
        padded[:, :group.v_index.shape[1]] = group.v_index
        v_index.append(padded)
        target.append(group.target)
    if not wick_coefficient:  # one unused term keeps every buffer non-empty
        wick_coefficient, pair_start, pairs = [0.0], [0, 0], [(0, 0)]
    arrays = {
        "kind": np.array(kind, dtype=np.int32),
        "fields": np.concatenate(fields or [np.zeros((0, 4), np.int64)]).reshape(-1),
        "coefficient": np.concatenate(coefficient or [np.zeros(0)]),
        "v_index": np.concatenate(v_index or [np.zeros((0, V), np.int64)]).reshape(-1),
        "target": np.concatenate(target or [np.zeros(0, np.int64)]).astype(np.int64),
        "wick_start": np.array(wick_start, dtype=np.int64),
        "wick_coefficient": np.array(wick_coefficient, dtype=float),
        "pair_start": np.array(pair_start, dtype=np.int64),
        "pairs": np.array(pairs, dtype=np.int64).reshape(-1),
        "V": V,
    }
    return arrays, rest


class CompiledField:
    """``[f (n), g (n), eg]`` of the term table by the compiled kernel (quadrature groups in numpy).

    Parameters
    ----------
    reference : hierarchy.models.network.field.TableField
        The numpy term table of the network (its groups without a closed form run there).
    module : module
        From :func:`kernel_module`.
    """

    engine = "compiled"

    def __init__(self, reference, module):
        net = reference.net
        self.net = net
        self.module = module
        self.reference = reference
        self.table = self.reference.table
        self.arrays, self.rest = table_arrays(self.table, reference.plans)
        a = self.arrays
        self.rows = len(a["kind"])
        self._args = (a["kind"], a["fields"], a["coefficient"], a["v_index"], a["V"],
                      a["target"], a["wick_start"], len(a["wick_coefficient"]),
                      a["wick_coefficient"], a["pair_start"], len(a["pairs"]) // 2, a["pairs"])
        self.nout = 2 * self.table.size + 1
        self.dimension = net.K + net.M

    def outputs(self, u):
        u = np.asarray(u, dtype=float)
        return self.outputs_at(self.reference.gram(u), second_layer_of(self.net, u))

    def outputs_at(self, c, v):
        """``[f (n), g (n), eg]`` at the local fields' covariance ``c`` and second layer ``v``."""
        v = np.ascontiguousarray(v, dtype=float)
        out = np.zeros(self.nout)
        kind, fields, coef, v_index, V, target, wick_start, terms, wick_c, pair_start, \
            npairs, pairs = self._args
        self.module.outputs(np.ascontiguousarray(c).reshape(-1), self.dimension, v, len(v),
                            self.rows, kind, fields, coef, v_index, V, target, wick_start,
                            terms, wick_c, pair_start, npairs, pairs, out, self.nout)
        for j in self.rest:
            group = self.table.groups[j]
            values = self.reference.group_values(j, c, v)
            np.add.at(out, group.target, row_weights(group, v) * values)
        return out

    def quadrature_error(self, u):
        return self.reference.quadrature_error(u)

    def quadrature_error_at(self, c, v):
        return self.reference.quadrature_error_at(c, v)

    def set_target(self, target):
        """The target of the engine's rows (:meth:`~.field.TableField.set_target`)."""
        self.reference.set_target(target)

    def set_orders_below_top(self, below):
        """:meth:`~.field.TableField.set_orders_below_top` of the engine's rows."""
        self.reference.set_orders_below_top(below)


def compiled_field(reference, required=False):
    """A :class:`CompiledField` of ``reference.net``, or None when the kernel cannot be compiled.

    ``reference``: the network's :class:`~.field.TableField` (passed in, so that this module
    does not import the field); ``required``: raise instead of returning None.
    """
    module = kernel_module()
    if module is None:
        if required:
            raise HierarchyError("the compiled network field is not available (see the "
                                 "warning)", field="engine")
        return None
    return CompiledField(reference, module)


#: the warning when the kernel cannot be had (the caller keeps its numpy evaluation)
warn_fallback = _compiled.warn
#: forget the module loaded and the fallbacks warned about (tests observe a fallback)
forget = _compiled.forget

__all__ = ["CompiledField", "compiled_field", "kernel_module", "kernel_source", "quadrature"]
