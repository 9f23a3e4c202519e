"""What the compiled factor drops when it merges a field into the fields before it.

The engines' pivoted Cholesky factor (``templates/_gauss_levels.c.j2``, ``gauss_factor``)
pivots the kinked fields first and ends a field whose variance, conditional on the fields
pivoted before it, is small: a kinked field at most :data:`MERGE_CUTOFF` of its *own*
variance (a step does not depend on its field's scale), a smooth one at most
:data:`MERGE_CUTOFF` of the row's *largest* variance. The field then becomes the linear
combination of those fields, and the conditional variance ``v`` is dropped.

- **Smooth**: the row moves by ``O(v)``, times the curvature of its functions; beside a steep
  tanh student (``Q_11 ~ 30``) a shrinking one moved the field by ``1.3e-11`` at the cut-off
  under a stated ``2e-13``.
- **Kinked**: a row with two steps moves by ``O(sqrt v)`` (``E[step(x) step(x + e)]``
  differs from ``E[step(x)]`` by about ``sqrt(v/C_ff)/(2 pi)`` of its scale: the steps
  disagree on a band of that width about the kink). At the cut-off that is
  ``sqrt(1e-13) = 3e-7`` of the row: two relu students agreeing to ``1e-13`` of their
  variance moved an output by ``1.1e-8`` under a stated ``4e-10``.

The cut-off cannot go much lower (the factor's residuals are known to a few ulps of the
variance, and a kinked row is ``sqrt``-singular at a tie), so the dropped part is stated. The
factor reports each merged field's residual (``merged``, in the cut-off's units), so no
second copy of its pivots is kept here. A row with such a merge is evaluated again with the
merged fields' variances raised by :data:`LIFT` (of their own variance for kinked fields, of
the row's largest for smooth ones: an independent part, which the factor keeps as a level of
its own). With ``r`` the row's
largest merged residual in those units, the dropped part is ``b r`` (smooth) or
``b sqrt(r)`` (kinked), the change is ``b LIFT`` or ``b (sqrt(r + LIFT) - sqrt(r))``, and
``b r`` or ``b sqrt(r)`` so measured, times :data:`SAFETY`, is added to the row's stated
error: at most ``0.02`` of the change (smooth) or ``0.2`` (kinked). A residual of at most
:data:`ROUNDING` is taken for an exact tie, merged exactly, and adds nothing (a genuine one that
small moves a kinked row by about ``sqrt(3.6e-15) / (2 pi) = 1e-8`` of its scale, as rounding
the state itself does).
"""

import numpy as np

#: a kinked field whose conditional variance is at most this fraction of its own, or a smooth
#: one at most this fraction of the row's largest variance, is merged (the factor's cut-off)
MERGE_CUTOFF = 1e-13
#: the lift at which the merged part is measured, in the cut-off's units
LIFT = 1e-11
#: a residual at most this is rounding (the factor's Schur complements are known to a few
#: ulps of the variance): an exact tie, merged exactly, nothing added
ROUNDING = 16 * np.finfo(float).eps
#: the lift measures the first order of the dropped part; this factor covers the next (at
#: the kinked cut-off the first order alone came to 0.96-1.0 of the measured part)
SAFETY = 2.0


def merge_errors(evaluate, c, kinked, merged, values, errors):
    """The stated errors of rows ``values`` (``errors``) at covariances ``c``, raised by what
    the factor's merges drop (module docstring).

    Parameters
    ----------
    evaluate : callable
        ``evaluate(rows, c_rows) -> (values, errors)``: the rows of index ``rows`` again, at
        the covariances ``c_rows``.
    c : numpy.ndarray, shape (rows, d, d)
    kinked : sequence of bool, length d
    merged : numpy.ndarray, shape (rows, d)
        What the compiled factor reported (``gauss_factor``'s ``merged``): the residual of
        each field it merged, in the cut-off's units, -1 for a field it kept.
    values, errors : numpy.ndarray, shape (rows,) or (rows, outputs)

    Returns
    -------
    numpy.ndarray, the shape of ``errors``
    """
    kinked = np.asarray(kinked, dtype=bool)
    errors = np.array(errors, dtype=float, copy=True)
    for steps in (True, False):
        kind = kinked if steps else ~kinked
        of_kind = np.where(kind, merged, -1.0)
        rows = np.flatnonzero(of_kind.max(axis=1, initial=-1.0) > ROUNDING)
        if rows.size == 0:
            continue
        r = of_kind[rows].max(axis=1)
        lifted = np.array(c[rows], dtype=float, copy=True)
        merged = of_kind[rows] >= 0.0
        unit = (np.diagonal(lifted, axis1=1, axis2=2) if steps else
                np.broadcast_to(np.diagonal(lifted, axis1=1, axis2=2).max(axis=1)[:, None],
                                merged.shape))
        at, field = np.nonzero(merged)
        lifted[at, field, field] += LIFT * unit[at, field]
        moved, moved_errors = evaluate(rows, lifted)
        change = np.abs(moved - values[rows]) + moved_errors
        if steps:
            scale = np.sqrt(r) / (np.sqrt(r + LIFT) - np.sqrt(r))
        else:
            scale = r / LIFT
        errors[rows] += (SAFETY * scale).reshape((-1,) + (1,) * (change.ndim - 1)) * change
    return errors
