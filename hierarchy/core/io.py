"""Result files: written atomically, read back checked, kept when a run is interrupted.

``write_result`` writes ``result.npz`` (``t``, ``mu``, ``labels`` and any extra arrays such as
``mu_seeds``) and ``result.json`` (the full config, the package version, the labels, summary
figures, a ``complete`` flag, a timestamp and the SHA-256 of the npz). Each file is written
to a temporary file in the same folder and moved into place with ``os.replace``
(:func:`atomic_write`, the package's one atomic write), with SIGINT/SIGTERM held back
meanwhile (:func:`hold_signals`), so a reader only ever sees a whole old file or a whole
new one; the hash in the json ties the pair together.

Long runs use :func:`interruptible` (SIGTERM becomes ``KeyboardInterrupt``) and a
:class:`Checkpoint`: they save partial results as they go, marked ``complete: false``, plus
an optional resume state (``result.state-<hash>.npz``, named in ``result.json``), and
``--resume`` reads both back with
:meth:`Checkpoint.resume`.
"""
import contextlib
import datetime
import hashlib
import io
import json
import math
import os
import pathlib
import signal
import tempfile
import threading
import time

import numpy as np

from hierarchy import __version__
from hierarchy.core.errors import HierarchyError

# Array names that carry meaning in result.npz; extra arrays may not reuse them.
RESERVED_ARRAYS = ("t", "mu", "labels")


# ---------------------------------------------------------------------------------------
# Writing


def write_result(
    out_dir, *, t, mu, labels, config, summary=None, extra_arrays=None, complete=True, name="result",
    state_name="mu", command=None,
):
    """Write ``{name}.npz`` and ``{name}.json`` into ``out_dir`` atomically.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder, created if missing.
    t : array_like, shape (T,)
        Output times.
    mu : array_like, shape (T, n)
        Moments at those times, columns ordered like ``labels``.
    labels : sequence of str, length n
        Word labels.
    config : dict
        The full (validated) config of the run.
    summary : dict, optional
        JSON-serialisable summary figures (numpy scalars and arrays are converted;
        non-finite floats become ``null``).
    extra_arrays : dict of str -> array_like, optional
        More arrays for the npz, e.g. ``mu_seeds`` of shape (S, T, n).
    complete : bool
        False for partial results of an interrupted or failed run.
    name : str
        Base name of the two files.
    state_name : str
        Name of the states' array in the npz: ``mu`` (the attention family's trace moments),
        ``u`` (summary statistics), ... (the family's ``state_name``).
    command : str, optional
        The command that wrote the result (``solve``, ``sgd``, ``study``), recorded as
        ``command`` in the json: ``--resume`` continues only its own command's folder
        (:meth:`Checkpoint.resume`).

    Returns
    -------
    pathlib.Path
        The path of the json file.

    Raises
    ------
    HierarchyError
        Inconsistent shapes, or an output folder that cannot be written.
    """
    return _write_result(out_dir, t=t, mu=mu, labels=labels, config=config, summary=summary,
                         extra_arrays=extra_arrays, complete=complete, name=name,
                         record_extra=None if command is None else {"command": command},
                         state_name=state_name)


#: the figures each command draws after writing its complete result: a result of the command
#: written incomplete (a run under way, interrupted, diverged, blown up) removes them, so that
#: no figure of an earlier run in the folder stands beside it
COMMAND_FIGURES = {"solve": ("observables.png",), "sgd": ("sgd.png",)}


def _write_result(out_dir, *, t, mu, labels, config, summary, extra_arrays, complete, name, record_extra,
                  state_name="mu"):
    out = pathlib.Path(out_dir)
    arrays = _result_arrays(t, mu, labels, extra_arrays, state_name)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not complete and name == "result":
            for figure in COMMAND_FIGURES.get((record_extra or {}).get("command"), ()):
                (out / figure).unlink(missing_ok=True)
        with hold_signals():
            npz_bytes = _npz_bytes(arrays)
            atomic_write(out / f"{name}.npz", npz_bytes)
            record = {
                "complete": bool(complete),
                "version": __version__,
                "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "labels": [str(label) for label in labels],
                "arrays": sorted(arrays),
                "npz_sha256": hashlib.sha256(npz_bytes).hexdigest(),
                "config": to_jsonable(config),
                "summary": to_jsonable(summary or {}),
            }
            record.update(record_extra or {})
            json_path = out / f"{name}.json"
            atomic_write(json_path, (json.dumps(record, indent=2, allow_nan=False) + "\n").encode())
    except OSError as error:
        raise HierarchyError(
            f"--out {out}: cannot write results ({error.strerror or error}); choose a writable folder",
            field="out",
        ) from None
    return json_path


def _result_arrays(t, mu, labels, extra_arrays, state_name="mu"):
    t = np.asarray(t, dtype=float)
    mu = np.asarray(mu, dtype=float)
    labels = np.asarray([str(label) for label in labels], dtype=str)
    if t.ndim != 1 or mu.ndim != 2 or mu.shape != (t.size, labels.size):
        raise HierarchyError(
            f"result arrays: mu must have shape (len(t), len(labels)) = ({t.size}, {labels.size}), "
            f"got {mu.shape}",
            field="mu",
        )
    arrays = {"t": t, state_name: mu, "labels": labels}
    for key, value in (extra_arrays or {}).items():
        if key in RESERVED_ARRAYS or key == state_name:
            raise HierarchyError(f"extra_arrays: {key!r} is reserved ({', '.join(RESERVED_ARRAYS)})", field=key)
        arrays[key] = np.asarray(value)
        if arrays[key].dtype == object:
            raise HierarchyError(f"extra_arrays: {key!r} must be a numeric or string array", field=key)
    return arrays


def write_state(out_dir, arrays, name="result"):
    """Write resume state (a dict of arrays) to ``{name}.state-<hash>.npz`` atomically.

    Returns
    -------
    dict
        ``{"state_file": file name, "state_sha256": hash}``, to be recorded in the json
        written next (:class:`Checkpoint` does this), which makes the pair consistent even
        if the run dies between the two writes.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    payload = _npz_bytes({key: np.asarray(value) for key, value in arrays.items()})
    digest = hashlib.sha256(payload).hexdigest()
    file_name = f"{name}.state-{digest[:16]}.npz"
    with hold_signals():
        atomic_write(out / file_name, payload)
    return {"state_file": file_name, "state_sha256": digest}


def read_state(out_dir, record):
    """Read the resume state a result record points to; ``None`` when it has none.

    Raises
    ------
    HierarchyError
        The state file is missing, damaged or does not match the record's hash.
    """
    file_name = record.get("state_file")
    if not file_name:
        return None
    path = pathlib.Path(out_dir) / file_name
    try:
        payload = path.read_bytes()
    except OSError as error:
        raise HierarchyError(f"{path}: resume state missing ({error.strerror})", field="resume") from None
    if hashlib.sha256(payload).hexdigest() != record.get("state_sha256"):
        raise HierarchyError(f"{path}: resume state damaged (hash differs)", field="resume")
    with np.load(io.BytesIO(payload), allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _remove_states(out_dir, name, keep=None):
    for path in pathlib.Path(out_dir).glob(f"{name}.state-*.npz"):
        if path.name != keep:
            with contextlib.suppress(OSError):
                path.unlink()


def _npz_bytes(arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def atomic_write(path, payload):
    """Write a file so that readers only ever see the whole old or the whole new content.

    The payload goes to a temporary file in the same folder (mode as ``open()`` would give,
    flushed and fsynced) which is then moved into place with one ``os.replace``; on any
    error the temporary file is removed. Signals are not held here: wrap the call in
    :func:`hold_signals` when an interruption must not land between related writes.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write; its folder must exist.
    payload : bytes or str
        The new content; ``str`` is encoded as UTF-8.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OSError
        The folder cannot be written.
    """
    path = pathlib.Path(path)
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(payload)
            temp.flush()
            os.fchmod(temp.fileno(), default_file_mode())  # mkstemp's 0600 would hide results
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    return path


def default_file_mode():
    """``0o666`` less the process umask: the mode ``open()`` would give a new file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_out_dir(out_dir, field="--out"):
    """Prove an output folder can be written, before any expensive work, creating nothing.

    The folder itself, or where it does not exist yet its nearest existing parent, must be a
    folder in which a file can be created (a probe file is made and removed).

    Parameters
    ----------
    out_dir : str or os.PathLike
    field : str
        The flag or key named in the error.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    HierarchyError
        An empty path, an existing file, or a place where nothing can be written.
    """
    if out_dir is None or not str(out_dir).strip():
        raise HierarchyError(f"{field} is empty; give an output folder", field=field)
    out = pathlib.Path(out_dir)
    try:
        _check_names(out, field)
        if out.is_symlink() and not out.exists():
            raise HierarchyError(f"{field} {out}: is a dangling symbolic link (to "
                                 f"{os.readlink(out)}); remove it or choose another folder",
                                 field=field)
        if out.exists() and not out.is_dir():
            raise HierarchyError(f"{field} {out}: exists and is not a folder; choose a folder",
                                 field=field)
        existing = next(p for p in (out, *out.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise NotADirectoryError(20, "a file is in the way")
        for below in _missing_parts(out, existing):
            if below.is_symlink():  # a dangling link on the way: mkdir would fail on it
                raise HierarchyError(f"{field} {out}: {below} is a dangling symbolic link; "
                                     "remove it or choose another folder", field=field)
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".write-probe.", suffix=".tmp")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise HierarchyError(f"{field} {_shown(out)}: cannot write there "
                             f"({error.strerror or error}); choose a writable folder",
                             field=field) from None
    return out


def _missing_parts(out, existing):
    """The paths from below ``existing`` down to ``out`` (the folders still to create)."""
    parts, path = [], out.absolute()
    while path != existing and path != path.parent:
        parts.append(path)
        path = path.parent
    return reversed(parts)


def _check_names(out, field):
    """Refuse a path component longer than the file system allows (before any ``stat``)."""
    try:
        limit = os.pathconf(next(p for p in out.absolute().parents if p.is_dir()),
                            "PC_NAME_MAX")
    except (OSError, ValueError, StopIteration):
        limit = 255
    for part in out.parts:
        if len(os.fsencode(part)) > limit:
            raise HierarchyError(f"{field}: the path component {_shown(part)} is "
                                 f"{len(os.fsencode(part))} bytes long, more than the {limit} "
                                 "the file system allows; choose a shorter name", field=field)


def _shown(path, limit=80):
    """``path`` shortened for a one-line message."""
    text = str(path)
    return text if len(text) <= limit else text[:limit - 3] + "..."


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def hold_signals(redeliver=True):
    """Hold SIGINT/SIGTERM until the block ends, so a write is never cut half way.

    ``redeliver=False`` drops the signals held instead of delivering them at the end: for
    the block that keeps the partial result of a run already being interrupted, where a
    second Ctrl-C asks for nothing more than the first (the run then exits with 130).

    In the main thread the handlers are swapped for a recorder and a signal that arrived is
    re-delivered to the previous handler afterwards. (Blocking with ``pthread_sigmask``
    alone is not enough: a signal that reached Python just before the block would still run
    its handler inside it.) Other threads never run Python signal handlers; there the
    signals are blocked at the OS level instead (:func:`block_signals`).

    Examples
    --------
    >>> with hold_signals():                                         # doctest: +SKIP
    ...     atomic_write(folder / "a.npz", payload)
    ...     atomic_write(folder / "a.json", record)   # Ctrl-C lands after both
    """
    if threading.current_thread() is not threading.main_thread():
        with block_signals():
            yield
        return
    received = []
    previous = {}
    for signum in HELD_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            previous[signum] = signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received and redeliver:
            _redeliver(received[0], previous.get(received[0]))


def _redeliver(signum, handler):
    if callable(handler):
        handler(signum, None)  # e.g. raises KeyboardInterrupt
    elif handler != signal.SIG_IGN:
        os.kill(os.getpid(), signum)  # default action


@contextlib.contextmanager
def block_signals():
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(HELD_SIGNALS))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def to_jsonable(value):
    """Convert numpy scalars/arrays, tuples and paths to JSON types; NaN/inf become None."""
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (str, type(None))):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


# ---------------------------------------------------------------------------------------
# Reading


def read_result(out_dir, name="result"):
    """Read a result written by :func:`write_result`.

    Returns
    -------
    dict
        Every npz array under its name (``t``, ``mu``, ``mu_seeds``, ...), ``labels`` as a
        list of str, and the json fields ``config``, ``version``, ``summary``, ``complete``,
        ``timestamp`` (plus any others the writer added).

    Raises
    ------
    HierarchyError
        Missing or unreadable files, or an npz that does not match its json (hash).
    """
    out = pathlib.Path(out_dir)
    json_path, npz_path = out / f"{name}.json", out / f"{name}.npz"
    try:
        record = json.loads(json_path.read_text(encoding="utf-8"))
        npz_bytes = npz_path.read_bytes()
    except FileNotFoundError as error:
        raise HierarchyError(f"{out}: no result here ({pathlib.Path(error.filename).name} missing)", field="out") from None
    except (OSError, ValueError) as error:
        raise HierarchyError(f"{json_path}: unreadable result ({_one_line(error)})", field="out") from None
    expected = record.get("npz_sha256")
    if expected and hashlib.sha256(npz_bytes).hexdigest() != expected:
        raise HierarchyError(f"{npz_path} does not match {json_path.name} (hash differs): a damaged result", field="out")
    try:
        with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError) as error:
        raise HierarchyError(f"{npz_path}: unreadable arrays ({_one_line(error)})", field="out") from None
    result = dict(record)
    result.update(arrays)
    result["labels"] = [str(label) for label in arrays.get("labels", record.get("labels", []))]
    return result


def _one_line(error):
    return " ".join(str(error).split())


# ---------------------------------------------------------------------------------------
# Interruptions and checkpoints


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as a KeyboardInterrupt so one ``except`` handles both."""


@contextlib.contextmanager
def interruptible():
    """Turn SIGTERM into ``KeyboardInterrupt`` in the main thread for the duration.

    Outside the main thread (where handlers cannot be installed) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum, frame):
        raise _Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Checkpoint:
    """Partial results of a long run, saved as it goes and read back by ``--resume``.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder of the run.
    config : dict
        The run's validated config (stored with every save; checked on resume).
    name : str
        Base name of the files (``result``).
    min_interval : float
        Seconds between two throttled saves (:meth:`save` with ``force=False``).
    command : str, optional
        The command whose results these are (``sgd``, ``study``): recorded in every save,
        and required of the folder by :meth:`resume`.

    Examples
    --------
    >>> ckpt = Checkpoint(out, cfg)                                    # doctest: +SKIP
    >>> previous = ckpt.resume() if resume else None                   # doctest: +SKIP
    >>> with interruptible():                                          # doctest: +SKIP
    ...     try:
    ...         for step in ...:
    ...             ckpt.save(t=t, mu=mu, labels=labels, state={"W": W})
    ...     except KeyboardInterrupt:
    ...         ckpt.save(t=t, mu=mu, labels=labels, state={"W": W}, force=True)
    ...         raise
    >>> ckpt.finish(t=t, mu=mu, labels=labels, summary=...)            # doctest: +SKIP
    """

    def __init__(self, out_dir, config, name="result", min_interval=30.0, command=None):
        self.out_dir = pathlib.Path(out_dir)
        self.config = config
        self.name = name
        self.min_interval = float(min_interval)
        self.command = command
        self._last_save = -math.inf

    def save(self, *, t, mu, labels, summary=None, extra_arrays=None, state=None, force=False,
             state_name="mu"):
        """Save a partial result (``complete: false``); skipped when saved recently unless
        ``force``. ``state`` (dict of arrays) is what the run needs to continue;
        ``state_name`` names ``mu`` in the npz (:func:`write_result`). Returns whether it
        saved.

        The state is written first under a name holding its hash, then the result whose
        json points to it, then older states are removed: at every instant the json on disk
        points to a state that exists and matches it."""
        now = time.monotonic()
        if not force and now - self._last_save < self.min_interval:
            return False
        with hold_signals():
            pointer = None if state is None else write_state(self.out_dir, state, name=self.name)
            record = dict(pointer or {})
            if self.command is not None:
                record["command"] = self.command
            _write_result(
                self.out_dir, t=t, mu=mu, labels=labels, config=self.config, summary=summary,
                extra_arrays=extra_arrays, complete=False, name=self.name, record_extra=record,
                state_name=state_name,
            )
            _remove_states(self.out_dir, self.name, keep=None if pointer is None else pointer["state_file"])
        self._last_save = now
        return True

    def finish(self, *, t, mu, labels, summary=None, extra_arrays=None, state_name="mu"):
        """Write the final result (``complete: true``) and drop the resume state."""
        with hold_signals():
            path = write_result(
                self.out_dir, t=t, mu=mu, labels=labels, config=self.config, summary=summary,
                extra_arrays=extra_arrays, complete=True, name=self.name, state_name=state_name,
                command=self.command,
            )
            _remove_states(self.out_dir, self.name)
        return path

    def resume(self, ignore=("study.scheduler", "study.workers", "study.connect_timeout")):
        """Read back what an earlier run left in ``out_dir``.

        Parameters
        ----------
        ignore : iterable of str
            Dotted config keys allowed to differ between the runs.

        Returns
        -------
        dict or None
            ``None`` when the folder holds no result (start afresh); otherwise the
            :func:`read_result` dict with ``state`` (the resume arrays, or None) added.
            A finished run comes back with ``complete`` True: nothing is left to do.

        Raises
        ------
        HierarchyError
            The folder holds a run of another command (``command`` given: the one recorded
            must be the same), of another config, or damaged files.
        """
        if not (self.out_dir / f"{self.name}.json").exists():
            return None
        previous = read_result(self.out_dir, name=self.name)
        check_command(self.out_dir, previous.get("command"), self.command)
        if previous.get("version") != __version__:  # other code: its numbers are not ours
            raise HierarchyError(
                f"--resume: {self.out_dir} holds a run written by hierarchy "
                f"{previous.get('version')}, and this is {__version__}: nothing of it is "
                "continued; run without --resume (--overwrite for an interrupted run) or "
                "choose another --out", field="resume")
        difference = first_difference(to_jsonable(self.config), previous.get("config"), ignore=set(ignore))
        if difference is not None:
            raise HierarchyError(
                f"--resume: {self.out_dir} holds a run with a different config ({difference} differs); "
                "use the same config or another --out",
                field="resume",
            )
        previous["state"] = read_state(self.out_dir, previous)
        return previous


def check_command(out_dir, recorded, command):
    """Refuse to ``--resume`` a folder whose result another command wrote (one line).

    ``command`` None checks nothing. A result that records no command (written before
    results recorded it) is refused too: its arrays may be any command's.
    """
    if command is None or recorded == command:
        return
    who = (f"the result of `hierarchy {recorded}`" if recorded else
           "a result that does not record the command that wrote it")
    raise HierarchyError(
        f"--resume: {out_dir} holds {who}, not an interrupted `hierarchy {command}` run: "
        f"nothing of it can be continued; run `hierarchy {command}` without --resume to "
        "replace it, or choose another --out", field="resume")


def interrupted_run(out_dir, name="result"):
    """The command of an interrupted run that ``out_dir`` holds, or None.

    Interrupted: ``{name}.json`` says ``complete: false`` and its resume state (a
    checkpoint) is there, or, for a study, finished job files are (``jobs/*.npz``).
    Reads the json alone (no arrays); an unreadable one is no interrupted run.
    """
    out = pathlib.Path(out_dir)
    try:
        record = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("complete") is not False:
        return None
    state = record.get("state_file")
    jobs = out / "jobs"
    if (state and (out / str(state)).exists()) or (jobs.is_dir() and any(jobs.glob("*.npz"))):
        return str(record.get("command") or "an earlier command")
    return None


def holds_study(out_dir):
    """Whether ``out_dir`` holds a ``hierarchy study``: its ``result.json`` says so, or
    finished job files are there (``jobs/*.npz``, a study killed before its first report)."""
    out = pathlib.Path(out_dir)
    jobs = out / "jobs"
    if jobs.is_dir() and any(jobs.glob("*.npz")):
        return True
    try:
        record = json.loads((out / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("command") == "study"


def first_difference(a, b, ignore=frozenset(), prefix=""):
    """Dotted path of the first key where two nested configs differ (None if equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            path = f"{prefix}.{key}" if prefix else str(key)
            if path in ignore:
                continue
            found = first_difference(a.get(key), b.get(key), ignore, path)
            if found is not None:
                return found
        return None
    return None if a == b else (prefix or "config")

