"""The compiled, adaptive expectation engine: ``E[prod_f h_f(z_f)]``, ``z ~ N(0, C)``, ``d <= 4``.

Every row of the term table without a closed form (:mod:`.derivation`, :mod:`.closed_forms`)
is such an expectation of single-field functions ``h_f`` (``g^a g'^b x^c``) of at most four
jointly Gaussian local fields. The engine evaluates it in C
(``templates/network_engine.pyx.j2``), with no Python per point:

- **the factor**: a pivoted Cholesky factor ``z = L xi``, ``xi ~ N(0, I_r)``, ``r = rank C``,
  kinked fields pivoted first; a field whose conditional variance vanishes (a singular ``C``,
  e.g. a start at ``Q = 0`` or a student equal to a teacher: at most ``1e-13`` of the row's
  largest variance, or of its own for a kinked field, whose step does not depend on its
  scale) ends at an earlier level, a field of zero variance is the constant ``h_f(0)``; what
  such a merge of a nearly dependent field drops is stated (:mod:`.merged_fields`);
- **nested one-dimensional rules**, one level per ``xi_j``: a level where no kinked field
  ends integrates ``phi(xi)`` times the rest by the trapezoid rule on ``[-U, U]`` (``U = 9``:
  the tail beyond is below ``1e-18``), which converges geometrically for functions analytic in
  a strip, faster than Gauss-Hermite for ``tanh`` and the sigmoid (their poles near the real
  axis make Gauss-Hermite's error stall and jump: its two-order estimate is no bound, measured
  in the tests and in ``docs/network.md``); a level where kinked fields end (``relu``'s step
  and ramp, ``abs``, a hinge: ``Heaviside``, ``Max``, ``Min``, ``Abs``, ``sign`` with arguments
  linear in ``x``) is split at the kinks of those fields, exact locations in ``xi_j`` given
  the outer levels, and each smooth piece gets Gauss-Legendre;
- **turns**: every smooth function that is not a polynomial is split at the network's
  saturating activations' turns (:func:`engine_source` with ``turns``) like a kink, along
  the levels where it is steep (its own level when its field moves faster than
  ``GAUSS_TURN_WIDTH`` with it; a deeper level's narrow band at its centre; the innermost
  table's rule), so that the Gauss-Legendre nodes crowd where a steep tanh or sigmoid turns;
- **the mirror**: a row whose functions are all even or odd, with split points symmetric
  about 0 (:func:`function_parity`: tanh, erf, their derivatives, ``x``), is even or odd
  under ``z -> -z``, and so is the engine's computation of it (the ball, the trapezoid nodes,
  the outermost level's breakpoints at ``m = 0``). An odd row is 0 exactly; an even one sums
  its outermost level's nodes ``xi_0 > 0`` twice and skips ``xi_0 < 0``, and an innermost
  table of an even or odd function is built for ``m >= 0`` only (half the work of each);
- **the ball**: only nodes with ``|xi| <= U`` are visited (every node dropped lies outside it,
  of probability ``P(chi2_4 > 81) = 1.1e-16``);
- **a rule per level**: a smooth level along which the fields move less than along the widest
  (its column ``max_f |L[f][j]|`` a fraction ``s`` of the widest) takes the trapezoid rule of
  an order lower by one (``sqrt s <= 1/sqrt 2``) or two (``sqrt s <= 1/2``), the ladder
  continued below order 0 so that every level refines from one order to the next
  (``templates/_gauss_levels.c.j2``, ``gauss_level_rules``);
- **adaptivity**: the rules are raised through :data:`SMOOTH_POINTS` / :data:`LEGENDRE_POINTS`
  until two consecutive orders agree to the row's target, from order 2 on (orders 0 and 1
  are too coarse to be judged by their difference); the finer value is kept and the
  difference is its stated error (both rules converge geometrically on smooth pieces, so the
  finer value's error is usually far below the difference; the tests check it at every
  point, and docs/network.md gives how often and by how much it was measured to miss).
  The stated error is an estimate, not a bound: it is about the coarser order's error,
  typically orders of magnitude above the kept value's; ``tools/engine_honesty.py`` counts
  how often it misses on random draws at loose targets (when last measured: none of 4,500
  rows; on the trapezoid alone 4, by at most 2.02). A stated error extrapolated from the
  orders' rate of convergence (the difference times the square root of its ratio to the
  previous one) was tried and dropped: it missed 19 of those rows, by up to 8.9, because the
  trapezoid's error is not geometric from order to order there (docs/network.md). A solve's
  target is ``0.01 atol``, so certification (which
  compares the stated error with ``atol + rtol |u|``) keeps a margin of 50 over such a miss;
- **threads**: rows of three or four fields whose pattern cost at least a millisecond a row
  at its previous call run on threads, one task a row (:mod:`hierarchy.core.row_threads`),
  with the same values bit for bit.

The C of each ``h_f`` is printed from its sympy expression (:func:`c_function`; ``relu``'s
step is ``x > 0``, the SGD's subgradient). One module per set of functions, built and cached
by :mod:`hierarchy.jit`. :func:`engine_for` returns None, after a :class:`RuntimeWarning`, when
a function has a kink the engine cannot place or the module cannot be compiled; the caller
then keeps its numpy quadrature.
"""

import functools
import math
import time

import numpy as np

from hierarchy.core.row_threads import run_rows, thread_count
from hierarchy.jit.fallback import CompiledModules
from hierarchy.models.network.merged_fields import merge_errors

#: trapezoid points on ``[-U, U]`` of a level without a kink, by order
SMOOTH_POINTS = (25, 33, 49, 65, 97, 129, 193, 257)
#: Gauss-Legendre points per piece of a level with kinks, by order
LEGENDRE_POINTS = (12, 16, 24, 32, 48, 64, 96, 128)
#: highest order tried, by the rank of the covariance (the number of nested levels ``r``:
#: the cost is ``points^r``)
MAX_ORDER = (7, 7, 6, 4, 3)
#: the same when the innermost level is a table (one smooth field ends there, ``r >= 3``:
#: the cost is ``points^(r - 1)``)
MAX_ORDER_TABLE = (7, 7, 6, 6, 5)
#: the default target of one output's quadrature error (the solve's ``atol`` times
#: :data:`TARGET_FACTOR` when the family knows it)
DEFAULT_TARGET = 1e-12
#: the engine's target relative to the solve's ``atol``
TARGET_FACTOR = 0.01
#: rows of this many fields or more are spread over threads, one task a row
#: (:mod:`hierarchy.core.row_threads`), when their pattern's rows took at least
#: :data:`THREADED_ROW_SECONDS` each at its previous call: a row of one or two fields costs
#: microseconds, and cheap rows of more (relu/erf K = M = 3's) ran 1.6 times slower as tasks
THREADED_FIELDS = 3
THREADED_ROW_SECONDS = 1e-3
TEMPLATE = "network_engine.pyx.j2"
#: what runs on numpy when the engine cannot be had (the fallback warning's subject)
WHAT = "the network family's expectation engine"

_compiled = CompiledModules(WHAT, "{what} is not used: {reason}; the quadrature runs on numpy")


class UnsupportedFunction(ValueError):
    """A single-field function whose kinks the engine cannot place."""


@functools.cache
def rule_tables(smooth_points=SMOOTH_POINTS, legendre_points=LEGENDRE_POINTS):
    """``(smooth, legendre, legendre_start, lx, lw)``: the points per order of the trapezoid
    and Gauss-Legendre rules, and every order's Legendre nodes and weights concatenated
    (``legendre_start`` indexes them), the tables the compiled engines read."""
    starts, xs, ws = [], [], []
    offset = 0
    for n in legendre_points:
        x, w = np.polynomial.legendre.leggauss(n)
        starts.append(offset)
        xs.append(x)
        ws.append(w)
        offset += n
    return (np.array(smooth_points, dtype=np.int32), np.array(legendre_points, dtype=np.int32),
            np.array(starts, dtype=np.int32), np.concatenate(xs), np.concatenate(ws))


def kinks(expr):
    """The points where ``expr`` (in ``activations.X``) has a kink or a step, sorted.

    Raises
    ------
    UnsupportedFunction
        A non-smooth piece whose switching argument is not linear in ``x``.
    """
    import sympy

    from hierarchy.models.network.activations import X
    points = set()

    def root(argument):
        argument = sympy.expand(argument)
        if not argument.has(X):
            return
        poly = sympy.Poly(argument, X) if argument.is_polynomial(X) else None
        if poly is None or poly.degree() != 1:
            raise UnsupportedFunction(f"the kink of {expr} is not at a root of a linear "
                                      "function of x")
        a, b = (float(c) for c in poly.all_coeffs())
        points.add(-b / a)

    for node in sympy.preorder_traversal(expr):
        if isinstance(node, (sympy.Heaviside, sympy.Abs, sympy.sign, sympy.DiracDelta)):
            if isinstance(node, sympy.DiracDelta):
                raise UnsupportedFunction(f"{expr} holds a delta function")
            root(node.args[0])
        elif isinstance(node, (sympy.Max, sympy.Min)):
            args = node.args
            for i in range(len(args)):
                for j in range(i + 1, len(args)):
                    root(args[i] - args[j])
        elif isinstance(node, sympy.Piecewise):
            for _, condition in node.args:
                if isinstance(condition, sympy.core.relational.Relational):
                    root(condition.lhs - condition.rhs)
                elif condition not in (sympy.true, sympy.false):
                    raise UnsupportedFunction(f"the pieces of {expr} are not half-lines")
    return tuple(sorted(points))


#: the grid on which :func:`turn_points` looks for a function's steepest point
TURN_GRID = (-30.0, 30.0, 6001)
#: a function saturates when its slope at both ends of the grid is below this share of its
#: steepest slope
TURN_SATURATION = 1e-8


def turn_points(expr):
    """Where a smooth, saturating ``expr`` (in ``activations.X``) is steepest, as a tuple.

    erf, tanh and the sigmoid turn at ``x = 0``: on a field of large variance ``s^2`` they go
    from one plateau to the other within ``|z| < 1/s`` of the standard variable, which the
    trapezoid on ``[-U, U]`` resolves only at many points (the logistic ``K = 2`` field at
    ``Q_kk = 15``: two orders 2.5e-4 apart at 65 points a level). Split there like a kink, the
    Gauss-Legendre nodes of the two pieces crowd at the turn. The turn is the steepest point
    of ``expr`` on a grid over ``[-30, 30]`` (snapped to 0 within ``1e-9``), refined by
    bisection of ``expr''``. Returns ``()`` when ``expr`` has a kink, is constant, is not
    finite on the grid, does not saturate (its slope at either end of the grid at least
    :data:`TURN_SATURATION` of its steepest: polynomials, ``atan``) or has more than one
    steep point (local maxima of ``|expr'|`` above half the steepest: the Gaussian bump
    ``exp(-x^2/2)`` turns at ``x = -1`` and ``x = 1``).
    """
    import sympy

    from hierarchy.models.network.activations import X
    if not is_smooth(expr):
        return ()
    slope = sympy.diff(expr, X)
    if slope == 0:
        return ()
    lo, hi, n = TURN_GRID
    x = np.linspace(lo, hi, n)
    with np.errstate(all="ignore"):
        s = np.abs(np.broadcast_to(sympy.lambdify(X, slope, "numpy")(x), x.shape)).astype(float)
    if not np.all(np.isfinite(s)) or s.max() == 0.0:
        return ()
    top = s.max()
    if max(s[0], s[-1]) > TURN_SATURATION * top or np.sum(_local_maxima(s, top)) != 1:
        return ()
    k = int(np.argmax(s))
    return (_refine_turn(sympy.lambdify(X, sympy.diff(slope, X), "math"), x, k),)


def _local_maxima(s, top):
    """The grid's local maxima of ``s`` above half its top (a one-turn function has one)."""
    return (s[1:-1] >= s[:-2]) & (s[1:-1] > s[2:]) & (s[1:-1] > 0.5 * top)


def _refine_turn(curvature, x, k):
    """The zero of ``curvature`` (``expr''``) between the grid's neighbours of ``x[k]``, by
    ``scipy.optimize.brentq``; the grid point itself where ``curvature`` has no sign change
    there (it then vanishes at no point that the grid resolves)."""
    from scipy.optimize import brentq
    a, b = x[max(k - 1, 0)], x[min(k + 1, len(x) - 1)]
    fa, fb = curvature(a), curvature(b)
    turn = x[k]
    if fa == 0.0 or fb == 0.0 or (fa > 0) != (fb > 0):
        turn = brentq(curvature, a, b, xtol=1e-15, rtol=8.9e-16)
    return 0.0 if abs(turn) < 1e-9 else float(turn)


def c_function(expr):
    """The C expression of ``expr`` in the variable ``x`` (sympy's C99 printer; the step
    ``Heaviside(u)`` is ``u > 0``, 0 at 0, the subgradient the SGD uses)."""
    from sympy.printing.c import C99CodePrinter

    class Printer(C99CodePrinter):
        def _print_Heaviside(self, node):
            return f"(({self._print(node.args[0])}) > 0 ? 1.0 : 0.0)"

    return Printer().doprint(expr)


def function_points(expr, turns=()):
    """``(points, turned)``: where the engine splits the levels of ``expr``: its kinks
    (``turned`` false), else, for a smooth function that is not a polynomial, ``turns``
    (``turned`` true; see :func:`engine_source`), else none."""
    from hierarchy.models.network.activations import X
    points = kinks(expr)
    if points or not turns or not expr.has(X) or expr.is_polynomial(X):
        return points, False
    return tuple(float(t) for t in turns), True


def function_parity(expr, points):
    """``+1`` or ``-1`` when ``expr`` is even or odd (:func:`.activations.parity`) and its
    split ``points`` (:func:`function_points`) are symmetric about 0, else 0.

    A row whose functions all have a parity is symmetric under ``z -> -z``, and so is the
    engine's computation of it (``xi -> -xi``: the ball, the trapezoid nodes, and the
    outermost level's breakpoints, which are ``points / L[f][0]``). The engine then sums
    the outermost level's nodes ``xi_0 > 0`` twice and skips ``xi_0 < 0`` (half the work),
    or returns 0 for an odd row.
    """
    from hierarchy.models.network.activations import parity
    return parity(expr) if symmetric_about_zero(points) else 0


def symmetric_about_zero(points):
    """True when the set of split ``points`` is its own negative (exactly: the engines'
    breakpoints are then exact mirror images)."""
    return sorted(points) == sorted(-p for p in points)


def engine_source(expressions, uniform=False, turns=()):
    """The Cython source of the engine for the single-field functions ``expressions``.

    ``uniform``: every level on its order's rule, over the whole cube, the baseline
    ``tools/bench_network.py`` measures the per-level rules and the ball against.
    ``turns``: where the network's saturating activations turn (:func:`turn_points`); every
    smooth function that is not a polynomial (``g^a g'^b x^c`` of such an activation) is
    split there, at its own level and, where its band is narrow, at the outer levels
    (``templates/_gauss_levels.c.j2``): on a field of large variance it goes from plateau to
    plateau within a small fraction of the standard variable, which the trapezoid rule
    resolves only at many points.
    """
    from hierarchy.jit.render import render_template
    bodies, kink_start, points, turned, parities = [], [0], [], [], []
    for expr in expressions:
        bodies.append(c_function(expr))
        where, is_turn = function_points(expr, turns)
        points.extend(repr(float(k)) for k in where)
        kink_start.append(len(points))
        turned.append(int(is_turn))
        parities.append(function_parity(expr, [float(k) for k in where]))
    return render_template(TEMPLATE, functions=bodies, kink_start=kink_start, kinks=points,
                           turned=turned, parities=parities, max_order=MAX_ORDER,
                           max_order_table=MAX_ORDER_TABLE, uniform=uniform)


def engine_for(expressions, uniform=False, turns=()):
    """An :class:`Engine` of the single-field functions ``expressions``, or None (with a
    :class:`RuntimeWarning` naming the reason, once) when it cannot be had (``uniform``,
    ``turns``: see :func:`engine_source`)."""
    expressions = tuple(expressions)
    source, fallback = source_or_fallback(expressions, uniform, turns)
    if fallback:
        warn_fallback(fallback)
        return None
    module = compiled_module(source, "network_engine", "compiling it failed")
    return None if module is None else Engine(module, expressions)


def source_or_fallback(expressions, uniform=False, turns=()):
    """``(engine_source(expressions, uniform, turns), None)``, or ``(None, why)`` when the
    engine cannot be had: a kink it cannot place, or a function sympy's C printer cannot
    print."""
    try:
        return engine_source(expressions, uniform, turns), None
    except UnsupportedFunction as error:
        return None, str(error)
    except Exception as error:  # sympy's C printer on a function it cannot print
        return None, f"its C code cannot be printed ({type(error).__name__}: {error})"


def pattern_plan(patterns, turns=()):
    """What the field needs to run the engine on rows of ``patterns``, as JSON-ready data, so
    that a second run reads it from the derivation cache and prints nothing with sympy.

    Parameters
    ----------
    patterns : list of list of sympy.Expr
        The single-field functions of each pattern's fields.
    turns : tuple of float
        Where the network's saturating activations turn (:func:`engine_source`).

    Returns
    -------
    dict
        ``terms``: per pattern, its :func:`stein_terms` with function ids (indices into the
        sorted set of every function) in place of the functions; ``count``: the number of
        functions; ``source``: the engine's Cython source (:func:`engine_source`) and
        ``kinked``: which functions have kinks, or ``fallback``: why the engine cannot be
        had (:func:`engine_of_plan` warns with it).
    """
    import sympy

    terms = [stein_terms(functions) for functions in patterns]
    functions = sorted({h for pattern in terms for *_, hs in pattern for h in hs},
                       key=sympy.default_sort_key)
    plan = {"count": len(functions), "source": None, "kinked": None, "fallback": None,
            "terms": [[(c, pairs, positions, [functions.index(h) for h in hs])
                       for c, pairs, positions, hs in pattern] for pattern in terms]}
    if functions:
        plan["source"], plan["fallback"] = source_or_fallback(functions, turns=turns)
        if plan["source"] is not None:
            plan["kinked"] = [int(bool(kinks(h))) for h in functions]
    return plan


def engine_of_plan(plan):
    """The :class:`Engine` of a :func:`pattern_plan`, or None after the fallback warning (the
    plan's reason, or the module failing to compile)."""
    if plan["fallback"]:
        warn_fallback(plan["fallback"])
        return None
    module = compiled_module(plan["source"], "network_engine", "compiling it failed")
    return None if module is None else Engine(module, kinked=plan["kinked"])


def plan_terms(plan, index):
    """Pattern ``index``'s terms of a :func:`pattern_plan` as :class:`PatternIntegral` takes
    them (tuples, as JSON gives lists)."""
    return [(float(c), tuple(tuple(pair) for pair in pairs), tuple(positions), tuple(ids))
            for c, pairs, positions, ids in plan["terms"][index]]


def compiled_module(source, name_hint, failure):
    """The compiled module of the Cython ``source`` (built once per process and cached by
    :mod:`hierarchy.jit`), or None after a fallback warning ``failure (first line)``, once,
    when it cannot be compiled (:class:`hierarchy.jit.fallback.CompiledModules`)."""
    return _compiled.module(source, name_hint, failure=failure)


class Engine:
    """The compiled module of a set of single-field functions.

    Parameters
    ----------
    module : module
        From :func:`engine_for` or :func:`engine_of_plan`.
    expressions : tuple of sympy.Expr, optional
        The functions, in the module's order.
    kinked : sequence of int, optional
        Which functions have kinks (default: found from ``expressions``).
    """

    def __init__(self, module, expressions=(), kinked=None):
        self.module = module
        self.expressions = expressions
        self.kinked = (tuple(int(k) for k in kinked) if kinked is not None
                       else tuple(int(bool(kinks(e))) for e in expressions))
        #: seconds per row of each pattern (function ids) at its last call
        self.row_seconds = {}
        #: rows returned short of their target (they ran to their highest order), counted
        #: over every call: the certification's coarse re-solve runs when a solve had any
        self.rows_short = 0

    def expectation(self, ids, c, targets, below_top=0):
        """``(values, errors, orders)`` of ``E[prod_f h_{ids[f]}(z_f)]`` for every row.

        Parameters
        ----------
        ids : sequence of int
            The function of each of the ``d`` fields.
        c : numpy.ndarray, shape (rows, d, d)
            Covariances (symmetric positive semi-definite).
        targets : float or numpy.ndarray, shape (rows,)
            Absolute error target of each row.
        below_top : int
            Every row's highest order lowered by this many (the certification's coarse
            re-solve: 1, where a row that ran to its highest order gives the order below).
        """
        c = np.ascontiguousarray(c, dtype=float)
        targets = np.ascontiguousarray(np.broadcast_to(np.asarray(targets, dtype=float),
                                                       (c.shape[0],)))
        values, errors, orders, merged = self._rows(ids, c, targets, below_top)
        errors = merge_errors(  # what the factor's merges of nearly dependent fields drop
            lambda rows, c_rows: self._rows(ids, c_rows, targets[rows], below_top)[:2],
            c, [bool(self.kinked[i]) for i in ids], merged, values, errors)
        self.rows_short += int(np.count_nonzero(~(errors <= targets)))
        return values, errors, orders

    def _rows(self, ids, c, targets, below_top):
        """:meth:`expectation`'s rows as the compiled module gives them, with what its factor
        merged (``(rows, d)``, :func:`~.merged_fields.merge_errors`)."""
        c = np.ascontiguousarray(c, dtype=float)
        rows, d = c.shape[0], c.shape[-1]
        smooth, legendre, starts, lx, lw = rule_tables()  # every order, int32, contiguous
        top = len(SMOOTH_POINTS) - 1
        function_ids = np.array(ids, dtype=np.int32)
        kinked = np.array([self.kinked[i] for i in ids], dtype=np.int32)
        values, errors = np.zeros(rows), np.zeros(rows)
        orders = np.zeros(rows, dtype=np.int32)
        merged = np.zeros((rows, d))

        def run(start, stop):  # the compiled loop releases the GIL: rows run in parallel
            self.module.expectations(
                stop - start, d, function_ids, kinked, c[start:stop].reshape(-1),
                targets[start:stop], top, smooth, legendre, starts, len(lx), lx, lw,
                values[start:stop], errors[start:stop], orders[start:stop],
                merged[start:stop].reshape(-1), below_top)

        self._spread(tuple(ids), d, rows, run)
        return values, errors, orders, merged

    def _spread(self, key, d, rows, run):
        """``run(start, stop)`` over the rows: on threads when the pattern ``key`` has
        :data:`THREADED_FIELDS` fields and its rows took :data:`THREADED_ROW_SECONDS` each at
        its last call; records their cost for the next call."""
        threaded = (d >= THREADED_FIELDS
                    and self.row_seconds.get(key, 0.0) >= THREADED_ROW_SECONDS)
        start = time.perf_counter()
        if threaded:
            run_rows(run, rows)
        else:
            run(0, rows)
        used = min(thread_count(), rows) if threaded else 1  # wall time on the threads used
        self.row_seconds[key] = (time.perf_counter() - start) * used / max(rows, 1)

    def integral(self, ids):
        """A :class:`RowIntegral` of one pattern of functions."""
        return RowIntegral(self, tuple(ids))


class RowIntegral:
    """The expectation of one pattern (a tuple of function ids), as a function of ``C``."""

    def __init__(self, engine, ids):
        self.engine = engine
        self.ids = ids

    def evaluate(self, c, targets, below_top=0):
        """``(values, errors)`` for ``C (rows, d, d)``, each row to its absolute target
        (``below_top``: see :meth:`Engine.expectation`)."""
        values, errors, _ = self.engine.expectation(self.ids, c, targets, below_top)
        return values, errors


def is_smooth(expr):
    """True when ``expr`` has no kink or step the engine would split at."""
    try:
        return not kinks(expr)
    except UnsupportedFunction:
        return False


def stein_terms(expressions):
    """``E[prod_f h_f(z_f)]`` with every linear factor ``h_a = x`` removed by Stein's lemma.

    ``E[z_a F] = sum_b C_ab E[d_b F]`` lowers the dimension by one per linear factor (the drift
    rows ``E[l' g'(lambda_i) lambda_k]`` become two-field integrals). Applied when every
    function of the term is smooth (a kink's derivative is a delta).

    Returns
    -------
    list of (float, tuple, tuple, tuple)
        ``(coefficient, pairs, positions, functions)``: the expectation is the sum of
        ``coefficient * prod_{(a, b) in pairs} C_ab * E[prod h(z_positions)]``.
    """
    import sympy

    from hierarchy.models.network.activations import X
    out, stack = [], [(1.0, (), tuple(range(len(expressions))), tuple(expressions))]
    while stack:
        coefficient, pairs, positions, functions = stack.pop()
        constants = [float(h) for h in functions if not h.free_symbols]
        coefficient *= math.prod(constants)
        kept = [(p, h) for p, h in zip(positions, functions) if h.free_symbols]
        positions = tuple(p for p, _ in kept)
        functions = tuple(h for _, h in kept)
        if coefficient == 0.0:
            continue
        linear = next((k for k, h in enumerate(functions) if h == X), None)
        if linear is None or not all(is_smooth(h) for h in functions):
            out.append((coefficient, pairs, positions, functions))
            continue
        for b, h in enumerate(functions):
            if b == linear:
                continue
            slope = sympy.diff(h, X)
            if slope == 0:
                continue
            rest = [k for k in range(len(functions)) if k != linear]
            stack.append((coefficient, pairs + ((positions[linear], positions[b]),),
                          tuple(positions[k] for k in rest),
                          tuple(slope if k == b else functions[k] for k in rest)))
    return out


class PatternIntegral:
    """The expectation of one pattern after :func:`stein_terms`, by the engine.

    Parameters
    ----------
    engine : Engine
    terms : list
        From :func:`stein_terms`, with function ids (indices into ``engine.expressions``)
        in place of the functions.
    """

    def __init__(self, engine, terms):
        self.engine = engine
        self.terms = terms

    def evaluate(self, c, targets, below_top=0):
        """``(values, errors)`` for ``C (rows, d, d)``, each row to its absolute target
        (``below_top``: see :meth:`Engine.expectation`)."""
        values, errors = np.zeros(len(c)), np.zeros(len(c))
        for coefficient, pairs, positions, ids in self.terms:
            factor = np.full(len(c), coefficient)
            for a, b in pairs:
                factor = factor * c[:, a, b]
            if not positions:
                values = values + factor
                continue
            sub = c[:, positions][:, :, positions]
            share = np.maximum(np.abs(factor) * len(self.terms), 1e-300)
            v, e, _ = self.engine.expectation(ids, sub, targets / share, below_top)
            values = values + factor * v
            errors = errors + np.abs(factor) * e
        return values, errors


#: the warning when the engine cannot be had (the caller keeps its numpy quadrature)
warn_fallback = _compiled.warn
#: forget the modules loaded and the fallbacks warned about (tests observe a fallback)
forget = _compiled.forget


def row_targets(target, weights, shares):
    """Per-row absolute targets so that ``sum_r |w_r| err_r <= target`` per output: each of
    the ``shares`` rows of an output gets ``target / (shares |w_r|)``."""
    scale = np.abs(weights) * shares
    return np.where(scale > 0, target / np.maximum(scale, 1e-300), math.inf)
