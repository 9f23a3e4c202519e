"""``hierarchy sgd`` with a ``[spectra]`` table: the SGD ensemble, run 0's spectra, and the
spectra predicted from the summary statistics, written to ``spectra.npz``.

A family hands :func:`sgd_with_spectra` its spectral adapter (see
:class:`~hierarchy.spectra.recorder.SpectralRecorder`; it also provides
``predicted(u0, times, table)``, the population outliers and alignment along the ballistic
ODE from run 0's own initial statistics) and ``run(times, observer)``, its SGD loop.

``spectra.npz`` holds ``t`` (the snapshot times), ``samples_used`` (``M̃`` per snapshot) and,
for each matrix ``hessian``, ``G`` and block ``b``: ``{matrix}_{b}_eigenvalues`` (times x r,
decreasing ``|value|``), ``{matrix}_{b}_alignment`` (times), ``{matrix}_{b}_bulk_edge``
(times), ``{matrix}_{b}_eigenvectors_last`` (the last snapshot's vectors, n x r), and the
predictions ``{matrix}_{b}_outliers_predicted`` (times x r), ``{matrix}_{b}_alignment_predicted``
and ``{matrix}_{b}_bulk_predicted`` (times).
"""

import dataclasses
import io
import pathlib

import numpy as np

from hierarchy.core.io import atomic_write, interruptible
from hierarchy.sgd.ensemble import ProgressObserver
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


def sgd_with_spectra(adapter, config, out_dir, run, output_times, *, resume=False,
                     progress=None):
    """Run the family's SGD with the recorder; write ``spectra.npz``.

    Returns
    -------
    (Trajectory, list of int, dict)
        The SGD trajectory at the union of times, the rows of ``output_times`` in it, and
        the spectra summary (snapshots, reused, recomputed, ``M̃``).
    """
    table = config["spectra"]
    union, outputs, schedule = recording_times(output_times, table["times"])
    samples = sample_count(table, int(config["sgd"]["dimension"]))
    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    recorder = SpectralRecorder(adapter, table, samples, out_dir, inputs_hash(config),
                                schedule, resume=resume, progress=progress)
    with interruptible():
        trajectory = run(union, ProgressObserver(progress, union[-1], recorder))
    first = np.asarray(trajectory.u_runs)[0, 0]
    predicted = adapter.predicted(first, np.asarray(table["times"], float), table)
    write_spectra(out_dir, table, recorder, predicted)
    recorder.discard_partial()
    summary = {"snapshots": len(recorder.snapshots), "reused": recorder.reused,
               "recomputed": recorder.recomputed, "samples": samples, "data": table["data"],
               "run": 0, "file": RESULT}
    return trajectory, outputs, summary


def run_ensemble(config, out_dir, run, output_times, adapter=None, *, resume=False,
                 progress=None):
    """A family's SGD ensemble, with the spectra when ``[spectra] times`` asks for them.

    Parameters
    ----------
    run : callable
        ``run(times, observer=None)``: the family's SGD loop, a Trajectory at ``times``.
    adapter : object or None
        The family's spectral adapter; None for a family without spectra.

    Returns
    -------
    (Trajectory, dict)
        The trajectory at ``output_times`` and the extra summary entries (``spectra``).
    """
    try:
        if adapter is None or not config.get("spectra", {}).get("times"):
            with interruptible():
                return run(output_times, ProgressObserver(progress, output_times[-1])), {}
        trajectory, rows, summary = sgd_with_spectra(adapter, config, out_dir, run,
                                                     output_times, resume=resume,
                                                     progress=progress)
        return restrict(trajectory, rows), {"spectra": summary}
    finally:
        if progress is not None:
            progress.close()  # end the status line before the command's own output


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
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return atomic_write(pathlib.Path(out_dir) / RESULT, buffer.getvalue())


def restrict(trajectory, rows):
    """The SGD trajectory at ``rows`` of its times only (the ``[solve]`` output times)."""
    rows = np.asarray(rows, int)
    u_runs = np.asarray(trajectory.u_runs)[:, rows]
    columns = dict(trajectory.columns)
    columns["u_runs"] = u_runs
    columns["steps"] = np.asarray(trajectory.steps)[rows]
    return dataclasses.replace(trajectory, t=np.asarray(trajectory.t)[rows],
                               y=np.asarray(trajectory.y)[rows], columns=columns,
                               info=dict(trajectory.info))


__all__ = ["MATRICES", "RESULT", "recording_times", "restrict", "run_ensemble",
           "sgd_with_spectra", "write_spectra"]
