"""The ``[spectra]`` table: which spectra ``hierarchy sgd`` records along the run.

A family that supports the spectral diagnostics (``gmm-multiclass``, ``gmm-xor``) merges
:data:`DEFAULTS` into its ``defaults`` and :data:`KEY_HELP` into its ``key_help``, and calls
:func:`validate_spectra` from its ``validate``. Recording is on when ``times`` is not empty.

Decisions (the interface leaves them open):

- the spectra are those of run 0 of the ensemble (``spectra.npz`` has no run axis);
- ``test_size = 0`` (the default) means ``M̃ = round(test_ratio × d)``; a positive
  ``test_size`` wins over ``test_ratio``;
- ``data = "train"`` uses the ``M̃`` samples SGD consumed last before the snapshot (fewer at
  the first snapshots if fewer have been used): online SGD's training set is the stream
  itself, and keeping all of it would cost ``steps × d`` doubles;
- ``top = "auto"`` is each block's contract rank: ``k`` for the ``k``-GMM class blocks, 2 for
  the XOR ``W_i`` blocks, 4 for the XOR ``v`` block; an integer is used for every block
  (capped at the block's size).
"""

import math

from hierarchy.config import fields
from hierarchy.core.errors import HierarchyError

DATA = ("test", "train")
#: spectra times are told apart to 12 decimals (the SGD loop's recording grid,
#: :func:`hierarchy.spectra.job.recording_times`): closer ones would be one snapshot
TIME_RESOLUTION = 1e-12
#: largest ``M̃ × d`` (doubles of the sample matrix held for a snapshot)
MAX_SAMPLE_MATRIX = 60_000_000

DEFAULTS = {"times": [], "test_size": 0, "test_ratio": 10.0, "data": "test", "top": "auto",
            "blocks": "all", "seed": 1}

KEY_HELP = {
    "spectra.times": ("Rescaled times t = l delta at which `hierarchy sgd` records the Hessian "
                      "and G spectra of run 0, each at the SGD step nearest it (empty: no "
                      "recording).",
                      "increasing list of numbers in [0, solve.t_final], on distinct SGD steps "
                      '(with data = "train": from step 1 on)'),
    "spectra.test_size": ("Samples M~ behind each empirical matrix; 0: test_ratio x d.",
                          f"integer >= 0, with M~ x d at most {MAX_SAMPLE_MATRIX:.0e} doubles"),
    "spectra.test_ratio": ("M~ / d when test_size is 0 (the outliers separate from the bulk "
                           "only for M~ of tens of d).",
                           f"number > 0, with M~ x d at most {MAX_SAMPLE_MATRIX:.0e} doubles"),
    "spectra.data": ("`test`: a fixed independent test set; `train`: the last M~ samples SGD "
                     "used.", "test | train"),
    "spectra.top": ("Eigenpairs per block; `auto`: the rank of its theorem (k for a class "
                    "block, 2 for W_i, 4 for v); a number above a block's size takes all of "
                    "its eigenpairs.",
                    '"auto" or integer >= 1'),
    "spectra.blocks": ("Blocks to record: `all`, or a list of names (x1 .. xk; W1 .. WK, v).",
                       '"all" or list of block names'),
    "spectra.seed": ("Seed of the test set.", "integer >= 0"),
}


def validate_spectra(table, *, t_final, dimension, block_names, step_time=None):
    """Check and normalise a ``[spectra]`` table (in place) before any work.

    Parameters
    ----------
    table : dict
        The merged ``[spectra]`` table.
    t_final : float
        ``solve.t_final`` (the SGD horizon).
    dimension : int
        ``sgd.dimension``.
    block_names : sequence of str
        The family's block names.
    step_time : float, optional
        The time one SGD step advances (the family's ``time_per_step``): a snapshot is taken
        at the step nearest each time, so two times at one step are refused, and with
        ``data = "train"`` a time at step 0 (no sample used yet).
    """
    times = fields.float_list(table, "spectra", "times")
    if any(t < 0 or t > t_final for t in times) or any(b <= a for a, b in zip(times, times[1:])):
        raise HierarchyError(f"spectra.times must be increasing numbers in [0, {t_final:g}] "
                             "(solve.t_final)", field="spectra.times")
    close = [(a, b) for a, b in zip(times, times[1:])
             if b - a < TIME_RESOLUTION or round(a, 12) == round(b, 12)]
    if close:
        a, b = close[0]
        raise HierarchyError(f"spectra.times {a!r} and {b!r} are closer than "
                             f"{TIME_RESOLUTION:g}, the resolution of the recording times; "
                             "give times at least that far apart", field="spectra.times")
    table["times"] = times
    table["test_size"] = fields.integer(table, "spectra", "test_size", 0)
    table["test_ratio"] = fields.real(table, "spectra", "test_ratio", 0.0, True)
    table["data"] = fields.choice(table, "spectra", "data", DATA)
    if table["data"] == "train" and times and times[0] == 0:
        raise HierarchyError('spectra.times: data = "train" takes the samples SGD used before '
                             "each time, and at t = 0 it has used none; give times > 0 or "
                             'data = "test"', field="spectra.times")
    if step_time is not None:
        _check_steps(times, float(step_time), table["data"])
    table["seed"] = fields.integer(table, "spectra", "seed", 0)
    table["top"] = _top(table["top"])
    table["blocks"] = _blocks(table["blocks"], block_names)
    size = sample_count(table, dimension)
    if times and size * dimension > MAX_SAMPLE_MATRIX:  # no snapshot, no test set to hold
        key = "spectra.test_size" if table["test_size"] > 0 else "spectra.test_ratio"
        shown = size if size < 10**12 else f"{float(size):.3g}"  # not a 300-digit integer
        raise HierarchyError(f"{key}: M~ x d = {shown} x {dimension} exceeds "
                             f"{MAX_SAMPLE_MATRIX} doubles; allowed: M~ <= "
                             f"{MAX_SAMPLE_MATRIX // dimension} at d = {dimension}", field=key)
    return table


def _check_steps(times, step_time, data):
    """The snapshots are taken at the SGD step nearest each time (``rint(t / delta)``): refuse
    two times at one step (one snapshot recorded twice under two times), and with
    ``data = "train"`` a time at step 0."""
    steps = [int(round(t / step_time)) for t in times]
    for (a, b), (i, j) in zip(zip(times, times[1:]), zip(steps, steps[1:])):
        if i == j:
            raise HierarchyError(f"spectra.times {a!r} and {b!r} fall on the same SGD step "
                                 f"(one step is {step_time:.6g} of time): the snapshot would "
                                 "be one; give times at least one step apart",
                                 field="spectra.times")
    if data == "train" and steps and steps[0] == 0:
        raise HierarchyError(f'spectra.times: data = "train" takes the samples SGD used before '
                             f"each time, and {times[0]!r} is step 0 (one step is "
                             f"{step_time:.6g} of time), where it has used none; give times of "
                             'at least one step, or data = "test"', field="spectra.times")


def sample_count(table, dimension):
    """``M̃``: ``test_size``, or ``round(test_ratio × d)`` when it is 0 (at least 1)."""
    if table["test_size"] > 0:
        return int(table["test_size"])
    return max(1, int(math.floor(table["test_ratio"] * dimension + 0.5)))


def _top(value):
    if value == "auto":
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not \
            1 <= value <= fields.MAX_INTEGER:
        raise HierarchyError(f'spectra.top must be "auto" or an integer in 1..2**63 - 1; got '
                             f'{fields.show(value)}', field="spectra.top")
    return value


def _blocks(value, names):
    if value == "all":
        return list(names)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise HierarchyError('spectra.blocks must be "all" or a non-empty list of block names',
                             field="spectra.blocks")
    unknown = [v for v in value if v not in names]
    if unknown:
        raise HierarchyError(f"spectra.blocks: {unknown[0]!r} is not a block; allowed: "
                             f"{', '.join(names)}", field="spectra.blocks")
    return list(dict.fromkeys(value))
