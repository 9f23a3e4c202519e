"""One Python object for every model family: :class:`Model`.

A :class:`Model` holds a validated config, whatever the family (``attention``,
``spiked-pca``, ``gmm-binary``, ``gmm-xor``, ``gmm-multiclass``, ``network``), and runs what
the commands run, through the same functions (:mod:`hierarchy.actions`) and the same
validation (:func:`hierarchy.config.loader.load_document`): a bad value raises the
:class:`~hierarchy.core.errors.HierarchyError` whose one line ``hierarchy`` would print.

>>> model = Model.from_toml("tools/configs/committee_erf.toml")          # doctest: +SKIP
>>> sol = model.solve(t_final=300)       # a Trajectory: sol.t, sol["Q1.1"], sol.eg, sol.plot()
>>> runs = model.sgd(dimension=1000, runs=20, seed=0)
>>> points = model.fixed_points()
>>> print(model.equations())

Each run writes its files where ``hierarchy`` would (``result.npz``, ``observables.png``,
``sgd.png``, ``fixed_points.json`` ...): into ``out=`` when given, else into a temporary
folder that is removed once the results are read back.
"""

import contextlib
import copy
import os
import pathlib
import tempfile
import warnings

import numpy as np

from hierarchy import actions
from hierarchy.config import fields, loader
from hierarchy.config.documents import MAX_NESTING
from hierarchy.config.fields import check_is_table
from hierarchy.core import registry, run_report
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import check_out_dir, read_result
from hierarchy.core.progress import Progress
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.sgd.ensemble import resume_line


class Model:
    """A model of any family, from a config document.

    Parameters
    ----------
    document : dict, optional
        Config tables as in a TOML file (``{"model": {"family": "network", ...}, ...}``).
    family : str, optional
        Shorthand for ``model.family``.
    **tables : dict
        More tables merged over ``document`` (``solve={"t_final": 50}``).

    Raises
    ------
    HierarchyError
        Anything ``hierarchy`` would refuse in the same config (one line naming the field).
    """

    def __init__(self, document=None, *, family=None, **tables):
        document = plain({} if document is None else document, "document")
        check_is_table(document, "document")
        self._document = loader.deep_merge(copy.deepcopy(document), plain_tables(tables))
        if family is not None:
            self._document = loader.deep_merge(self._document, {"model": {"family": family}})
        self._folder = None
        self._config = loader.load_document(self._document)

    @classmethod
    def from_toml(cls, path, **tables):
        """The model of a TOML config file (relative file fields taken from its folder)."""
        check_path(path, "path", "a config file")
        tables = plain_tables(tables)
        model = cls.__new__(cls)
        model._document = loader.deep_merge(loader.read_toml(path), tables)
        model._folder = pathlib.Path(path).resolve().parent
        model._config = loader.load_config(path, tables or None)
        return model

    def with_(self, **tables):
        """A new model with ``tables`` merged over this one's (``with_(sgd={"step": 0.5})``)."""
        model = copy.copy(self)
        model._document = loader.deep_merge(self._document, plain_tables(tables))
        model._config = loader.load_document(model._document, folder=self._folder)
        return model

    @property
    def config(self):
        """The validated config (a copy): every key of the family's defaults present."""
        return copy.deepcopy(self._config)

    @property
    def family(self):
        """The ``model.family`` name."""
        return self._config["model"]["family"]

    def __repr__(self):
        return f"Model(family={self.family!r})"

    # ------------------------------------------------------------------ runs

    def solve(self, out=None, progress=False, *, overwrite=False, **solve):
        """Solve the family's ODE (``hierarchy solve``).

        Parameters
        ----------
        out : path-like, optional
            Folder for the result files and ``observables.png``; default: a temporary one.
        progress : bool
            Show the status line on stderr.
        overwrite : bool
            Replace an interrupted run's checkpoint in ``out`` (``--overwrite``); without it
            such a folder is refused (:class:`~hierarchy.core.errors.HierarchyError`).
        **solve : keys of the ``[solve]`` table (``t_final``, ``points``, ``rtol`` ...)

        Returns
        -------
        Trajectory
            ``t``, ``y`` and ``labels``; ``sol["Q1.1"]``; a family's per-time arrays as
            columns (``sol.eg`` for ``network``); ``info["summary"]`` the printed summary;
            ``status`` not COMPLETE when the solve stopped early (a blow-up).
        """
        check_switches(progress=progress, overwrite=overwrite)
        config = self._merged(solve=solve)
        with _folder(out) as folder:
            summary = actions.solve(config, folder, _reporter(progress), overwrite=overwrite,
                                    spelling="api")
            return _trajectory(folder, config, summary)

    def sgd(self, out=None, progress=False, *, resume=False, overwrite=False, **sgd):
        """Run online SGD (``hierarchy sgd``).

        Parameters
        ----------
        out, progress, overwrite : see :meth:`solve`
        resume : bool
            Continue the interrupted SGD run whose checkpoint is in ``out`` (``--resume``).
        **sgd : keys of the ``[sgd]`` table (``dimension``, ``runs``, ``seed``, ``step`` ...)

        Returns
        -------
        Trajectory
            ``y`` the mean over the runs that stayed finite; the runs themselves as the
            column ``runs`` (times, runs, labels); an ensemble's per-time arrays (``eg``,
            ``eg_runs``) as columns; ``info["summary"]`` and ``info["table"]`` (what
            ``hierarchy sgd`` prints).
        """
        check_switches(progress=progress, resume=resume, overwrite=overwrite)
        config = self._merged(sgd=sgd)
        with _folder(out) as folder:
            summary, table = actions.sgd(config, folder, resume=resume, overwrite=overwrite,
                                         progress=_reporter(progress), spelling="api")
            if resume and not progress and isinstance(summary, dict) \
                    and not summary.get("resumed_from_step"):  # said on stderr with progress
                warnings.warn(resume_line(summary), UserWarning, stacklevel=2)
            trajectory = _trajectory(folder, config, summary)
            trajectory.info["table"] = table
            return trajectory

    def fixed_points(self, out=None, progress=False):
        """The classified fixed points (``hierarchy fixed-points``): a list of dicts with ``u``
        (label -> value), ``stable``, ``eigenvalues`` and what the family adds (``kind``,
        ``eg``, ``escape_eigenvalue``, ``note`` ...)."""
        check_switches(progress=progress)
        with _folder(out) as folder:
            return actions.fixed_points(self._config, folder, _reporter(progress))

    def visits(self, trajectory, points, near=run_report.NEAR):
        """The fixed points ``trajectory`` passes near, in the order of ``points``:
        ``[(point, time of closest approach, distance)]``; near is every statistic within
        ``near`` of the point (or of one of its student permutations), as ``observables.png``
        marks them.

        Raises
        ------
        HierarchyError
            ``trajectory`` is not a Trajectory of this model's family (``field``
            ``trajectory``), ``points`` not a list of fixed points (``points``: the dicts of
            :meth:`fixed_points`), or ``near`` not a positive number (``near``).
        """
        check_visit_arguments(self.family, trajectory, points, near)
        return run_report.visited_points(points, registry.family_of(self._config),
                                         self._config, trajectory, near)

    def equations(self, format="text"):
        """The derived equations (``hierarchy show --config``): ``text`` or a format of the
        family's ``show_formats``."""
        return actions.equations(self._config, format, spelling="api")

    def as_network(self):
        """The ``network`` model of a hand-built mixture (``gmm-binary``, ``gmm-xor``,
        ``gmm-multiclass``; ``hierarchy show --config CONFIG --as-network``): its solve at
        finite ``snr`` is certified where a cluster has at most four student fields."""
        return Model(actions.network_form(self._config, spelling="api"))

    def _merged(self, **tables):
        tables = {name: values for name, values in plain_tables(tables).items() if values}
        if not tables:
            return self.config
        return loader.load_document(self._document, tables, folder=self._folder)


def check_visit_arguments(family, trajectory, points, near):
    """Raise the :meth:`Model.visits` error of a bad argument (see there)."""
    if not isinstance(trajectory, Trajectory):
        raise HierarchyError("trajectory must be a Trajectory (of solve or sgd), got "
                             f"{type(trajectory).__name__}", field="trajectory")
    if trajectory.info.get("family", family) != family:
        raise HierarchyError(f"trajectory must be of this model's family ({family}), "
                             f"got one of {trajectory.info['family']}", field="trajectory")
    if not isinstance(points, (list, tuple)) or not all(
            isinstance(point, dict) and isinstance(point.get("u"), dict) for point in points):
        raise HierarchyError("points must be a list of fixed points (the dicts of "
                             "fixed_points(), each with its 'u')", field="points")
    if isinstance(near, bool) or not isinstance(near, (int, float)) or not near > 0 \
            or not np.isfinite(near):
        raise HierarchyError(f"near must be a positive number, got {near!r}", field="near")


def check_switches(**switches):
    """Refuse a switch (``progress``, ``resume``, ``overwrite``) that is not True or False:
    ``"no"`` would be taken for True."""
    for name, value in switches.items():
        if not isinstance(value, (bool, np.bool_)):
            raise HierarchyError(f"{name} must be True or False, got {value!r}", field=name)


def check_path(path, field, what):
    """Refuse a path (to ``what``) that is not a ``str`` or an ``os.PathLike`` of one
    (``None``, ``123``, ``b"/tmp/x"``: pathlib raised a TypeError), naming the argument
    ``field``."""
    if isinstance(path, str) or (isinstance(path, os.PathLike)
                                 and isinstance(os.fspath(path), str)):
        return path
    raise HierarchyError(f"{field} must be the path of {what} (a str or pathlib.Path), got "
                         f"{type(path).__name__} {fields.show(path)}", field=field)


def plain_tables(tables):
    """The keyword tables of a call (``solve={...}``), each :func:`plain` (named by its
    keyword, one level below the document)."""
    return {name: plain(values, name, depth=1) for name, values in tables.items()}


def plain(value, field, depth=0):
    """``value`` with every numpy scalar made the Python number it holds (in dicts, lists
    and tuples): a notebook's ``np.int64(1000)`` is the config's ``1000``, as in TOML.

    Raises
    ------
    HierarchyError
        Tables and arrays nested deeper than a config can be
        (:data:`~hierarchy.config.documents.MAX_NESTING`), which a table that holds itself
        always is, naming the argument ``field``.
    """
    if isinstance(value, (dict, list, tuple)) and depth > MAX_NESTING:
        raise HierarchyError(f"{field}: tables or lists nested deeper than {MAX_NESTING} levels "
                             "(or a table that holds itself)", field=field)
    if isinstance(value, dict):
        return {key: plain(item, field, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(item, field, depth + 1) for item in value)
    return value.item() if isinstance(value, np.generic) else value


@contextlib.contextmanager
def _folder(out):
    if out is not None:
        check_path(out, "out", "a folder")
        yield check_out_dir(out, field="out")  # as the command's --out: before any work
        return
    with tempfile.TemporaryDirectory(prefix="hierarchy-") as folder:
        yield pathlib.Path(folder)


def _reporter(progress):
    return Progress() if progress else Progress.quiet()


def _trajectory(folder, config, summary):
    """The Trajectory of the result files in ``folder``."""
    family = registry.family_of(config)
    result = read_result(folder)
    t = np.asarray(result["t"], dtype=float)
    states = result.get(family.state_name)
    if states is None:
        raise HierarchyError(f"{folder}: no {family.state_name!r} array in result.npz",
                             field="out")
    columns = {}
    for name, values in result.items():
        if name in ("t", "labels", family.state_name) or not isinstance(values, np.ndarray):
            continue
        if not runs_first(name):
            if values.ndim >= 1 and values.shape[0] == t.size:
                columns[name] = values
        elif values.ndim >= 2 and values.shape[1] == t.size:   # (runs, times, ...)
            own = name in (f"{family.state_name}_runs", f"{family.state_name}_seeds")
            columns["runs" if own else name] = np.moveaxis(values, 1, 0)
    summary = summary if isinstance(summary, dict) else {}
    status, message = ending(result, summary)
    return Trajectory(t=t, y=np.asarray(states, dtype=float), labels=list(result["labels"]),
                      status=status, message=message, columns=columns,
                      info={"summary": summary, "family": family.name,
                            "time_label": family.time_label(config),
                            "math_label": family.math_label})


#: the arrays of an ensemble's result files whose first axis is the runs (by name: their
#: shapes alone cannot tell when the runs are as many as the times)
RUN_ARRAYS = ("diverged_step", "permutation", "ode_paired", "ode_paired_unmatched")


def runs_first(name):
    """Whether the result array ``name`` has the runs first (``u_runs``, ``eg_runs``,
    ``u_runs_unmatched``, the attention family's ``mu_seeds``, :data:`RUN_ARRAYS`)."""
    return (name in RUN_ARRAYS or name.endswith(("_runs", "_seeds"))
            or name.endswith("_runs_unmatched"))


def ending(result, summary):
    """``(status, message)`` of a result: COMPLETE, else the summary's own (a solve's), else
    BLOWUP with the line of an ensemble's diverged runs, else INTERRUPTED."""
    if result.get("complete", True):
        return Status.COMPLETE, str(summary.get("message", ""))
    if "status" in summary:
        return Status(summary["status"] or Status.INTERRUPTED), str(summary.get("message", ""))
    diverged = summary.get("diverged")
    if isinstance(diverged, dict):
        return Status.BLOWUP, str(diverged.get("message", ""))
    return Status.INTERRUPTED, str(summary.get("message", ""))
