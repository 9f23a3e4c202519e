"""One result type for every trajectory the package produces.

Whatever made it (the compiled hierarchy, a numpy field, an exact matrix flow, an SGD run, a
summary-statistics ODE), a trajectory is the same object: output times ``t``, states ``y``
(one row per time, one column per label), a status from :class:`Status`, and a message.
Producer-specific figures live in two dictionaries, so that nothing needs a subclass:

- ``columns``: arrays with one entry per output time (SGD's ``steps``, ``loss``,
  ``samples``; the two-timescale ``m``), readable as attributes (``trajectory.loss``);
- ``info``: everything else (``method``, ``nfev``, ``wall_s``, ``matrices`` ...), also
  readable as attributes.

``trajectory["1.1.2"]`` finds a column by label through ``index``, the producer's canonical
look-up (so any representative of a word works, as with ``Solver.index``), and falls back
to the exact label.
"""

import dataclasses
import enum
from typing import Callable, Optional

import numpy as np

from hierarchy.core.errors import HierarchyError


class Status(enum.IntEnum):
    """Why a trajectory ends where it ends."""

    COMPLETE = 0      # reached the end of the time span
    BLOWUP = 1        # stopped by the blow-up guard (a state non-finite or too large)
    INTERRUPTED = 2   # Ctrl-C / SIGTERM; the rows so far are kept
    FAILED = -1       # the integrator (or stepper) failed


@dataclasses.dataclass
class Trajectory:
    """A trajectory: times, states and why it ended.

    Attributes
    ----------
    t : numpy.ndarray, shape (T,)
        Output times.
    y : numpy.ndarray, shape (T, n)
        States, columns ordered like ``labels``.
    labels : list of str
    status : Status
    message : str
    t_stop : float
        Time where the run stopped (for a blow-up: the first bad time found by bisection);
        with given output times it is usually not among ``t``.
    y_stop : numpy.ndarray or None
        State at ``t_stop``.
    diverged_labels : list of str
        Labels that were non-finite or above the guard when the run stopped.
    columns : dict of str -> numpy.ndarray
        Extra per-time arrays (first axis of length ``T``), readable as attributes.
    info : dict
        Producer figures (``method``, ``nfev``, ``njev``, ``nlu``, ``wall_s``, ...),
        readable as attributes.
    index : callable, optional
        Canonical label -> column look-up of the producer.
    """

    t: np.ndarray
    y: np.ndarray
    labels: list
    status: Status = Status.COMPLETE
    message: str = ""
    t_stop: float = float("nan")
    y_stop: Optional[np.ndarray] = None
    diverged_labels: list = dataclasses.field(default_factory=list)
    columns: dict = dataclasses.field(default_factory=dict)
    info: dict = dataclasses.field(default_factory=dict)
    index: Optional[Callable[[str], int]] = dataclasses.field(default=None, repr=False,
                                                            compare=False)

    def __post_init__(self):
        self.status = Status(int(self.status))

    @property
    def success(self):
        """True when the trajectory reached the end of its span."""
        return self.status == Status.COMPLETE

    @property
    def complete(self):
        return self.success

    @property
    def t_recorded(self):
        """The last output time (None when no row was recorded)."""
        return float(self.t[-1]) if len(self.t) else None

    @property
    def t_reached(self):
        """How far the run got: an interrupted run's ``t_stop`` (the integrator is usually
        past the last output time then), else the last output time (None without rows)."""
        if self.status == Status.INTERRUPTED and np.isfinite(self.t_stop):
            recorded = self.t_recorded
            return float(self.t_stop) if recorded is None else max(float(self.t_stop), recorded)
        return self.t_recorded

    @property
    def mu(self):
        """The states under the attention family's name (trace moments ``μ``)."""
        return self.y

    @property
    def u(self):
        """The states under the summary-statistics name (``u``)."""
        return self.y

    @property
    def mu_stop(self):
        return self.y_stop

    def __len__(self):
        return len(self.t)

    def __getattr__(self, name):
        # only reached for names that are not fields: look in columns, then info
        if name.startswith("__"):
            raise AttributeError(name)
        for table in ("columns", "info"):
            values = self.__dict__.get(table, {})
            if name in values:
                return values[name]
        raise AttributeError(f"Trajectory has no field, column or info {name!r}")

    def column(self, label):
        """Position of ``label`` among the columns (canonical look-up first).

        When neither finds it, the canonical look-up's own error is raised (it says why,
        e.g. which words the system holds), else a generic one.
        """
        refused = None
        if self.index is not None:
            try:
                return int(self.index(label))
            except HierarchyError as error:
                refused = error
        try:
            return self.labels.index(label)
        except ValueError:
            if refused is not None:
                raise refused from None
            raise HierarchyError(f"{label!r} is not a label of this trajectory",
                                 field="label") from None

    def __getitem__(self, label):
        """The trajectory of one label: ``y[:, column(label)]``."""
        return self.y[:, self.column(label)]

    def plot(self, labels=None, path=None, title=""):
        """A figure of the statistics by group against time, and a panel per one-dimensional
        column of real numbers (``eg``; an ensemble's counts, ``alive``, ``steps``, are
        integers and left out); ``labels`` picks some statistics; ``path`` also saves it
        (PNG).

        Returns
        -------
        matplotlib.figure.Figure
        """
        from hierarchy.core.plotting import make_statistics_figure, save_figure

        labels = list(self.labels) if labels is None else [str(label) for label in labels]
        values = np.column_stack([self[label] for label in labels]) if labels else \
            np.empty((len(self.t), 0))
        panels = [(name, {name: values_}) for name, values_ in self.columns.items()
                  if np.ndim(values_) == 1 and np.issubdtype(np.asarray(values_).dtype,
                                                             np.floating)]
        fig = make_statistics_figure(self.t, values, labels, title or self.message,
                                     math_label=self.info.get("math_label", str),
                                     time_label=self.info.get("time_label", "t"),
                                     extra_panels=panels)
        if path is not None:
            save_figure(fig, path)
        return fig

    def rows(self, count):
        """The first ``count`` rows (times, states and columns), other fields kept."""
        return dataclasses.replace(self, t=self.t[:count], y=self.y[:count],
                                   columns={k: v[:count] for k, v in self.columns.items()})
