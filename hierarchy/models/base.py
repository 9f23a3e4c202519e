"""The contract of a model family.

A model family is everything the pipeline needs to know about one kind of model; the shared
layers (``jit``, ``ode``, ``sgd``, ``study``, ``config``, ``cli``) call only the methods
below and never test which family they hold. A new family subclasses :class:`ModelFamily`
in its own folder under ``hierarchy/models/`` and is added to
:data:`hierarchy.core.registry.FAMILIES` with one line (``docs/architecture.md``).

The contract, in the order the pipeline uses it:

1. ``name`` and ``defaults``: the ``[model] family`` value and the config tables the family
   adds or changes (merged over the shared defaults of ``hierarchy.config``).
2. ``validate(config, sections=None)``: check the family's keys of an already merged config
   (only the tables in ``sections`` when given) and return it normalised; raise
   :class:`~hierarchy.core.errors.HierarchyError` naming the field. Cheap: it runs before
   any expensive work. ``path_fields`` names the ``(table, key)`` pairs holding file paths
   (resolved against the config file's folder); ``read_only_when`` the keys read only where
   another key has some value (written elsewhere, they are refused); ``key_help`` and ``section_help`` document
   the family's keys in ``docs/config.md``; ``resource_keys`` names the keys that set the
   size of a run (what an out-of-memory or resource error tells the user to lower; see
   :mod:`hierarchy.core.resources`).
3. ``build_arguments(config)``: the one place a config becomes the arguments of
   ``system`` (a dict; also what the build cache keys on).
4. ``system(config)``: the compiled (or numpy) right-hand side, an object with ``labels``,
   ``index(label)`` and ``rhs(y, t)`` (and optionally ``jacobian(y, t)``); see
   :mod:`hierarchy.ode.system`.
5. ``initial_state(config, system)``: the starting state, ordered like ``system.labels``.
6. ``time_per_step(config)``: the ODE time one SGD step advances (the time map).
7. ``sgd_problem(config)``: the SGD setup of :mod:`hierarchy.sgd.job` (problem, recorded
   words and labels, initial matrices; see :mod:`hierarchy.sgd.simulate` for what the loop
   asks of a problem), used by the default ``run_sgd(config, out_dir, resume=, progress=)``;
   a family whose SGD is an ensemble of its own (many runs at once) overrides ``run_sgd``.
8. ``run_solve(config, out_dir, progress)``: the ``hierarchy solve`` job. The default
   integrates ``system`` from ``initial_state`` over the ``[solve]`` output times with the
   shared integrate loop and writes ``result.npz``/``result.json``; a family with more to
   say (degree ladders, extrapolation) overrides it.
9. ``math_label(label)`` and ``time_label(config)``: how a label and the time axis are
   typeset in plots (default: the label itself, and ``"t"``).
10. ``format_summary(summary)`` and ``horizon_line(summary)``: the text ``hierarchy solve``
    prints after a solve (default: the final value of each label; a summary whose
    ``beyond_horizon`` is true must also say where the validity horizon is).
11. ``study_model()``: what ``hierarchy study`` computes for this family: an object with
    ``DEFAULT_STUDY``, ``BLOWUP``, ``check_sgd_horizon(config)``,
    ``study_observables(config)`` and the jobs ``degree_job``, ``flow_job``, ``sgd_job`` (see
    :mod:`hierarchy.models.attention.study_jobs`).
12. ``fixed_points(config, progress=None)``: the fixed points of the family's ODE, a list of
    ``{"u": {label: value}, "stable": bool, "eigenvalues": [...]}`` (``hierarchy
    fixed-points``).
13. ``show(config)``: the family's derived equations as text (``hierarchy show --config``);
    a family listing more formats in ``show_formats`` also takes ``show(config, format=F)``.
14. ``paired_odes(config, labels, starts, times)``: the family's ODE from each of the
    ``starts`` ``(runs, k)`` (ordered like ``labels``, the statistics of its SGD runs), an
    array ``(runs, T, k)`` (NaN past a stop): the paired references of ``hierarchy sgd`` and
    ``hierarchy study`` (:mod:`hierarchy.sgd.paired`). Default None: no paired comparison.
15. ``unit_matching(config)``: None (default), or the matching of a run's interchangeable
    units applied before any average over runs (``permutations(labels, u_runs)``,
    ``permute(labels, values, permutations)``, ``description``; the ``network`` family's
    :class:`hierarchy.models.network.matching.UnitMatching`).

A contract item a family does not provide raises, by default, a one-line
:class:`~hierarchy.core.errors.HierarchyError` naming ``model.family`` (exit status 2 in the CLI).
"""

import numpy as np

from hierarchy.core.certification import certification_line
from hierarchy.core.errors import HierarchyError
from hierarchy.core.summary_table import final_table, significant
from hierarchy.ode.default_job import solve_and_write
from hierarchy.sgd import job as sgd_job


class ModelFamily:
    """Base class of the model families (see the module docstring for the contract)."""

    #: 1. the ``[model] family`` value
    name = ""
    #: 1. config tables this family adds or changes, e.g. ``{"model": {...}}``
    defaults = {}
    #: 8. name of the states' array in ``result.npz`` (attention ``mu``, summary ``u``)
    state_name = "y"
    #: 2. ``(table, key)`` pairs holding file paths, resolved against the config's folder
    path_fields = ()
    #: 2. keys a config may write only where another key makes them read:
    #: ``"table.key" -> (("table.other", (value, ...)), ...)``. A written key none of whose
    #: conditions holds would be ignored, and is refused
    #: (:func:`hierarchy.config.loader.check_unread_keys`)
    read_only_when = {}
    #: 2. ``docs/config.md``: ``"table.key" -> (what it does, what is allowed)``
    key_help = {}
    #: 2. ``docs/config.md``: ``"table" -> one line about the table``
    section_help = {}
    #: 2. the keys that set a run's size, named by resource and out-of-memory errors
    resource_keys = ("solve.points",)
    #: 6. the key of ``time_per_step(config) x sgd.dimension`` named by the SGD step-count check
    #: (:func:`hierarchy.sgd.ensemble.check_step_count`); None when it is no config value
    step_count_key = "sgd.step"

    # 2
    def validate(self, config, sections=None):
        """Check this family's keys of a merged config (only ``sections`` when given)."""
        return config

    # 3
    def build_arguments(self, config):
        """The arguments of :meth:`system` taken from a config (a JSON-able dict)."""
        raise self.unsupported("build_arguments")

    # 4
    def system(self, config):
        """The right-hand side of the family's ODE for ``config``."""
        raise self.unsupported("system")

    # 5
    def initial_state(self, config, system):
        """The starting state, ordered like ``system.labels``."""
        raise self.unsupported("initial_state")

    # 6
    def time_per_step(self, config):
        """ODE time advanced by one SGD step."""
        raise self.unsupported("time_per_step")

    # 7
    def sgd_problem(self, config):
        """The SGD problem (see :mod:`hierarchy.sgd`)."""
        raise self.unsupported("sgd_problem")

    def run_sgd(self, config, out_dir, *, resume=False, progress=None):
        """``hierarchy sgd``: the shared SGD job on :meth:`sgd_problem`; return a summary."""
        return sgd_job.run_sgd(config, out_dir, resume=resume, progress=progress)

    # 8
    def run_solve(self, config, out_dir, progress):
        """``hierarchy solve``: integrate and write the result files; return a summary."""
        return solve_and_write(self, config, out_dir, progress)

    # 9
    def math_label(self, label):
        """Plot label of a state label."""
        return label

    def time_label(self, config):
        """Axis label of the family's time."""
        return "t"

    # 10
    def format_summary(self, summary):
        """The lines ``hierarchy solve`` prints: the final values, by group when there are many
        (:func:`hierarchy.core.summary_table.final_table`), and the certification line of a
        solve the default job checked (:func:`hierarchy.ode.default_job.write_certified`)."""
        final = summary.get("final", {})
        head = f"final values at t = {significant(summary.get('t_recorded', summary.get('t_reached', float('nan'))), 6)}"
        table = final_table(list(final), list(final.values()), head)
        if isinstance(summary.get("certification"), dict):  # the default job's check
            return f"{table}\n{certification_line(summary['certification'])}"
        return table

    def horizon_line(self, summary):
        """Where the validity horizon of a solve is (for a ``beyond_horizon`` summary): the
        certification line of a solve checked by the default job."""
        if isinstance(summary.get("certification"), dict):
            return certification_line(summary["certification"])
        return (f"beyond the validity horizon from t = {summary.get('beyond_from', 0.0):.6g}: "
                "the numbers past it are written but not certified")

    # 11
    def study_model(self):
        """The family's study computations (see the module docstring)."""
        raise self.unsupported("a study (hierarchy study)")

    # 12
    def fixed_points(self, config, progress=None):
        """The classified fixed points of the family's ODE (see the module docstring)."""
        raise self.unsupported("fixed points (hierarchy fixed-points)")

    # 13
    #: the ``--format`` values of ``hierarchy show --config`` (:meth:`show`)
    show_formats = ("text",)

    def show(self, config):
        """The family's derived equations as text."""
        raise self.unsupported("equations for a config (hierarchy show --config)")

    # 14
    def paired_odes(self, config, labels, starts, times):
        """``(runs, T, k)``: the ODE from each start (see the module docstring), or None."""
        return None

    # 15
    def unit_matching(self, config):
        """The matching of a run's interchangeable units (see the module docstring), or None."""
        return None

    # ------------------------------------------------------------------ helpers

    def output_times(self, config):
        """The ``[solve]`` output times: ``points`` evenly spaced on ``[0, t_final]``."""
        solve = config["solve"]
        return np.linspace(0.0, float(solve["t_final"]), int(solve["points"]))

    def unsupported(self, what):
        """The one-line error (naming ``model.family``) of a contract item not provided."""
        return HierarchyError(f"model.family = {self.name!r} does not provide {what}",
                              field="model.family")

    def check(self, condition, message, field):
        """Raise a one-line :class:`HierarchyError` naming ``field`` unless ``condition``."""
        if not condition:
            raise HierarchyError(message, field=field)
