"""Spiked PCA as a :class:`~hierarchy.models.base.ModelFamily` (``family = "spiked-pca"``).

The family's face to the shared layers: its config tables, validation, the ballistic ODE as
a system for the shared integrate loop, its SGD run (the exact-in-law ``O(n)`` noise sampler,
many runs at once), its fixed points and its equations. Everything else is in the modules of
this folder (see :mod:`hierarchy.models.summary`).

Config (the interface of the effective-dynamics issue):

- ``[model] order = k`` (``>= 2``), ``snr = λ`` (``> 0``), ``ridge = a`` (``>= 0``);
- ``[sgd] dimension = n``, ``step = c_δ`` (so ``δ = c_δ/n``), ``runs``, ``seed``;
- ``[study] dimensions``, ``runs``, ``seed``, ``scheduler``, ``workers``: the study of the
  ODE against SGD across ``n`` (:mod:`hierarchy.models.summary.study`);
- ``[init] source = "gaussian"`` (``x₀ ~ N(0, I/n)``, whose ``n → ∞`` statistics are
  ``m = 0``, ``r2 = 1``) or ``"statistics"`` with ``[init.statistics]`` giving some of
  ``m``, ``r2`` (the others start at their Gaussian-start limit).

Decision: the ballistic ODE from the Gaussian start stays at ``m = 0`` (an unstable fixed
point above threshold: the escape of SGD is a finite-``n`` fluctuation, of duration
``≈ ln n / (8(λ − 1))`` for ``k = 2``); ``hierarchy solve`` says so in its summary, and a
start ``m > 0`` is given with ``[init.statistics]``.
"""


import numpy as np

from hierarchy.config import fields
from hierarchy.config.statistics_start import (
    RIDGE_MAX,
    PAIRED_RUNS,
    SGD_KEY_HELP,
    SNR_MIN,
    START_LIMIT,
    STEP_MAX,
    check_paired_runs,
    check_sgd_ensemble,
    check_start,
)
from hierarchy.core.errors import HierarchyError
from hierarchy.models.base import ModelFamily
from hierarchy.models.summary import ballistic, display, sgd
from hierarchy.models.summary.fixed_points import (
    fixed_points as classified_fixed_points,
)
from hierarchy.models.summary.model import MAX_ORDER, SpikedPCA
from hierarchy.models.summary.study import STUDY, odes_from_starts
from hierarchy.models.summary.symbols import LABELS
from hierarchy.spectra.job import run_ensemble
from hierarchy.study import dimension_config

#: ``n → ∞`` statistics of the Gaussian start ``x₀ ~ N(0, I/n)``
GAUSSIAN_START = {"m": 0.0, "r2": 1.0}


class BallisticSystem:
    """The ballistic ODE ``du/dt = −f(u) + g(u)`` in the System protocol of :mod:`hierarchy.ode`."""

    labels = list(LABELS)

    def __init__(self, model):
        self.model = model
        self._rhs, self._jacobian = ballistic.field(model)

    def index(self, label):
        """Column of a statistic label."""
        if label not in self.labels:
            raise HierarchyError(f"{label!r} is not a statistic of spiked PCA "
                                 f"({', '.join(self.labels)})", field="label")
        return self.labels.index(label)

    def rhs(self, u, t=0.0):
        return np.asarray(self._rhs(np.asarray(u, dtype=float)), dtype=float).reshape(-1)

    def jacobian(self, u, t=0.0):
        return np.asarray(self._jacobian(np.asarray(u, dtype=float)), dtype=float)


class SpikedPCAFamily(ModelFamily):
    """Spiked matrix and tensor PCA: the summary statistics ``(m, r2)`` of online SGD."""

    name = "spiked-pca"
    state_name = "u"
    resource_keys = ("sgd.runs", "sgd.dimension", "solve.points", "solve.t_final")
    defaults = {
        "model": {"order": 2, "snr": 2.0, "ridge": 0.0},
        "init": {"source": "gaussian", "statistics": {}},
        "solve": {"t_final": 5.0, "points": 101, "rtol": 1e-10, "atol": 1e-12},
        "sgd": {"dimension": 1000, "step": 1.0, "runs": 100, "seed": 0,
                "paired_runs": PAIRED_RUNS},
        "study": dict(dimension_config.DEFAULTS),
    }
    section_help = {
        "model": "Spiked tensor PCA: Y = lambda v^(x k) + W; the statistics are m = <x, v> and "
                 "r2 = |x - m v|^2.",
        "init": "Where the statistics start.",
        "sgd": "Online SGD in dimension n with step delta = step / n, many runs at once.",
        "study": "The ballistic ODE against SGD across the dimension n (`hierarchy study`).",
    }
    key_help = {
        "model.order": ("Tensor order k of the spike (2: spiked matrix).",
                        f"integer in 2..{MAX_ORDER}"),
        "model.snr": ("Signal-to-noise ratio lambda.", f"number >= {SNR_MIN:g}"),
        "model.ridge": ("Ridge a of the penalty (a/2)|x|^2.", f"number in [0, {RIDGE_MAX:g}]"),
        "init.source": ("`gaussian`: x0 ~ N(0, I/n) (m = 0, r2 = 1 as n -> oo); "
                        "`statistics`: the values of `[init.statistics]`.",
                        "gaussian | statistics"),
        "init.statistics": ("Starting values by label (`m`, `r2`); missing labels start at "
                            "their Gaussian-start limit.",
                            f"table of numbers in [-{START_LIMIT:g}, {START_LIMIT:g}] "
                            "(r2 >= 0)"),
        "sgd.dimension": ("Dimension n of the parameter vector.", "integer >= 2"),
        "sgd.step": ("Step constant c_delta; the SGD step is delta = c_delta / n.",
                     f"number in (0, {STEP_MAX:g}]"),
        **SGD_KEY_HELP,
        **dimension_config.KEY_HELP,
    }

    # 2
    def validate(self, config, sections=None):
        self.model(config)  # order, snr, ridge, step
        sgd_table = config["sgd"]
        for key, low in (("dimension", 2), ("runs", 1), ("seed", 0)):
            sgd_table[key] = fields.integer(sgd_table, "sgd", key, low)
        sgd_table["paired_runs"] = check_paired_runs(sgd_table)
        self.check_ensemble(config, sgd_table["dimension"], sgd_table["runs"])
        config["init"]["statistics"] = check_start(config["init"], LABELS, "spiked PCA",
                                                   nonnegative=("r2",))
        dimension_config.validate_study(config["study"])
        return config

    def check_ensemble(self, config, dimension, runs, field="sgd.runs", steps=False):
        """The resource estimate of ``runs`` runs in ``dimension`` (before any work)."""
        check_sgd_ensemble(config, dimension, runs, width=1, statistics=len(LABELS),
                           keys=self.resource_keys, field=field, steps=steps)

    def check_study(self, config):
        """The study's own check (before any job): every ``study.dimensions`` entry runs."""
        dimension_config.check_study_dimensions(
            config, 2, "the smallest sgd.dimension",
            lambda n, runs: self.check_ensemble(config, n, runs, field="study.dimensions",
                                                steps=True))

    def model(self, config):
        """The :class:`~hierarchy.models.summary.model.SpikedPCA` a config describes."""
        model = config["model"]
        return SpikedPCA(order=model["order"], snr=model["snr"], ridge=model["ridge"],
                         step=config["sgd"]["step"])

    # 3, 4, 5, 6
    def build_arguments(self, config):
        model = self.model(config)
        return {"order": model.order, "snr": model.snr, "ridge": model.ridge,
                "step": model.step}

    def system(self, config):
        return BallisticSystem(self.model(config))

    def initial_state(self, config, system):
        start = self.start(config)
        return np.array([start[label] for label in system.labels])

    def start(self, config):
        """The starting statistics ``{label: value}`` of a config."""
        return {**GAUSSIAN_START, **config["init"]["statistics"]}

    def time_per_step(self, config):
        return float(config["sgd"]["step"]) / float(config["sgd"]["dimension"])

    # 7
    def run_sgd(self, config, out_dir, *, resume=False, progress=None):
        """``hierarchy sgd``: ``runs`` exact-in-law SGD runs (the ``O(n)`` noise sampler).

        Writes ``result.npz`` (``t``, ``u`` = mean of the runs alive at each time,
        ``labels``, ``u_runs`` (runs × times × statistics), ``alive``, ``diverged_step``,
        ``steps``) and ``result.json`` through the shared ensemble job
        (:func:`hierarchy.spectra.job.run_ensemble`: checkpoints, ``--resume``, divergence).
        """
        table = config["sgd"]
        start = None if config["init"]["source"] == "gaussian" else self.start(config)
        model = self.model(config)

        def run(times, observer=None, **loop):
            trajectory = sgd.noise_sgd(model, table["dimension"], table["runs"], times,
                                       seed=table["seed"], start=start, observer=observer,
                                       **loop)
            trajectory.columns["u_runs"] = np.transpose(trajectory.u_runs, (1, 0, 2))
            return trajectory

        return run_ensemble(config, out_dir, run, self.output_times(config),
                            state_name=self.state_name, resume=resume, progress=progress,
                            dimension=int(table["dimension"]),
                            sampler="noise (O(n), exact in law)")

    # 14
    def paired_odes(self, config, labels, starts, times):
        """The ballistic ODE from each run's own start (:func:`.study.odes_from_starts`)."""
        return odes_from_starts(config, labels, starts, times)

    # 11
    def study_model(self):
        """The ODE against SGD across ``n`` (:mod:`hierarchy.models.summary.study`)."""
        return STUDY

    # 12, 13
    def fixed_points(self, config, progress=None):
        """The isolated fixed points of the ballistic ODE, classified by stability."""
        return classified_fixed_points(self.model(config))

    def equations(self, config):
        """``{name: text}`` of the derived ``f``, ``g``, ``Σ``, ``du/dt`` and ``Φ``."""
        return display.equations(self.model(config))

    def show(self, config):
        """The text ``hierarchy show --config`` prints."""
        return display.show(self.model(config))


SPIKED_PCA = SpikedPCAFamily()
