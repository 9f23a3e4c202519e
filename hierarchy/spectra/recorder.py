"""The spectral recorder: an SGD observer that records run 0's spectra at chosen times.

The SGD loops of the families that support spectra (``gmm-multiclass``, ``gmm-xor``) call
``observer(index, t, x, recent)`` at every recording time (``x`` the ensemble's parameters,
``recent`` the last ``observer.window`` samples of run 0 or None). At each time of
``[spectra] times`` the recorder computes every selected block's top eigenpairs, alignment
and bulk edge (:func:`hierarchy.spectra.snapshot.block_spectra`) and saves the snapshots so
far to ``spectra.partial.npz`` (one atomic write per snapshot).

Interruption and resume. The SGD itself is not checkpointed: it is deterministic given its
seed, so ``--resume`` reruns it and reuses a saved snapshot only if the inputs hash matches
(model, start, SGD, ``[spectra]``) AND the fingerprint of run 0's parameters at that time
is the one saved (a sum, a norm and a few entries); any mismatch recomputes the snapshot and
says so. Snapshots are what costs (Lanczos on every block), so a resumed run repeats only
the cheap part. Nothing is reused silently: the summary counts reused and recomputed ones.
"""

import hashlib
import io
import json
import pathlib

import numpy as np

from hierarchy.core.io import atomic_write
from hierarchy.spectra.snapshot import MATRICES, block_spectra

PARTIAL = "spectra.partial.npz"


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
        Where ``spectra.partial.npz`` goes.
    config_hash : str
        :func:`inputs_hash` of the config.
    schedule : dict
        Index of a recording time of the SGD loop -> index of its ``[spectra] times`` entry.
    resume : bool
        Reuse matching saved snapshots.
    progress : hierarchy.core.progress.Progress, optional
    """

    def __init__(self, adapter, table, samples, out_dir, config_hash, schedule, *,
                 resume=False, progress=None):
        self.adapter, self.table, self.samples = adapter, table, int(samples)
        self.times = np.asarray(table["times"], float)
        self.window = self.samples if table["data"] == "train" else 0
        self.path = pathlib.Path(out_dir) / PARTIAL
        self.hash, self.progress, self.schedule = config_hash, progress, dict(schedule)
        self.snapshots = {}       # snapshot index -> {"fingerprint", "used", spectra entries}
        self.reused = self.recomputed = 0
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
        saved = self._saved.get(which)
        if saved is not None and np.array_equal(saved["fingerprint"], mark):
            self.snapshots[which] = saved
            self.reused += 1
        else:
            self.recomputed += saved is not None
            self.snapshots[which] = self._snapshot(parameters, recent, mark)
        self._save()
        if self.progress is not None:
            self.progress.update(f"spectra at t = {t:g} ({len(self.snapshots)}/"
                                 f"{len(self.times)})")

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

    # -- the partial file ---------------------------------------------------------------

    def _save(self):
        arrays = {"hash": np.array(self.hash), "done": np.array(sorted(self.snapshots))}
        for i, entry in self.snapshots.items():
            arrays[f"s{i}_fingerprint"] = entry["fingerprint"]
            arrays[f"s{i}_used"] = np.array(entry["used"])
            for key, value in entry.items():
                if isinstance(key, tuple):
                    name = f"s{i}_{key[0]}_{key[1]}"
                    arrays[name + "_eigenvalues"] = value["eigenvalues"]
                    arrays[name + "_vectors"] = value["vectors"]
                    arrays[name + "_alignment"] = np.array(value["alignment"])
                    arrays[name + "_bulk_edge"] = np.array(value["bulk_edge"])
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        atomic_write(self.path, buffer.getvalue())

    def _load(self):
        if not self.path.exists():
            return {}
        try:
            with np.load(self.path) as data:
                if str(data["hash"]) != self.hash:
                    return {}
                return {int(i): self._read(data, int(i)) for i in data["done"]}
        except (OSError, ValueError, KeyError):
            return {}

    def _read(self, data, i):
        entry = {"fingerprint": data[f"s{i}_fingerprint"], "used": int(data[f"s{i}_used"])}
        for names, _ in self.adapter.groups(self.table["top"], self.table["blocks"]):
            for block in names:
                for matrix in MATRICES:
                    name = f"s{i}_{matrix}_{block}"
                    entry[(matrix, block)] = {
                        "eigenvalues": data[name + "_eigenvalues"],
                        "vectors": data[name + "_vectors"],
                        "alignment": float(data[name + "_alignment"]),
                        "bulk_edge": float(data[name + "_bulk_edge"])}
        return entry

    def discard_partial(self):
        """Remove ``spectra.partial.npz`` (after ``spectra.npz`` is written)."""
        self.path.unlink(missing_ok=True)
