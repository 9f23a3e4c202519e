"""What the compiled factor drops when it merges two nearly equal kinked fields.

The engines' pivoted Cholesky factor (``templates/_gauss_levels.c.j2``, ``gauss_factor``)
pivots the kinked fields first and ends a kinked field whose variance, conditional on the
kinked fields before it, is at most :data:`MERGE_CUTOFF` of its own: the field becomes the
linear combination of those fields. A smooth row moves by ``O(v)`` when a conditional
variance ``v`` is dropped, but a row with two steps moves by ``O(sqrt v)``
(``E[step(x) step(x + e)]`` differs from ``E[step(x)]`` by about ``sqrt(v/C_ff)/(2 pi)``
of its scale, ``e`` of variance ``v``). At the cut-off that is ``sqrt(1e-13) = 3e-7`` of the
row: an audit measured a jump of ``1.1e-8`` in an output stated to ``4e-10`` (two relu
students agreeing to ``1e-13`` of their variance, a tanh teacher).

The cut-off cannot go lower by much (the factor's residuals are known to about ``1e-16`` of
the variance, and the function itself is ``sqrt``-singular at a tie), so the part is stated:
each such row is evaluated again with every merged kinked field lifted by :data:`TIE_LIFT`
of its own variance (an independent part of that variance, which the factor keeps as a level
of its own). With the dropped part ``b sqrt(r)`` (``r`` the largest merged relative residual
of the row), the change is ``b (sqrt(r + TIE_LIFT) - sqrt(r))``; ``b sqrt(r)`` so measured,
times :data:`TIE_SAFETY`, is added to the row's stated error (at most a tenth of the change,
doubled). At an exact tie nothing is added: the merge is exact there, and a residual of at
most :data:`TIE_ROUNDING` (``3.6e-15``) is taken for one, since the factor's residuals are known
to a few ulps of the variance only (a genuine one that small moves a row by about
``sqrt(3.6e-15) / (2 pi) = 1e-8`` of its scale, as rounding the state does in any case).
"""

import numpy as np

#: a kinked field whose conditional variance is at most this fraction of its own is merged
#: into the kinked fields before it (the compiled factor's cut-off)
MERGE_CUTOFF = 1e-13
#: the lift, in units of the field's own variance, at which the merged part is measured
TIE_LIFT = 1e-11
#: a relative residual at most this is rounding (the factor's Schur complements are known to
#: a few ulps of the variance): an exact tie, merged exactly, nothing added
TIE_ROUNDING = 16 * np.finfo(float).eps
#: the lift measures the first order ``b sqrt(v)`` of the dropped part; this factor covers
#: the next (at the cut-off the first order alone came to 0.96-1.0 of the measured part)
TIE_SAFETY = 2.0


def merged_residuals(c, kinked):
    """Relative conditional variances ``r = A_ff / C_ff`` of the kinked fields the factor
    merges, per row.

    Parameters
    ----------
    c : numpy.ndarray, shape (rows, d, d)
        Covariances.
    kinked : sequence of bool, length d
        Which fields are kinked.

    Returns
    -------
    numpy.ndarray, shape (rows, d)
        ``r`` in ``[0, MERGE_CUTOFF]`` where a kinked field of nonzero variance is merged,
        NaN elsewhere. The pivots follow the compiled factor: the largest conditional
        variance above the cut-off first.
    """
    c = np.asarray(c, dtype=float)
    rows, d = c.shape[0], c.shape[-1]
    out = np.full((rows, d), np.nan)
    index = np.flatnonzero(np.asarray(kinked, dtype=bool))
    if index.size < 2:
        return out
    a = c[:, index][:, :, index].copy()
    own = np.diagonal(a, axis1=1, axis2=2).copy()
    done = np.zeros(a.shape[:2], dtype=bool)
    rows_at = np.arange(rows)
    for _ in range(index.size):
        residual = np.diagonal(a, axis1=1, axis2=2)
        open_ = ~done & (residual > MERGE_CUTOFF * own)
        active = open_.any(axis=1)
        if not active.any():
            break
        pivot = np.argmax(np.where(open_, residual, -np.inf), axis=1)
        height = np.sqrt(np.where(active, residual[rows_at, pivot], 1.0))
        column = np.where((~done & active[:, None]), a[rows_at, :, pivot] / height[:, None], 0.0)
        done[rows_at[active], pivot[active]] = True
        column = np.where(done, 0.0, column)
        a -= column[:, :, None] * column[:, None, :]
    residual = np.diagonal(a, axis1=1, axis2=2)
    merged = ~done & (own > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.clip(residual / own, 0.0, MERGE_CUTOFF)
    out[:, index] = np.where(merged, ratio, np.nan)
    return out


def lifted(c, residuals):
    """``c`` with every merged kinked field's variance raised by :data:`TIE_LIFT` of itself."""
    c = np.array(c, dtype=float, copy=True)
    rows, fields = np.nonzero(np.isfinite(residuals))
    c[rows, fields, fields] *= 1.0 + TIE_LIFT
    return c


def tie_errors(evaluate, c, kinked, values, errors):
    """The stated errors of rows ``values`` (``errors``) at covariances ``c``, raised by what
    the factor's merges drop (module docstring).

    Parameters
    ----------
    evaluate : callable
        ``evaluate(rows, c_rows) -> (values, errors)``: the rows of index ``rows`` again, at
        the covariances ``c_rows``.
    c : numpy.ndarray, shape (rows, d, d)
    kinked : sequence of bool, length d
    values, errors : numpy.ndarray, shape (rows,) or (rows, outputs)

    Returns
    -------
    numpy.ndarray, the shape of ``errors``
    """
    residuals = merged_residuals(c, kinked)
    ties = np.flatnonzero(np.nanmax(np.where(np.isfinite(residuals), residuals, -1.0),
                                    axis=1) > TIE_ROUNDING)
    if ties.size == 0:
        return errors
    errors = np.array(errors, dtype=float, copy=True)
    largest = np.nanmax(residuals[ties], axis=1)
    moved, moved_errors = evaluate(ties, lifted(c[ties], residuals[ties]))
    change = np.abs(moved - values[ties]) + moved_errors
    root = np.sqrt(largest)
    scale = TIE_SAFETY * root / (np.sqrt(largest + TIE_LIFT) - root)
    errors[ties] += scale.reshape((-1,) + (1,) * (change.ndim - 1)) * change
    return errors
