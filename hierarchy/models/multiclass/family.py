"""The multiclass logistic regression on a k-class Gaussian mixture: ``gmm-multiclass``.

The family's face to the shared layers (contract C.2): config tables and validation,
``hierarchy solve`` (the ballistic ODE of :mod:`.field` through the one integrate loop),
``hierarchy sgd`` (the classifier itself, many runs at once, :mod:`.sgd`), ``hierarchy
study`` (the ODE against SGD across ``d``, :mod:`.study`), ``hierarchy fixed-points``
(:mod:`.fixed_points`) and ``hierarchy show --config`` (:func:`show`).

Config: ``[model] classes = k``, ``snr = lambda`` (a number or ``"inf"``), ``ridge = beta``,
``weights`` (``"uniform"`` or ``k`` numbers), ``means`` (``"orthonormal"`` or a ``k x k``
Gram matrix); ``[sgd] dimension, step, runs, seed``; ``[init] source = "gaussian"`` (``m = 0``,
``R_perp = I``) or ``"statistics"`` with ``[init.statistics]``.
"""

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
from hierarchy.models.multiclass import field, sgd
from hierarchy.models.multiclass.fixed_points import (
    fixed_points as classified_fixed_points,
)
from hierarchy.models.multiclass.model import MAX_CLASSES, Multiclass
from hierarchy.models.multiclass.spectral import MulticlassSpectra
from hierarchy.models.multiclass.starts import from_table, gaussian_start
from hierarchy.models.multiclass.study import STUDY, odes_from_starts
from hierarchy.ode.default_job import write_solved
from hierarchy.ode.integrate import SolveInterrupted
from hierarchy.spectra import config as spectra_config
from hierarchy.spectra.job import run_ensemble
from hierarchy.spectra.snapshot import block_names
from hierarchy.study import dimension_config

KEY_HELP = {
    "model.classes": ("Number k of classes (mixture components and output units).",
                      f"integer in 2..{MAX_CLASSES}"),
    "model.snr": (("Signal-to-noise ratio lambda (noise I/lambda); `\"inf\"` is the noiseless "
                   "limit (C.17)-(C.18)."), f'number >= {SNR_MIN:g}, or "inf"'),
    "model.ridge": ("Ridge beta of the penalty (beta/2)|x|^2.", f"number in [0, {RIDGE_MAX:g}]"),
    "model.weights": ("Class probabilities p_1..p_k.",
                      '"uniform", or a list of k positive numbers summing to 1'),
    "model.means": (("The unit means: `orthonormal` (coordinates e_{50 i} when d >= 50 k, "
                     "else e_i) or their Gram matrix (realised by the rows of its Cholesky "
                     "factor in the first k coordinates)."),
                    ('"orthonormal", or a k x k symmetric positive definite list of lists '
                     "with unit diagonal")),
    "init.source": (("`gaussian`: x^c ~ N(0, I/d), i.e. m = 0, R_perp = I; `statistics`: the "
                     "values of `[init.statistics]`."), "gaussian | statistics"),
    "init.statistics": (("Starting values by label (m{a}.{b}, R{a}.{b} with a <= b); missing "
                         "labels take the Gaussian start's value; the R values must form a "
                         "positive semi-definite matrix."),
                        f"table of numbers in [-{START_LIMIT:g}, {START_LIMIT:g}]"),
    "sgd.dimension": ("Dimension d of the data.", "integer >= 2 k"),
    "sgd.step": ("Step constant c_delta; the SGD step is delta = c_delta / d.",
                 f"number in (0, {STEP_MAX:g}]"),
    **SGD_KEY_HELP,
    **dimension_config.KEY_HELP,
    **spectra_config.KEY_HELP,
}
#: The study's dimensions and runs: SGD costs ``O(k d^2)`` per unit of ODE time
STUDY_DEFAULTS = {**dimension_config.DEFAULTS, "dimensions": [50, 100, 200, 400], "runs": 20}


class MulticlassFamily(ModelFamily):
    """Multiclass logistic regression on a k-class Gaussian mixture, seen through (m, R_perp)."""

    name = "gmm-multiclass"
    state_name = "u"
    path_fields = ()
    key_help = KEY_HELP
    resource_keys = ("sgd.runs", "sgd.dimension", "model.classes", "solve.points",
                     "solve.t_final")

    def __init__(self):
        """Fill ``defaults`` (1) and ``section_help`` (2) of the family."""
        self.defaults = {
            "model": {"classes": 10, "snr": 10.0, "ridge": 0.01, "weights": "uniform",
                      "means": "orthonormal"},
            "init": {"source": "gaussian", "statistics": {}},
            "solve": {"t_final": 50.0, "points": 51, "rtol": 1e-5, "atol": 1e-7,
                      "method": "RK45"},
            "sgd": {"dimension": 1000, "step": 1.0, "runs": 1, "seed": 0,
                    "paired_runs": PAIRED_RUNS},
            "study": dict(STUDY_DEFAULTS),
            "spectra": dict(spectra_config.DEFAULTS),
        }
        self.section_help = {
            "model": ("k-class Gaussian mixture (unit means, noise I/lambda) learned by "
                      "multiclass logistic regression with ridge; statistics "
                      "m{a}.{b} = <x^a, mu_b> and R{a}.{b} = <x^a_perp, x^b_perp>."),
            "init": "Where the statistics start.",
            "sgd": "Online SGD of the classifier itself, many runs at once.",
            "study": "The ballistic ODE against SGD across the dimension d (`hierarchy study`).",
            "spectra": ("The Hessian and G spectra of run 0 recorded by `hierarchy sgd` "
                        "(spectra.npz), with their prediction from the statistics.")}

    # 2
    def validate(self, config, sections=None):
        model = self.multiclass(config)
        table = config["sgd"]
        table["dimension"] = fields.integer(table, "sgd", "dimension", 2 * model.classes)
        for key, low in (("runs", 1), ("seed", 0)):
            table[key] = fields.integer(table, "sgd", key, low)
        table["paired_runs"] = check_paired_runs(table)
        self.check_ensemble(config, model, table["dimension"], table["runs"])
        config["init"]["statistics"] = self._start_table(config["init"], model)
        dimension_config.validate_study(config["study"])
        spectra_config.validate_spectra(
            config["spectra"], t_final=float(config["solve"]["t_final"]),
            dimension=table["dimension"], block_names=block_names("multiclass", model.classes),
            step_time=self.time_per_step(config))
        return config

    def check_ensemble(self, config, model, dimension, runs, field="sgd.runs", steps=False):
        """The resource estimate of ``runs`` classifiers in ``dimension`` (before any work)."""
        check_sgd_ensemble(config, dimension, runs, width=model.classes,
                           statistics=len(model.labels), keys=self.resource_keys, field=field,
                           steps=steps)

    def check_study(self, config):
        """The study's own check (before any job): every ``study.dimensions`` entry runs.

        Only the study needs ``study.dimensions >= 2 k``: a config of ``solve`` or ``sgd``
        with ``classes`` up to 32 is not refused for the study's default dimensions.
        """
        model = self.multiclass(config)
        dimension_config.check_study_dimensions(
            config, 2 * model.classes, "twice model.classes",
            lambda n, runs: self.check_ensemble(config, model, n, runs,
                                                field="study.dimensions", steps=True))

    def multiclass(self, config):
        """The :class:`~hierarchy.models.multiclass.model.Multiclass` a config describes."""
        table = config["model"]
        means = table["means"]
        if isinstance(means, str) and means != "orthonormal":
            raise HierarchyError(f"model.means must be \"orthonormal\" or a Gram matrix; got "
                                 f"{means!r}", field="model.means")
        return Multiclass(classes=table["classes"], snr=table["snr"], ridge=table["ridge"],
                          weights=table["weights"], gram=means, step=config["sgd"]["step"])

    def _start_table(self, init, model):
        table = check_start(init, model.labels, self.name)
        from_table(model, table)
        return table

    # 3, 4, 5, 6
    def build_arguments(self, config):
        model = self.multiclass(config)
        return {"classes": model.classes, "snr": model.snr, "ridge": model.ridge,
                "weights": list(model.weights), "gram": [list(r) for r in model.gram],
                "step": model.step}

    def initial_state(self, config, system=None):
        model = self.multiclass(config)
        init = config["init"]
        if init["source"] == "statistics":
            return from_table(model, init["statistics"])
        return gaussian_start(model)

    def time_per_step(self, config):
        return float(config["sgd"]["step"]) / float(config["sgd"]["dimension"])

    # 7
    def run_sgd(self, config, out_dir, *, resume=False, progress=None):
        """``hierarchy sgd``: ``runs`` classifiers trained together on fresh samples."""
        table = config["sgd"]
        init = config["init"]
        start = start_table(init)
        model = self.multiclass(config)

        def run(times, observer=None, **loop):
            return sgd.run_sgd(model, table["dimension"], table["runs"], times,
                               seed=table["seed"], start=start, observer=observer, **loop)

        adapter = MulticlassSpectra(model, table["dimension"], config["solve"])
        return run_ensemble(config, out_dir, run, self.output_times(config), adapter,
                            state_name=self.state_name, resume=resume, progress=progress,
                            dimension=int(table["dimension"]), sampler="multiclass SGD")

    # 8
    def run_solve(self, config, out_dir, progress):
        """``hierarchy solve``: the ballistic ODE from the config's start."""
        model = self.multiclass(config)
        times = self.output_times(config)
        settings = config["solve"]
        start = self.initial_state(config)

        def solve(level=0):  # level: rtol, atol CHECK_FACTOR^level tighter
            rtol, atol = integrator_tolerances(settings, level)
            return field.integrate_field(model, start, times, rtol=rtol, atol=atol,
                                         method=settings["method"])
        with interruptible():
            try:
                trajectory = solve()
            except SolveInterrupted as stop:  # keep the trajectory so far (complete: false)
                write_solved(out_dir, config, stop.result, self.state_name,
                             settings["method"])
                raise
            return write_solved(out_dir, config, trajectory, self.state_name,
                                settings["method"], field.solve_check(model, solve, settings),
                                progress)

    # 14
    def paired_odes(self, config, labels, starts, times):
        """The ballistic ODE from each run's own start (:func:`.study.odes_from_starts`)."""
        return odes_from_starts(config, labels, starts, times)

    # 11
    def study_model(self):
        """The ODE against SGD across ``d`` (:mod:`hierarchy.models.multiclass.study`)."""
        return STUDY

    # 12, 13
    def fixed_points(self, config, progress=None):
        """The fixed points of the ballistic ODE, classified by stability."""
        return classified_fixed_points(self.multiclass(config))

    def show(self, config):
        return show(self.multiclass(config))


def show(model):
    """The model and its ballistic equations as text."""
    head = (f"gmm-multiclass, k = {model.classes}, lambda = {model.snr:g}, "
            f"beta = {model.ridge:g}, delta = c_delta/d with c_delta = {model.step:g}; "
            f"p = ({', '.join(f'{w:g}' for w in model.weights)}); "
            f"{'orthonormal means' if model.orthonormal else 'Gram G given'}; "
            f"{len(model.labels)} statistics m{{a}}.{{b}}, R{{a}}.{{b}} (a <= b); Sigma = 0")
    law = ("  given class l: logits ell_a = m_al + xi_a, xi ~ N(0, Gram/lambda), "
           "Gram = m G^-1 m^T + R_perp; pi = softmax(ell); P^l_a = E[pi(a)], "
           "S^l_ab = E[pi(a) pi(b)]; Pbar = sum_l p_l P^l, Sbar = sum_l p_l S^l")
    if model.snr == float("inf"):
        lines = ["  P^l_a = e^{m_al} / sum_b e^{m_bl} (lambda = inf)",
                 "  dm_ab/dt = p_a G_ab - beta m_ab - sum_l p_l P^l_a G_lb",
                 "  dR_ab/dt = -2 beta R_ab"]
    else:
        lines = [("  dm_ab/dt = p_a G_ab - beta m_ab - sum_l p_l P^l_a G_lb "
                  "- (1/lambda) (Pbar_a m_ab - sum_c Sbar_ac m_cb)"),
                 ("  dR_ab/dt = -2 beta R_ab - (1/lambda) (A_ab + A_ba) + (c_delta/lambda) "
                  "sum_l p_l E[(pi(a) - 1{a=l}) (pi(b) - 1{b=l})],  "
                  "A_ab = Pbar_a R_ab - sum_c Sbar_ac R_cb"),
                 "  (expectations over fixed Sobol points and their negatives)"]
    return "\n".join([head, law] + lines)


GMM_MULTICLASS = MulticlassFamily()
