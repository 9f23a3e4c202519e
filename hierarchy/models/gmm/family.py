"""The Gaussian-mixture classifiers as model families: ``gmm-binary`` and ``gmm-xor``.

One class, two instances (the mixtures differ only in data: :data:`~.model.KINDS`). The
family's face to the shared layers: config tables and validation, ``hierarchy solve`` (the
ballistic ODE: the shared integrate loop at finite ``λ``, the projected Heun–Filippov scheme
at ``λ = ∞``, see :mod:`.ballistic`), ``hierarchy sgd`` (the networks themselves, many runs
at once), ``hierarchy fixed-points`` and ``hierarchy show --config``.

Config (the interface of the effective-dynamics issue):

- ``[model] snr = λ`` (a number, or ``"inf"``), ``ridge = α``; ``gmm-xor`` adds
  ``width = K``;
- ``[sgd] dimension = N``, ``step = c_δ`` (``δ = c_δ/N``), ``runs``, ``seed``;
- ``[study] dimensions``, ``runs``, ``seed``, ``scheduler``, ``workers``: the study of the
  ODE against SGD across ``N`` (:mod:`hierarchy.models.gmm.study`: from ``"statistics"``
  one shared ODE; from the Gaussian start each run against the ODE from its own start);
- ``[init] source = "gaussian"`` (the seed's random start; ``hierarchy solve`` integrates from
  one draw of its ``N → ∞`` statistics, chosen by ``init.seed``) or ``"statistics"`` with
  ``[init.statistics]`` (labels missing from the table start at 0).
"""

import math

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
    start_table,
)
from hierarchy.core.certification import integrator_tolerances
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import interruptible
from hierarchy.models.base import ModelFamily
from hierarchy.models.gmm import ballistic, basins, sgd, symbolic
from hierarchy.models.gmm.fixed_points import fixed_points as classified_fixed_points
from hierarchy.models.gmm.model import Mixture
from hierarchy.models.gmm.spectral import XorSpectra
from hierarchy.models.gmm.starts import from_table, gaussian_start
from hierarchy.models.gmm.study import STUDY, odes_from_starts
from hierarchy.models.gmm.system import system as mixture_system
from hierarchy.ode.default_job import write_solved
from hierarchy.ode.integrate import SolveInterrupted
from hierarchy.spectra import config as spectra_config
from hierarchy.spectra.job import run_ensemble
from hierarchy.spectra.snapshot import block_names
from hierarchy.study import dimension_config

KEY_HELP = {
    "solve.method": ("The scipy integrator of the finite-lambda ODE. At `snr = \"inf\"` the "
                     "fixed-step Heun-Filippov scheme solves it and no integrator is read: "
                     "another method than the default is refused there.",
                     "RK45, RK23, DOP853, Radau, BDF, LSODA"),
    "model.snr": ("Signal-to-noise ratio lambda of the mixture (noise I/lambda); `\"inf\"` "
                  "is the noiseless limit, with its sliding modes (Filippov).",
                  f'number >= {SNR_MIN:g}, or "inf"'),
    "model.ridge": ("Ridge alpha of the penalty (alpha/2)|W|^2.",
                    f"number in [0, {RIDGE_MAX:g}]"),
    "model.width": ("Hidden width K of the network.", "integer in 1..64 (2 for gmm-binary)"),
    "init.source": ("`gaussian`: the random start of the seed (N -> oo statistics of one draw "
                    "for `solve`); `statistics`: the values of `[init.statistics]`.",
                    "gaussian | statistics"),
    "init.statistics": ("Starting values by label; missing labels start at 0. The R{i}{j} "
                        "are inner products of weight vectors: they must form a positive "
                        "semi-definite matrix.",
                        f"table of numbers in [-{START_LIMIT:g}, {START_LIMIT:g}]"),
    "init.seed": ("Seed of the Gaussian start's draw (`solve`); setting it with a `statistics` "
                  "start, which does not read it, to another value than its default is an error.",
                  "integer >= 0"),
    "sgd.step": ("Step constant c_delta; the SGD step is delta = c_delta / N.",
                 f"number in (0, {STEP_MAX:g}]"),
    **SGD_KEY_HELP,
    **dimension_config.KEY_HELP,
}
#: ``sgd.dimension`` of each mixture (:meth:`~hierarchy.models.gmm.model.Mixture.minimum_dimension`)
DIMENSION_HELP = {
    "binary": ("Dimension N of the data.", "integer >= 3"),
    "xor": ("Dimension N of the data.",
            "integer >= 4, and >= 2 + model.width from init.statistics"),
}
#: The study's dimensions: SGD costs ``O(N^2)`` per unit of ODE time, so smaller than spiked
#: PCA's; 40 runs because the Gaussian start costs one paired ODE solve per run
STUDY_DEFAULTS = {**dimension_config.DEFAULTS, "dimensions": [50, 100, 200, 400], "runs": 40}


def check_method_is_used(config, model, default):
    """Refuse a ``[solve] method`` other than the default at ``lambda = inf``, where no
    integrator reads it: the fixed-step Heun-Filippov scheme runs (the summary said
    ``heun-filippov`` whatever the config asked for)."""
    method = config.get("solve", {}).get("method", default)
    if math.isinf(model.snr) and method != default:
        raise HierarchyError(
            f'solve.method = "{method}" is not used at model.snr = "inf": the fixed-step '
            "Heun-Filippov scheme solves it (its check divides the step); remove "
            "solve.method, or give a finite snr", field="solve.method")

class MixtureFamily(ModelFamily):
    """A two-layer network classifying a Gaussian mixture, seen through its statistics."""

    state_name = "u"
    path_fields = ()
    resource_keys = ("sgd.runs", "sgd.dimension", "model.width", "solve.points",
                     "solve.t_final")
    #: init.seed draws the Gaussian start only (SGD has sgd.seed)
    read_only_when = {"init.seed": (("init.source", ("gaussian",)),)}

    def __init__(self, name, kind, width, description, spectra=False):
        self.name = name
        self.kind = kind
        self.key_help = {**KEY_HELP, "sgd.dimension": DIMENSION_HELP[kind],
                         **(spectra_config.KEY_HELP if spectra else {})}
        self.defaults = {
            "model": {"snr": 100.0, "ridge": 0.1, "width": width},
            "init": {"source": "gaussian", "seed": 0, "statistics": {}},
            "solve": {"t_final": 100.0, "points": 101, "rtol": 1e-4, "atol": 1e-7,
                      "method": "RK45"},
            "sgd": {"dimension": 250, "step": 1.0, "runs": 200, "seed": 0,
                    "paired_runs": PAIRED_RUNS},
            "study": dict(STUDY_DEFAULTS),
        }
        if spectra:
            self.defaults["spectra"] = dict(spectra_config.DEFAULTS)
        self.section_help = {"model": description, "init": "Where the statistics start.",
                             "sgd": "Online SGD of the network itself, many runs at once.",
                             "study": "The ballistic ODE against SGD across the dimension N "
                                      "(`hierarchy study`)."}

    # 2
    def validate(self, config, sections=None):
        model = self.mixture(config)
        check_method_is_used(config, model, self.defaults["solve"]["method"])
        table, init = config["sgd"], config["init"]
        init["statistics"] = check_start(init, model.labels, self.name)
        if init["source"] == "statistics":
            from_table(model, init["statistics"])  # R positive semi-definite
        table["dimension"] = self.check_dimension(config, model)
        for key, low in (("runs", 1), ("seed", 0)):
            table[key] = fields.integer(table, "sgd", key, low)
        table["paired_runs"] = check_paired_runs(table)
        init["seed"] = fields.integer(init, "init", "seed", 0)
        self.check_ensemble(config, model, table["dimension"], table["runs"])
        dimension_config.validate_study(config["study"])
        if "spectra" in config:
            spectra_config.validate_spectra(
                config["spectra"], t_final=float(config["solve"]["t_final"]),
                dimension=table["dimension"], block_names=block_names("xor", model.width),
                step_time=self.time_per_step(config))
        return config

    def check_dimension(self, config, model):
        """``sgd.dimension`` as an integer SGD can run in from the config's start."""
        source = config["init"]["source"]
        table = config["sgd"]
        low = model.minimum_dimension(source)
        dimension = fields.integer(table, "sgd", "dimension", model.signals + 2)
        if dimension < low:
            raise HierarchyError(f"sgd.dimension must be an integer >= {low} "
                                 f"({model.dimension_reason(source)}); got {dimension}",
                                 field="sgd.dimension")
        return dimension

    def check_ensemble(self, config, model, dimension, runs, field="sgd.runs", steps=False):
        """The resource estimate of ``runs`` networks in ``dimension`` (before any work)."""
        check_sgd_ensemble(config, dimension, runs, width=model.width,
                           statistics=len(model.labels), keys=self.resource_keys, field=field,
                           steps=steps)

    def check_study(self, config):
        """The study's own check (before any job): every ``study.dimensions`` entry runs."""
        model = self.mixture(config)
        source = config["init"]["source"]
        dimension_config.check_study_dimensions(
            config, model.minimum_dimension(source), model.dimension_reason(source),
            lambda n, runs: self.check_ensemble(config, model, n, runs,
                                                field="study.dimensions", steps=True))

    def mixture(self, config):
        """The :class:`~hierarchy.models.gmm.model.Mixture` a config describes."""
        model = config["model"]
        return Mixture(kind=self.kind, snr=model["snr"], ridge=model["ridge"],
                       width=model["width"], step=config["sgd"]["step"])

    # 3, 4, 5, 6
    def build_arguments(self, config):
        model = self.mixture(config)
        return {"kind": model.kind, "snr": model.snr, "ridge": model.ridge,
                "width": model.width, "step": model.step}

    def system(self, config):
        return mixture_system(self.mixture(config))

    def initial_state(self, config, system=None):
        model = self.mixture(config)
        init = config["init"]
        if init["source"] == "statistics":
            return from_table(model, init["statistics"])
        return gaussian_start(model, 1, seed=init["seed"])[:, 0]

    def time_per_step(self, config):
        return float(config["sgd"]["step"]) / float(config["sgd"]["dimension"])

    # 7
    def run_sgd(self, config, out_dir, *, resume=False, progress=None):
        """``hierarchy sgd``: ``runs`` networks trained together on fresh samples."""
        table = config["sgd"]
        init = config["init"]
        start = start_table(init)
        model = self.mixture(config)

        def run(times, observer=None, **loop):
            return sgd.run_sgd(model, table["dimension"], table["runs"], times,
                               seed=table["seed"], start=start, observer=observer, **loop)

        adapter = (XorSpectra(model, table["dimension"], config["solve"])
                   if "spectra" in self.defaults else None)
        return run_ensemble(config, out_dir, run, self.output_times(config), adapter,
                            state_name=self.state_name, resume=resume, progress=progress,
                            dimension=int(table["dimension"]), sampler="network SGD")

    # 8
    def run_solve(self, config, out_dir, progress):
        """``hierarchy solve``: the ballistic ODE from the config's start."""
        model = self.mixture(config)
        start = self.initial_state(config)
        times = self.output_times(config)
        settings = config["solve"]

        def solve(level=0):  # level: the integrator CHECK_FACTOR^level more accurate
            rtol, atol = integrator_tolerances(settings, level)
            return ballistic.solve(model, start, times, rtol=rtol, atol=atol,
                                   dt=ballistic.DT / ballistic.STEP_CHECK_FACTOR ** level,
                                   progress=progress, method=settings["method"])
        with interruptible():
            try:
                trajectory = solve()
            except SolveInterrupted as stop:  # keep the trajectory so far (complete: false)
                write_solved(out_dir, config, stop.result, self.state_name,
                             stop.result.info.get("method", ""))
                raise
            return write_solved(out_dir, config, trajectory, self.state_name,
                                trajectory.info.get("method", ""),
                                ballistic.solve_check(model, solve, settings), progress)

    # 14
    def paired_odes(self, config, labels, starts, times):
        """The ballistic ODE from each run's own start (:func:`.study.odes_from_starts`)."""
        return odes_from_starts(config, labels, starts, times)

    # 11
    def study_model(self):
        """The ODE against SGD across ``N`` (:mod:`hierarchy.models.gmm.study`)."""
        return STUDY

    # 12, 13
    def fixed_points(self, config, progress=None):
        """The fixed points of the ballistic ODE, classified by stability."""
        return classified_fixed_points(self.mixture(config), progress)

    def show(self, config):
        return symbolic.show(self.mixture(config))

    def ensemble_summary(self, config, t, u_runs):
        """What ``hierarchy sgd`` prints and adds to ``sgd.png``: the classes the runs serve
        (:mod:`hierarchy.core.run_report`), not the mean of statistics that are symmetric
        across runs (about 0 for XOR)."""
        model = self.mixture(config)
        fractions = basins.served_over_time(model, u_runs)
        return (basins.class_count_table(model, fractions, t[-1]),
                [basins.class_count_panel(model, fractions)])



GMM_BINARY = MixtureFamily(
    "gmm-binary", "binary", 2,
    "Binary Gaussian mixture (class 1 at +mu, class 0 at -mu, noise I/lambda) learned by a "
    "width-2 ReLU network with sigmoid output; statistics v1 v2 m1 m2 R11 R12 R22.")
GMM_XOR = MixtureFamily(
    "gmm-xor", "xor", 4,
    "XOR Gaussian mixture (class 1 at +-mu, class 0 at +-nu, noise I/lambda) learned by a "
    "width-K ReLU network with sigmoid output; "
    "statistics v{i}, m{i}_mu, m{i}_nu, R{i}{j} (i <= j).", spectra=True)
