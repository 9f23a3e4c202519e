"""What each command does with a validated config, shared by the CLI and the Python API.

``hierarchy solve|sgd|fixed-points|show --config`` (:mod:`hierarchy.cli.commands`) and
:class:`hierarchy.api.Model` both call these functions, so a config gives the same files,
figures and errors either way; the CLI adds only the printing and the exit statuses.

- :func:`solve`: the family's ``run_solve`` (``result.npz``, ``result.json``,
  ``observables.png``);
- :func:`sgd`: the family's ``run_sgd``, then ``sgd.png`` and the table of an ensemble;
- :func:`fixed_points`: the family's points, ``fixed_points.json`` and ``fixed_points.png``,
  and ``observables.png`` redrawn with the points marked when a solve is in the folder;
- :func:`equations`: the family's derived equations (``show --config``);
- :func:`network_form`: a hand-built mixture config as the ``network`` config of the same
  model (``show --config --as-network``, ``Model.as_network``).
"""

import pathlib

from hierarchy.core import registry, run_report
from hierarchy.core.errors import HierarchyError
from hierarchy.core.fixed_point_report import write_points
from hierarchy.core.io import holds_study, interrupted_run
from hierarchy.core.summary_table import settings_title


#: how a refusal names the options, by caller: the command line's flags, or the Python API's
#: keyword arguments (:class:`hierarchy.api.Model`)
SPELLINGS = {
    "cli": {"resume": "`hierarchy {command} --resume`", "overwrite": "--overwrite",
            "out": "--out", "format": "--format", "resume_switch": "--resume",
            "as_network": "--as-network"},
    "api": {"resume": "`Model.{command}(out, resume=True)`", "overwrite": "overwrite=True",
            "out": "out", "format": "format", "resume_switch": "resume=True",
            "as_network": "Model.as_network()"},
}


def check_folder(out_dir, command, *, resume=False, overwrite=False, spelling="cli"):
    """Refuse to write over an interrupted run's checkpoint without ``resume`` (of the same
    command) or ``overwrite``: a plain rerun would silently delete it (one line, exit 2).

    Parameters
    ----------
    spelling : {"cli", "api"}
        How the refusal names the options (:data:`SPELLINGS`).

    Raises
    ------
    HierarchyError
        ``resume`` with ``overwrite`` (the one continues the run in ``out_dir``, the other
        deletes it first); ``out_dir`` holds an interrupted run
        (:func:`hierarchy.core.io.interrupted_run`),
        naming the way to resume it (the same command) and to overwrite it; or, for another
        command than ``study``, a study (finished or not: :func:`hierarchy.core.io.holds_study`),
        whose files the command would leave beside its own (``overwrite`` deletes them first,
        :func:`hierarchy.study.store.clear_study`). A study's own folder is left to the
        study, which refuses it itself.
    """
    words = SPELLINGS[spelling]
    if resume and overwrite:
        raise HierarchyError(f"{words['resume_switch']} and {words['overwrite']} exclude each "
                             f"other: {words['resume_switch']} continues the run in "
                             f"{words['out']}, {words['overwrite']} deletes it first",
                             field=words["overwrite"])
    if command != "study" and not resume and holds_study(out_dir):
        if overwrite:
            from hierarchy.study.store import clear_study  # noqa: PLC0415  (a study's folder only)
            clear_study(pathlib.Path(out_dir))
            return
        raise HierarchyError(f"{words['out']} {out_dir} holds a `hierarchy study` (its job files "
                             f"and report, which this command would leave beside its own); "
                             f"replace it with {words['overwrite']}, or choose another "
                             f"{words['out']}", field=words["out"])
    if resume or overwrite:
        return
    holder = interrupted_run(out_dir)
    if holder is None or (command == "study" and holder == "study"):
        return
    how = (f"continue it with {words['resume'].format(command=command)}, "
           if holder == command else "")
    raise HierarchyError(f"{words['out']} {out_dir} holds an interrupted `hierarchy {holder}` "
                         f"run (its checkpoint); {how}replace it with {words['overwrite']}, or "
                         f"choose another {words['out']}", field=words["out"])


def solve(config, out_dir, progress=None, *, overwrite=False, spelling="cli"):
    """Solve the config's ODE into ``out_dir``; return the family's summary (a dict).

    ``out_dir`` holding an interrupted run is refused unless ``overwrite``
    (:func:`check_folder`, whose refusal names the options as ``spelling`` does)."""
    check_folder(out_dir, "solve", overwrite=overwrite, spelling=spelling)
    return registry.family_of(config).run_solve(config, out_dir, progress) or {}


def sgd(config, out_dir, *, resume=False, overwrite=False, progress=None, spelling="cli"):
    """Run the config's SGD into ``out_dir`` (an interrupted run there: continued with
    ``resume``, replaced with ``overwrite``, else refused, :func:`check_folder`, whose
    refusal names the options as ``spelling`` does).

    Returns
    -------
    (dict, str or None)
        The family's summary, and the table of an ensemble that finished (``sgd.png`` is
        drawn then); None for a run that stopped early or draws its own plot.
    """
    check_folder(out_dir, "sgd", resume=resume, overwrite=overwrite, spelling=spelling)
    summary = registry.family_of(config).run_sgd(config, out_dir, resume=resume,
                                                 progress=progress)
    table = None
    if isinstance(summary, dict) and not summary.get("diverged") and \
            summary.get("complete") is not False:
        table = run_report.report_ensemble(config, out_dir)
    return summary, table


def fixed_points(config, out_dir, progress=None):
    """The config's classified fixed points, written to ``out_dir``.

    Returns
    -------
    list of dict
        The records of ``fixed_points.json``
        (:func:`hierarchy.core.fixed_point_report.point_record`).
    """
    points = registry.family_of(config).fixed_points(config, progress=progress)
    record = write_points(out_dir, points, settings_title(config, "fixed points"))
    run_report.replot_solved(out_dir)
    return record


def equations(config, format="text", spelling="cli"):
    """The derived equations of the config's family (``hierarchy show --config``).

    Raises
    ------
    HierarchyError
        A ``format`` the family does not show (naming ``--format``, or ``format`` as the
        Python API spells it: :data:`SPELLINGS`).
    """
    family = registry.family_of(config)
    if format not in family.show_formats:
        name = SPELLINGS[spelling]["format"]
        raise HierarchyError(f"{name} {format!r}: model.family = {family.name!r} shows its "
                             f"equations as {' or '.join(family.show_formats)}", field=name)
    return family.show(config) if format == "text" else family.show(config, format=format)


def network_form(config, spelling="cli"):
    """The ``network`` config document of a hand-built mixture config (``gmm-binary``,
    ``gmm-xor``, ``gmm-multiclass``): the same model, whose field at finite ``snr`` is the
    compiled joint engine's, certified where a cluster has at most four student fields
    (:func:`hierarchy.models.network.presets.preset_config`).

    Raises
    ------
    HierarchyError
        Another family (naming ``--as-network``, or ``Model.as_network()``: :data:`SPELLINGS`).
    """
    from hierarchy.models.network import presets  # noqa: PLC0415  (lazy: sympy-free, small)
    family = config["model"]["family"]
    if family not in presets.PRESETS:
        name = SPELLINGS[spelling]["as_network"]
        raise HierarchyError(f"{name}: model.family = {family!r} has no network form; allowed: "
                             f"{' | '.join(presets.PRESETS)}", field=name)
    return presets.preset_config(family, config)
