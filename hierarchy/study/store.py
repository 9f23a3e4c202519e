"""The study's folder: one file per finished job, resume, and occupied folders.

Finished jobs are kept in ``DIR/jobs/KEY.npz`` (:func:`save_job`, written atomically through
:func:`hierarchy.core.io.atomic_write`), each with the SHA-256 of the inputs that decide it
(:func:`hierarchy.study.compute.job_hash`) and the SHA-256 of its own stored arrays
(:func:`content_hash`: names, dtypes, shapes and bytes). ``--resume`` (:func:`prepare_folder`)
reads ``DIR/jobs`` alone, reuses only the jobs whose config hash matches the current config
and whose contents still match their content hash, recomputes the others and any damaged or
altered file (with a warning), and reports how many it reused and discarded. Without ``--resume`` a folder that already holds a study is refused, or cleared
with ``overwrite``.
"""

import hashlib
import io
import json
import pathlib
import sys
import zipfile

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import atomic_write, first_difference, hold_signals, to_jsonable

HASH_ARRAY = "config_hash"
CONTENT_ARRAY = "content_hash"
# What a damaged or foreign npz can raise on np.load / reading its arrays.
UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)
# Config keys that may change between a run and its --resume: they decide no result.
RESUME_IGNORES = ("study.scheduler", "study.workers", "study.connect_timeout")
# The files of a study besides its job files (what --overwrite removes).
STUDY_FILES = ("result.json", "result.npz", "study_errors.png", "study_trajectories.png",
               "study_table.txt")


def jobs_folder(out_dir):
    """``DIR/jobs``: one ``KEY.npz`` per finished job."""
    return pathlib.Path(out_dir) / "jobs"


def save_job(out_dir, job, result, digest):
    """Write one finished job atomically, with its inputs' hash.

    Parameters
    ----------
    out_dir : str or path-like
    job : hierarchy.study.jobs.Job
    result : dict of array_like
    digest : str
        :func:`hierarchy.study.compute.job_hash` of the job.
    """
    arrays = {name: np.asarray(value) for name, value in result.items()}
    arrays[HASH_ARRAY] = np.array(digest)
    arrays[CONTENT_ARRAY] = np.array(content_hash(arrays))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    folder = jobs_folder(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with hold_signals():
        atomic_write(folder / f"{job.key}.npz", buffer.getvalue())


def content_hash(arrays):
    """SHA-256 of a job's arrays (all but :data:`CONTENT_ARRAY`): names, dtypes, shapes, bytes.

    Parameters
    ----------
    arrays : dict of numpy.ndarray

    Returns
    -------
    str
        The hex digest.
    """
    digest = hashlib.sha256()
    for name in sorted(n for n in arrays if n != CONTENT_ARRAY):
        array = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, array.dtype.str, list(array.shape)]).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def read_job(path):
    """The arrays of one job file (its hashes included).

    Raises
    ------
    OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile
        A damaged file, or one without a trajectory ``mu`` (see :data:`UNREADABLE`).
    """
    with np.load(path, allow_pickle=False) as data:
        result = {name: data[name] for name in data.files}
    if "mu" not in result or np.asarray(result["mu"]).ndim != 2:
        raise ValueError("no trajectory 'mu'")
    return result


def check_contents(result):
    """The arrays of a job without its hashes; refuses arrays altered since they were saved.

    Raises
    ------
    ValueError
        The arrays do not match the stored :data:`CONTENT_ARRAY` (altered values or shapes,
        or a file written without one).
    """
    result = dict(result)
    stored = str(result.pop(CONTENT_ARRAY, ""))
    if stored != content_hash(result):
        raise ValueError("its arrays do not match their content hash (altered since saved)")
    result.pop(HASH_ARRAY, None)
    return result


def load_jobs(out_dir, expected, *, warn=None):
    """The job files of ``DIR/jobs`` whose hash matches ``expected``.

    Parameters
    ----------
    out_dir : str or path-like
    expected : dict
        ``{job: hash}`` of the jobs of the current config.
    warn : callable, optional
        Called with a one-line message for each damaged file (default: print to stderr).

    Returns
    -------
    found : dict
        ``{job: result}`` of the reusable jobs.
    report : dict
        ``reused``, ``discarded`` (another config's, or no job of this study) and
        ``damaged`` (unreadable, or altered since saved: recomputed) counts.
    """
    warn = warn or (lambda message: print(message, file=sys.stderr))
    by_key = {job.key: job for job in expected}
    found, report = {}, {"reused": 0, "discarded": 0, "damaged": 0}
    folder = jobs_folder(out_dir)
    paths = sorted(folder.glob("*.npz")) if folder.is_dir() else []
    for path in (p for p in paths if not p.name.startswith(".")):
        try:
            result = read_job(path)
            digest = str(result.get(HASH_ARRAY, ""))
            job = by_key.get(path.stem)
            if job is None or expected[job] != digest:
                report["discarded"] += 1
                continue
            result = check_contents(result)
        except UNREADABLE as error:
            reason = " ".join(str(error).split())[:120] or type(error).__name__
            warn(f"warning: {path} is damaged ({reason}); recomputing that job")
            report["damaged"] += 1
            continue
        found[job] = result
        report["reused"] += 1
    return found, report


def prepare_folder(out, checkpoint, expected, *, resume, overwrite):
    """The reusable jobs and the resume report; refuses or clears an occupied folder.

    Parameters
    ----------
    out : pathlib.Path
    checkpoint : hierarchy.core.io.Checkpoint
        The study's result files (holding the current config).
    expected : dict
        ``{job: hash}`` of the current config's jobs.
    resume, overwrite : bool

    Returns
    -------
    done : dict
        ``{job: result}`` reused.
    report : dict or None
        ``reused``, ``discarded``, ``damaged``, ``recomputed`` counts (None without resume).

    Raises
    ------
    HierarchyError
        Without ``resume``, a folder holding a study and no ``overwrite`` (``--out``); with
        it, a result of another config (``--resume``).
    """
    if not resume:
        existing = existing_study(out, checkpoint.config)
        if existing and not overwrite:
            raise HierarchyError(
                f"--out {out} already holds {existing}; continue it with --resume, replace it "
                "with --overwrite, or choose another --out", field="--out")
        if existing:
            clear_study(out)
        return {}, None
    try:
        checkpoint.resume(ignore=RESUME_IGNORES)
    except HierarchyError as error:
        if error.field == "resume":  # another config's run: not ours to continue
            raise HierarchyError(f"{error}; or --overwrite to replace it", field="--resume") from None
        # A damaged result.json/npz: the job files carry their own hashes, so go on from them.
        print(f"warning: {' '.join(str(error).split())}; resuming from {jobs_folder(out)} alone",
              file=sys.stderr)
    done, report = load_jobs(out, expected)
    report["recomputed"] = len(expected) - len(done)
    print(f"resume: reusing {report['reused']} of {len(expected)} jobs in {jobs_folder(out)}; "
          f"discarded {report['discarded']} of another config, {report['damaged']} damaged",
          file=sys.stderr)
    return done, report


def existing_study(out, config):
    """What study ``out`` holds, in words (``""``: none)."""
    record_path = out / "result.json"
    if record_path.exists():
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "a damaged result.json"
        state = "complete" if record.get("complete") else "incomplete"
        difference = first_difference(to_jsonable(config), record.get("config"),
                                      ignore=set(RESUME_IGNORES))
        whose = "this config" if difference is None else f"another config ({difference} differs)"
        return f"a {state} run of {whose}"
    folder = jobs_folder(out)
    if folder.is_dir() and any(not p.name.startswith(".") for p in folder.glob("*.npz")):
        return "finished study jobs (jobs/*.npz) of a run that wrote no result"
    return ""


def clear_study(out):
    """``--overwrite``: remove the old result, plots and job files (nothing else)."""
    paths = [out / name for name in STUDY_FILES] + list(out.glob("result.state-*.npz"))
    folder = jobs_folder(out)
    if folder.is_dir():
        # the job files, and what a write cut short left (dot-names are never read as jobs)
        paths += list(folder.glob("*.npz")) + list(folder.glob(".*.npz")) + list(folder.glob(".*.tmp"))
    for path in paths:
        if path.is_file():
            path.unlink()

