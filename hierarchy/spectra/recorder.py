"""The spectral recorder: an SGD observer that records run 0's spectra at chosen times.

The ensemble loop (:func:`hierarchy.sgd.ensemble.simulate_ensemble`) calls
``observer(index, t, x, recent)`` at every recording time (``x`` the ensemble's parameters,
``recent`` the last ``observer.window`` samples of run 0 or None); the recorder
``watches`` run 0, so it is not called once run 0 has diverged. At each time of
``[spectra] times`` it computes every selected block's top eigenpairs, alignment and bulk
edge (:func:`hierarchy.spectra.snapshot.block_spectra`) and saves that snapshot alone as
``spectra.partial/snapshot-J.npz`` (one atomic write of one snapshot: the I/O is linear in
the number of snapshots).

Interruption and resume. The SGD ensemble is checkpointed by its job
(:func:`hierarchy.sgd.ensemble.run_ensemble_job`); the snapshots taken before the checkpoint
are taken from the saved files (:meth:`SpectralRecorder.covers`), and a snapshot at or after
it is reused only if the inputs hash matches (model, start, SGD, ``[spectra]``) AND the
fingerprint of run 0's parameters at that time is the one saved (a sum, a norm and a few
entries); any mismatch recomputes the snapshot. A damaged file (truncated, bit-flipped,
zeroed, empty) or another config's is discarded with a warning on stderr. Nothing is reused
silently: the summary counts the snapshots reused, recomputed and discarded.
"""

import hashlib
import io
import json
import pathlib
import shutil
import sys

import numpy as np

from hierarchy.core.io import atomic_write, hold_signals
from hierarchy.spectra.snapshot import MATRICES, block_spectra
from hierarchy.study.store import UNREADABLE

#: The folder of the snapshots saved so far (one file each).
PARTIAL = "spectra.partial"
#: The one-file layout of earlier versions, removed with the folder.
LEGACY_PARTIAL = "spectra.partial.npz"


def inputs_hash(config):
    """SHA-256 of the config values that decide the snapshots."""
    decisive = {key: config.get(key) for key in ("model", "init", "sgd", "spectra")}
    text = json.dumps(decisive, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(parameters):
    """A few numbers that identify run 0's parameters at a snapshot."""
    flat = np.concatenate([np.ravel(np.asarray(p, float)) for p in
                           (parameters if isinstance(parameters, tuple) else (parameters,))])
    return np.array([flat.sum(), np.sqrt(flat @ flat), flat[0], flat[-1], flat[len(flat) // 2]])


class SpectralRecorder:
    """Records run 0's spectra at ``times`` (see the module docstring).

    Parameters
    ----------
    adapter : object
        The family's spectral model: ``kind``, ``block_names``, ``noise_variance``,
        ``signal_rank``, ``groups(top, blocks)`` -> ``[(names, r), ...]``,
        ``run_zero(x)`` -> the parameters of run 0 (a copy), ``sample(count, rng)``.
    table : dict
        The validated ``[spectra]`` table.
    samples : int
        ``M̃``.
    out_dir : path-like
        Where ``spectra.partial/`` goes.
    config_hash : str
        :func:`inputs_hash` of the config.
    schedule : dict
        Index of a recording time of the SGD loop -> index of its ``[spectra] times`` entry.
    resume : bool
        Reuse matching saved snapshots; without it the saved ones are removed.
    progress : hierarchy.core.progress.Progress, optional
    warn : callable, optional
        Called with a one-line message per discarded damaged file (default: stderr).
    """

    #: The run whose spectra are recorded (the loop stops calling once it diverged).
    watches = 0

    def __init__(self, adapter, table, samples, out_dir, config_hash, schedule, *,
                 resume=False, progress=None, warn=None):
        self.adapter, self.table, self.samples = adapter, table, int(samples)
        self.times = np.asarray(table["times"], float)
        self.window = self.samples if table["data"] == "train" else 0
        self.folder = pathlib.Path(out_dir) / PARTIAL
        self.hash, self.progress, self.schedule = config_hash, progress, dict(schedule)
        self.warn = warn or (lambda message: print(message, file=sys.stderr))
        self.snapshots = {}       # snapshot index -> {"fingerprint", "used", spectra entries}
        self.reused = self.recomputed = self.discarded = 0
        self._written = set()
        if not resume:
            self.discard_partial()
        self._saved = self._load() if resume else {}
        self._test = None
        if table["data"] == "test":
            rng = np.random.default_rng(int(table["seed"]))
            self._test = adapter.sample(self.samples, rng)

    def __call__(self, index, t, x, recent):
        """The SGD observer: a snapshot when ``t`` is one of ``[spectra] times``."""
        if index not in self.schedule:
            return
        which = self.schedule[index]
        parameters = self.adapter.run_zero(x)
        mark = fingerprint(parameters)
        saved = self._saved.pop(which, None)
        if saved is not None and np.array_equal(saved["fingerprint"], mark):
            self.snapshots[which] = saved
            self._written.add(which)
            self.reused += 1
        else:
            self.recomputed += saved is not None
            self.snapshots[which] = self._snapshot(parameters, recent, mark)
        self._save()
        if self.progress is not None:
            self.progress.update(f"spectra at t = {t:g} ({len(self.snapshots)}/"
                                 f"{len(self.times)})")

    def covers(self, row):
        """Take the saved snapshots of the recording rows before ``row`` (a checkpoint's):
        whether every one of them was there (else SGD must start again from step 0)."""
        before = [which for index, which in self.schedule.items() if index < row]
        if any(which not in self._saved for which in before):
            return False
        for which in before:
            self.snapshots[which] = self._saved.pop(which)
            self._written.add(which)
            self.reused += 1
        return True

    def report(self, final=False):
        """The summary's ``spectra`` counts so far (``final``: the saved snapshots never
        used count as discarded)."""
        unused = len(self._saved) if final else 0
        return {"spectra": {"snapshots": len(self.snapshots), "reused": self.reused,
                            "recomputed": self.recomputed, "discarded": self.discarded + unused,
                            "samples": self.samples, "data": self.table["data"], "run": 0}}

    def _snapshot(self, parameters, recent, mark):
        samples, labels = self._test if self._test is not None else recent
        entry = {"fingerprint": mark, "used": len(labels)}
        for names, r in self.adapter.groups(self.table["top"], self.table["blocks"]):
            spectra = block_spectra(self.adapter.kind, parameters, samples, labels, top=r,
                                    blocks=names, noise_variance=self.adapter.noise_variance,
                                    signal_rank=self.adapter.signal_rank)
            for (matrix, block), value in spectra.items():
                entry[(matrix, block)] = value
        return entry

    # -- the partial files --------------------------------------------------------------

    def path(self, which):
        """The file of snapshot ``which``."""
        return self.folder / f"snapshot-{int(which):05d}.npz"

    def _save(self):
        """Write the snapshots not yet on disk, one file each."""
        for which in sorted(set(self.snapshots) - self._written):
            entry = self.snapshots[which]
            arrays = {"hash": np.array(self.hash), "index": np.array(which),
                      "fingerprint": entry["fingerprint"], "used": np.array(entry["used"])}
            for key, value in entry.items():
                if isinstance(key, tuple):
                    name = f"{key[0]}_{key[1]}"
                    arrays[name + "_eigenvalues"] = value["eigenvalues"]
                    arrays[name + "_vectors"] = value["vectors"]
                    arrays[name + "_alignment"] = np.array(value["alignment"])
                    arrays[name + "_bulk_edge"] = np.array(value["bulk_edge"])
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            self.folder.mkdir(parents=True, exist_ok=True)
            with hold_signals():
                atomic_write(self.path(which), buffer.getvalue())
            self._written.add(which)

    def _load(self):
        """The saved snapshots of this config; damaged and foreign files are discarded."""
        saved = {}
        paths = sorted(self.folder.glob("snapshot-*.npz")) if self.folder.is_dir() else []
        for path in paths:
            try:
                with np.load(path, allow_pickle=False) as data:
                    digest, which = str(data["hash"]), int(data["index"])
                    entry = self._read(data)
            except (*UNREADABLE, TypeError) as error:
                reason = " ".join(str(error).split())[:120] or type(error).__name__
                self.warn(f"warning: {path} is damaged ({reason}); recomputing that snapshot")
                self.discarded += 1
                continue
            if digest != self.hash or path != self.path(which) \
                    or which not in self.schedule.values():
                self.discarded += 1
                continue
            saved[which] = entry
        return saved

    def _read(self, data):
        fingerprint_ = np.asarray(data["fingerprint"], dtype=float)
        if fingerprint_.shape != (5,):
            raise ValueError(f"fingerprint of shape {fingerprint_.shape}")
        entry = {"fingerprint": fingerprint_, "used": int(data["used"])}
        for names, _ in self.adapter.groups(self.table["top"], self.table["blocks"]):
            for block in names:
                for matrix in MATRICES:
                    name = f"{matrix}_{block}"
                    entry[(matrix, block)] = {
                        "eigenvalues": np.asarray(data[name + "_eigenvalues"], dtype=float),
                        "vectors": np.asarray(data[name + "_vectors"], dtype=float),
                        "alignment": float(data[name + "_alignment"]),
                        "bulk_edge": float(data[name + "_bulk_edge"])}
        return entry

    def discard_partial(self):
        """Remove ``spectra.partial/`` (after ``spectra.npz`` is written, or on a fresh run)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        (self.folder.parent / LEGACY_PARTIAL).unlink(missing_ok=True)
