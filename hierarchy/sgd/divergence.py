"""When an SGD run has diverged: the first non-finite or exploding entry."""

import numpy as np

from hierarchy.core.errors import HierarchyError

#: A moment or pre-activation above this magnitude (or a non-finite one) counts as divergence.
DIVERGENCE_THRESHOLD = 1e12


def divergence(values, labels=None, quantity="moment", threshold=DIVERGENCE_THRESHOLD):
    """Whether an SGD quantity has diverged, and which entry did.

    Parameters
    ----------
    values : array_like
        Recorded moments (one per word) or a step's pre-activations ``G``.
    labels : sequence of str, optional
        Names of the entries of ``values`` (the word labels), for the report.
    quantity : str
        What ``values`` is, for the report.
    threshold : float
        Entries above this magnitude count as exploded (:data:`DIVERGENCE_THRESHOLD`).

    Returns
    -------
    (str, float) or None
        ``None`` when every entry is finite and at most ``threshold`` in magnitude; else the
        first bad entry (non-finite first, then the largest) as ``(description, value)``.
        Non-finite weights show up here too: they make ``G`` (and the moments) non-finite.
    """
    flat = np.asarray(values, dtype=float).ravel()
    if flat.size == 0 or np.max(np.abs(flat)) <= threshold:  # NaN fails the comparison
        return None
    finite = np.isfinite(flat)
    index = int(np.argmin(finite)) if not finite.all() else int(np.argmax(np.abs(flat)))
    name = quantity if labels is None else f"{quantity} {labels[index]}"
    value = flat[index]
    what = "non-finite" if not np.isfinite(value) else f"above {threshold:g} in magnitude"
    return f"{name} = {value:.6g} ({what})", value


class DivergedError(HierarchyError):
    """SGD diverged where no partial result file can hold the rows (a study job): exit 1.

    The command line reports it in one line, like bad input, but with
    :attr:`exit_status` 1 (a failed run), not 2.
    """

    exit_status = 1
