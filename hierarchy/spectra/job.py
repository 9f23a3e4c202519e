"""``hierarchy sgd`` of an ensemble family, with a ``[spectra]`` table: the SGD ensemble,
run 0's spectra, and the spectra predicted from the summary statistics, in ``spectra.npz``.

:func:`run_ensemble` is the ``hierarchy sgd`` of the ensemble families: it hands the shared
job (:func:`hierarchy.sgd.ensemble.run_ensemble_job`: step-count check, checkpoints,
``--resume``, divergence, result files) the family's ``run(times, observer, **loop)`` and,
when ``[spectra] times`` asks for them, the spectral recorder
(:class:`~hierarchy.spectra.recorder.SpectralRecorder`) as the loop's observer, over the
union of the output and spectra times. The family's spectral adapter also provides
``predicted(u0, times, table)``, the population outliers and alignment along the ballistic
ODE from run 0's own initial statistics. A run without spectra removes a ``spectra.npz``
left in the folder by an earlier run, so none is ever stale next to a new ``result.json``.

``spectra.npz`` holds ``t`` (the snapshot times), ``samples_used`` (``M̃`` per snapshot) and,
for each matrix ``hessian``, ``G`` and block ``b``: ``{matrix}_{b}_eigenvalues`` (times x r,
decreasing ``|value|``), ``{matrix}_{b}_alignment`` (times), ``{matrix}_{b}_bulk_edge``
(times), ``{matrix}_{b}_eigenvectors_last`` (the last snapshot's vectors, n x r), and the
predictions ``{matrix}_{b}_outliers_predicted`` (times x r), ``{matrix}_{b}_alignment_predicted``
and ``{matrix}_{b}_bulk_predicted`` (times), and, where the prediction is a quadrature (the
``network`` family), ``{matrix}_{b}_outliers_predicted_error`` (times x r, its standard
error). When run 0 diverged, only the snapshots before
it are there.
"""

import io
import pathlib

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import atomic_write
from hierarchy.sgd.ensemble import run_ensemble_job
from hierarchy.spectra.config import sample_count
from hierarchy.spectra.recorder import SpectralRecorder, inputs_hash
from hierarchy.spectra.snapshot import MATRICES

RESULT = "spectra.npz"


def recording_times(output_times, spectra_times):
    """The SGD loop's times (union), and where the output and spectra times sit in it."""
    union = np.union1d(np.round(output_times, 12), np.round(spectra_times, 12))
    where = {float(t): i for i, t in enumerate(union)}
    outputs = [where[float(t)] for t in np.round(output_times, 12)]
    snapshots = {where[float(t)]: j for j, t in enumerate(np.round(spectra_times, 12))}
    return union, outputs, snapshots


def run_ensemble(config, out_dir, run, output_times, adapter=None, *, state_name="u",
                 resume=False, progress=None, on_finish=None, row_value=None, **summary):
    """A family's ``hierarchy sgd``: the ensemble, with the spectra when ``[spectra] times``
    asks for them; the result files and the summary.

    Parameters
    ----------
    run : callable
        ``run(times, observer=None, **loop)``: the family's SGD loop through
        :func:`hierarchy.sgd.ensemble.simulate_ensemble` (``loop``: ``resume``,
        ``on_checkpoint``, ``checkpoint_every``).
    adapter : object or None
        The family's spectral adapter; None for a family without spectra.
    state_name : str
        The family's name of the run mean in ``result.npz``.
    on_finish : callable, optional
        The family's own ``on_finish(trajectory)`` -> summary entries, merged with the
        spectra's.
    row_value : hierarchy.sgd.ensemble.RowValue, optional
        A value of every run at every output row (the network's ``eg``), computed after SGD
        by :func:`hierarchy.sgd.ensemble.row_value_pass`.
    **summary
        More summary entries (sampler, dimension, ...).

    Returns
    -------
    dict
        The summary written to ``result.json`` (with ``spectra`` when recorded).
    """
    if adapter is None or not config.get("spectra", {}).get("times"):
        def start(resume, state):
            (pathlib.Path(out_dir) / RESULT).unlink(missing_ok=True)  # another run's
            return None
        return run_ensemble_job(config, out_dir, run, output_times, state_name=state_name,
                                observer=start, on_finish=on_finish, row_value=row_value,
                                resume=resume, progress=progress, **summary)
    table = config["spectra"]
    union, outputs, schedule = recording_times(output_times, table["times"])
    samples = sample_count(table, int(config["sgd"]["dimension"]))
    held = {}

    def start(resume, state):
        (pathlib.Path(out_dir) / RESULT).unlink(missing_ok=True)
        held["recorder"] = SpectralRecorder(adapter, table, samples, out_dir,
                                            inputs_hash(config), schedule, resume=resume,
                                            progress=progress)
        return held["recorder"]

    def finish(trajectory):
        recorder = held["recorder"]
        predicted, missing = prediction(adapter, trajectory, table)
        write_spectra(out_dir, table, recorder, predicted)
        recorder.discard_partial()
        report = recorder.report(final=True)
        report["spectra"]["file"] = RESULT
        if missing:
            report["spectra"]["prediction"] = missing
        return {**(on_finish(trajectory) if on_finish is not None else {}), **report}

    return run_ensemble_job(config, out_dir, run, output_times, state_name=state_name,
                            times=union, rows=outputs, observer=start, on_finish=finish,
                            row_value=row_value, resume=resume, progress=progress, **summary)


def prediction(adapter, trajectory, table):
    """``(predicted, why_missing)``: the adapter's prediction from run 0's start, or ``{}``
    and the reason it is missing (run 0 not finite at ``t = 0``, or the ODE of the
    prediction failed: the SGD result and its snapshots are kept all the same)."""
    first = np.asarray(trajectory.columns["u_runs"])[0, 0]
    if not np.all(np.isfinite(first)):
        return {}, "not computed: run 0 is not finite at t = 0"
    try:
        return adapter.predicted(first, np.asarray(table["times"], float), table), None
    except HierarchyError as error:
        return {}, f"not computed: {error}"


def write_spectra(out_dir, table, recorder, predicted):
    """``spectra.npz`` from the recorder's snapshots and the predictions."""
    order = sorted(recorder.snapshots)
    snaps = [recorder.snapshots[i] for i in order]
    arrays = {"t": np.asarray(table["times"], float)[order],
              "samples_used": np.array([s["used"] for s in snaps])}
    keys = [key for key in snaps[0] if isinstance(key, tuple)] if snaps else []
    for matrix, block in keys:
        name = f"{matrix}_{block}"
        entries = [s[(matrix, block)] for s in snaps]
        arrays[name + "_eigenvalues"] = np.array([e["eigenvalues"] for e in entries])
        arrays[name + "_alignment"] = np.array([e["alignment"] for e in entries])
        arrays[name + "_bulk_edge"] = np.array([e["bulk_edge"] for e in entries])
        arrays[name + "_eigenvectors_last"] = entries[-1]["vectors"]
        guess = predicted.get((matrix, block))
        if guess is not None:
            arrays[name + "_outliers_predicted"] = np.asarray(guess["outliers"])[order]
            arrays[name + "_alignment_predicted"] = np.asarray(guess["alignment"])[order]
            arrays[name + "_bulk_predicted"] = np.asarray(guess["bulk"])[order]
            if "outliers_error" in guess:  # a prediction by quadrature states its error
                arrays[name + "_outliers_predicted_error"] = \
                    np.asarray(guess["outliers_error"])[order]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return atomic_write(pathlib.Path(out_dir) / RESULT, buffer.getvalue())


__all__ = ["MATRICES", "RESULT", "recording_times", "run_ensemble", "write_spectra"]
