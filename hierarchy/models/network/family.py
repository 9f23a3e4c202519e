"""The ``network`` family's face to the shared layers: ``NETWORK``.

Config (the interface of issue 22): ``[model] data, loss, ridge``; ``[model.student] width,
activation, second_layer, second_layer_values``; ``[model.teacher] width, activation, noise,
overlaps, second_layer_values``; ``[init] source`` (``statistics`` with ``[init.statistics]``,
or ``gaussian``: a random start drawn at ``[sgd] dimension``); ``[solve]``; ``[sgd] dimension,
step, step_second_layer, runs, seed``; ``[spectra]`` (run 0's Hessian and G spectra along
``hierarchy sgd``, :mod:`hierarchy.models.network.spectral`).
"""

import dataclasses
from pathlib import Path

import numpy as np

from hierarchy.config import fields
from hierarchy.config.statistics_start import (
    PAIRED_RUNS,
    SGD_KEY_HELP,
    check_paired_runs,
    check_start,
)
from hierarchy.core.certification import (
    CHECK_FACTOR,
    at_the_floor,
    integrator_tolerances,
    promote,
    saturation,
    tolerance_function,
)
from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import hold_signals, interruptible, write_result
from hierarchy.core.progress import Progress
from hierarchy.core.run_report import plot_solved
from hierarchy.core.trajectory import Status
from hierarchy.models.base import ModelFamily
from hierarchy.models.network import activations, inputs, mixture, starts
from hierarchy.models.network.engine import TARGET_FACTOR
from hierarchy.models.network.structured import system_of
from hierarchy.models.network import resources as network_resources
from hierarchy.models.network.model import (
    BATCH_RATIO,
    CONSTRAINTS,
    DATA,
    MAX_BATCH,
    MAX_WIDTH,
    SECOND_LAYERS,
    TEACHER_DEFAULTS,
    check_batch,
    check_plain_sgd,
    network_from_config,
    state_labels,
    teacher_labels,
)
from hierarchy.models.network import study as network_study
from hierarchy.models.network.spectral import NetworkSpectra, block_names, check_spectra_network
from hierarchy.spectra import config as spectra_config
from hierarchy.spectra.job import run_ensemble
from hierarchy.sgd.ensemble import RowValue
from hierarchy.study import dimension_config
from hierarchy.ode.default_job import DEFAULT_SETTINGS, trajectory_summary
from hierarchy.ode.integrate import SolveInterrupted
from hierarchy.ode.system import integrate_system

#: largest ``sgd.dimension`` (the Gaussian start draws ``K x N`` weights)
MAX_DIMENSION = 10_000_000

#: ``[solve] field``: the evaluator choice of :meth:`NetworkFamily.system`
SOLVE_FIELDS = ("auto", "quadrature")

KEY_HELP = {
    "model.data": ("The data: `teacher` (x ~ N(0, I_N), y = sum_n v*_n g*(nu_n) + sigma xi) or "
                   "`mixture` (a labelled Gaussian mixture).", " \\| ".join(DATA)),
    "model.loss": ("The loss l(yhat, y): `mse` = (yhat - y)^2/2, `logistic` = "
                   "log(1 + exp(-y yhat)) (labels +-1), or an expression in `yhat` and `y`, "
                   "finite for every real input and growing more slowly than exp(c z^2), "
                   "alone and with yhat, y as functions of the Gaussian fields, and smooth "
                   "(no abs, sign, sqrt(u**2)).",
                   f"{' | '.join(activations.LOSS_NAMES)} | a whitelisted expression "
                   f"(polynomial degree <= {activations.LOSS_DEGREE})"),
    "model.ridge": ("Ridge alpha of the penalty (alpha/2N) sum_k |w_k|^2 per step.",
                    "number in 0..1000"),
    "model.student.width": ("Student width K (hidden units).",
                            f"integer in 1..{MAX_WIDTH} (the term table of the field, "
                            "predicted from K, M and the loss, must fit: mse to K = M = 21)"),
    "model.student.activation": ("Student activation g: `erf` means erf(x/sqrt 2); or an "
                                 "expression in `x`, it and its derivative finite for every "
                                 "real x and growing more slowly than exp(c x^2) (kinks: abs, "
                                 "sign, sqrt(x**2), routed like relu).",
                                 f"{' | '.join(activations.ACTIVATION_NAMES)} | expression in x "
                                 f"(polynomial degree <= {activations.ACTIVATION_DEGREE})"),
    "model.student.second_layer": ("`fixed`: v stays at `second_layer_values`; `trained`: v is "
                                   "learnt (labels v1..vK), starting there.",
                                   " | ".join(SECOND_LAYERS)),
    "model.student.second_layer_values": ("The student's second layer v (fixed values or the "
                                          "start); `[]`: all 1.",
                                          "[] or K numbers of magnitude <= 1000"),
    "model.teacher.width": ("Teacher width M (`data = \"teacher\"`).",
                            f"integer in 1..{MAX_WIDTH}"),
    "model.teacher.activation": ("Teacher activation g* (the same rules as the student's).",
                                 f"{' | '.join(activations.ACTIVATION_NAMES)} | expression in x"),
    "model.teacher.noise": ("Label noise sigma: y gets sigma xi, xi ~ N(0, 1).",
                            "number in 0..1000"),
    "model.teacher.overlaps": ("Teacher overlaps T = w*_n.w*_m/N (labels T{n}.{m}, constant); "
                               "`[]`: the identity; `drawn`: the overlaps of M teachers with "
                               "i.i.d. N(0, 1) weights in dimension `sgd.dimension`, drawn once "
                               "from `init.seed` (T = I + O(N^-1/2)) and shared by the ODE and "
                               "every SGD run.",
                               '[], "drawn" or a symmetric positive semi-definite M x M matrix'),
    "model.teacher.second_layer_values": ("The teacher's second layer v*; `[]`: all 1.",
                                          "[] or M numbers of magnitude <= 1000"),
    "model.teacher.target": ("A multi-index target y = f*(nu1, .., nuM) replacing "
                             "sum_n v*_n g*(nu_n): an expression in nu1..nuM (whitelisted "
                             "parser, never evaluated as code); `\"\"`: none. With a target, "
                             "a teacher activation or second_layer_values other than their "
                             "defaults is an error. Polynomials and erf, erfc, tanh, atan, sin, "
                             "cos of them (no nu in an exponent, numbers at most 1000 in "
                             "magnitude, integer exponents written as integers, polynomial "
                             "degree at most 8 as written, a call counting as its argument's "
                             "degree: `nu1**9 + nu1` is refused); a committee "
                             "sum_n c_n h(nu_n) is the teacher g* = h, v* = c, with a "
                             "teacher's limits.",
                             '"" or an expression in nu1..nuM'),
    "init.source": ("`statistics`: start from `[init.statistics]`; `gaussian`: draw the student "
                    "weights w_k ~ N(0, scale^2 I_N) and a teacher with overlaps T at "
                    "`sgd.dimension`, and start from their Q, R.", "statistics | gaussian"),
    "init.statistics": ("Starting values by label (Q{i}.{k} with i <= k, R{i}.{n}, and v{i} when "
                        "trained); missing Q, R start at 0, missing v at "
                        "`second_layer_values`. [[Q, R], [R^T, T]] must be positive "
                        "semi-definite. With structured `model.inputs`: Q{i}.{k}@{b}, "
                        "R{i}.{n}@{b} set block b (from 1), a key without @ every block; "
                        "each block's [[q_b, r_b], [r_b^T, t_b]] must be positive "
                        "semi-definite.", "table of numbers"),
    "init.scale": ("Standard deviation of each student weight of the Gaussian start "
                   "(`source = \"gaussian\"` only: with a `statistics` start, which does not "
                   "read it, setting it to another value than its default is an error).",
                   "number > 0 and <= 1000"),
    "init.seed": ("Seed of the Gaussian start's draw and of `model.teacher.overlaps = "
                  "\"drawn\"` (setting it, to another value than its default, where neither reads "
                  "it is an error).",
                  "integer >= 0"),
    "sgd.dimension": ("Input dimension N of SGD (and of the Gaussian start).",
                      f"integer in 2..{MAX_DIMENSION}"),
    "sgd.step": ("Learning rate eta of the first layer: w_k <- w_k - eta dl/dlambda_k x/sqrt(N).",
                 "number > 0 and <= 1000"),
    "sgd.step_second_layer": ("Learning rate eta_v of a trained second layer: "
                              "v_k <- v_k - (eta_v/N) dl/dv_k; `\"step\"`: eta. A number "
                              "with `second_layer = \"fixed\"`, which does not read it, is an "
                              "error.",
                              "\"step\" or a number > 0 and <= 1000"),
    "sgd.batch": ("Mini-batch size B: B fresh samples per step, gradients averaged; time is "
                  "still alpha = steps/N (samples seen: B alpha N), and the ODE's eta^2 "
                  "corrector is divided by B. The ODE is that of B << N: B proportional to N "
                  "(the large-batch limit) is refused.",
                  f"integer in 1..{MAX_BATCH}; above 1, at most sgd.dimension/{BATCH_RATIO}"),
    "solve.field": ("How the ODE's expectations are evaluated. `auto`: the term table (closed "
                    "forms, the compiled engine) where it applies, else the compiled joint "
                    "engine over at most four Gaussian fields (certifiable, can be slow: a "
                    "logistic K = M = 2 solve to alpha = 300 takes minutes), else randomised "
                    "QMC; `quadrature`: randomised QMC for every expectation (fast for a first "
                    "look, never certified: `hierarchy solve` exits 3).",
                    " | ".join(SOLVE_FIELDS)),
    "sgd.constraint": ("`sphere`: spherical SGD, every w_k renormalised to |w_k|^2 = N after "
                       "each step (Q_kk = 1 held; the start must have Q_kk = 1, a Gaussian "
                       "start is normalised); `none`: the free step.",
                       " | ".join(CONSTRAINTS)),
    **mixture.KEY_HELP,
    **inputs.KEY_HELP,
    **SGD_KEY_HELP,
    **dimension_config.KEY_HELP,
    **spectra_config.KEY_HELP,
    "spectra.times": ("Times alpha (= steps/N, the family's time, as `solve.t_final`) at which "
                      "`hierarchy sgd` records the Hessian and G spectra of run 0, each at the "
                      "SGD step nearest it (empty: no recording).",
                      spectra_config.KEY_HELP["spectra.times"][1]),
    "spectra.top": ("Eigenpairs per block; `auto`: K + M for W_i (the dimension of span{w_k, "
                    "w*_n}), K for v.", '"auto" or integer >= 1'),
    "spectra.blocks": ("Blocks to record: `all`, or a list of names (W1 .. WK; v when the "
                       "second layer is trained).", '"all" or list of block names'),
}


def check_second_layer_step(net, value):
    """Refuse a learning rate of the second layer (``sgd.step_second_layer`` other than its
    default ``"step"``) for a network whose second layer is fixed: nothing would read it."""
    if not net.trained_second_layer and value != "step":
        raise HierarchyError(f"sgd.step_second_layer = {fields.show(value)} is set but would be "
                             'ignored: model.student.second_layer = "fixed" trains no second '
                             'layer; remove it, or set model.student.second_layer = "trained"',
                             field="sgd.step_second_layer")


class NetworkFamily(ModelFamily):
    """Two-layer networks learning teacher or mixture data, seen through ``Q``, ``R``, ``v``."""

    name = "network"
    state_name = "u"
    show_formats = ("text", "latex")
    #: one step advances alpha by 1/N whatever sgd.step (the learning rate)
    step_count_key = None
    #: the keys that set a run's size (named by resource and out-of-memory errors)
    resource_keys = network_resources.SGD_KEYS
    key_help = KEY_HELP
    section_help = {
        "model": "A two-layer student yhat = sum_k v_k g(w_k.x/sqrt N), its data and its loss "
                 "(`[model.student]`, `[model.teacher]`).",
        "init": "Where the order parameters start.",
        "solve": "Output times (alpha = steps/N) and integrator of `hierarchy solve`.",
        "sgd": "Online SGD of the network itself.",
        "study": "The ODE against SGD across the dimension N (`hierarchy study`): "
                 "max over alpha of |mean SGD - ODE| for every statistic and eg, and its "
                 "slope against N.",
        "spectra": "The Hessian and G spectra of run 0 recorded by `hierarchy sgd` "
                   "(spectra.npz), with their prediction from the statistics along the ODE.",
    }
    defaults = {
        "model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                  "student": {"width": 2, "activation": "erf", "second_layer": "fixed",
                              "second_layer_values": []},
                  "teacher": dict(TEACHER_DEFAULTS),
                  "mixture": mixture.DEFAULTS, "inputs": inputs.DEFAULTS},
        "init": {"source": "statistics", "statistics": {}, "scale": 0.01, "seed": 0},
        "solve": {"t_final": 300.0, "points": 301, "rtol": 1e-8, "atol": 1e-10,
                  "field": "auto"},
        "sgd": {"dimension": 1000, "step": 1.0, "step_second_layer": "step", "runs": 20,
                "seed": 0, "paired_runs": PAIRED_RUNS, "batch": 1,
                "constraint": "none"},
        "study": dict(network_study.STUDY_DEFAULTS),
        "spectra": dict(spectra_config.DEFAULTS),
    }

    #: the Gaussian start's keys; init.seed also draws model.teacher.overlaps = "drawn"
    read_only_when = {
        "init.scale": (("init.source", ("gaussian",)),),
        "init.seed": (("init.source", ("gaussian",)), ("model.teacher.overlaps", ("drawn",))),
    }

    def network(self, config):
        """The :class:`~hierarchy.models.network.model.Network` of a merged config."""
        return network_from_config(config)

    # 2
    def validate(self, config, sections=None):
        """Check the model, ``[init]`` and ``[sgd]``; one line naming the field."""
        net = self.network(config)
        sgd = config["sgd"]
        check_second_layer_step(net, sgd["step_second_layer"])
        sgd["dimension"] = fields.integer(sgd, "sgd", "dimension", 2, MAX_DIMENSION)
        sgd["runs"] = fields.integer(sgd, "sgd", "runs", 1)
        sgd["seed"] = fields.integer(sgd, "sgd", "seed", 0)
        check_batch(net, sgd["dimension"])
        sgd["paired_runs"] = check_paired_runs(sgd)
        if "solve" in config:
            config["solve"]["field"] = fields.choice(config["solve"], "solve", "field",
                                                     SOLVE_FIELDS)
        init = config["init"]
        init["seed"] = fields.integer(init, "init", "seed", 0)
        init["scale"] = fields.real(init, "init", "scale", 0.0, True, 1e3)
        init["statistics"] = check_start(init, starts.start_labels(net), self.name)
        if init["source"] == "statistics":
            starts.from_table(net, init["statistics"])  # the PSD check of [[Q, R], [R^T, T]]
        network_resources.check_table(net)
        network_resources.check_solve_matrices(config, net)
        network_resources.check_sgd(config, net)
        if "study" in config:
            dimension_config.validate_study(config["study"])
        if "spectra" in config:
            self.validate_spectra(config, net)
        return config

    def validate_spectra(self, config, net):
        """``[spectra]`` (:func:`hierarchy.spectra.config.validate_spectra`), and the networks
        it covers (a scalar loss); one line naming the field, before any work."""
        table = config["spectra"]
        spectra_config.validate_spectra(
            table, t_final=float(config["solve"]["t_final"]),
            dimension=config["sgd"]["dimension"], block_names=block_names(net),
            step_time=self.time_per_step(config))
        if table["times"]:
            check_spectra_network(net)

    # 3, 4, 5, 6
    def build_arguments(self, config):
        model = config["model"]
        return {"model": model, "step": config["sgd"]["step"],
                "step_second_layer": config["sgd"]["step_second_layer"]}

    def system(self, config):
        """The :class:`~hierarchy.models.network.field.NetworkSystem` of ``config`` (the
        per-block :class:`~hierarchy.models.network.structured.StructuredSystem` with
        structured inputs); the expectation engine's target is
        :data:`~.engine.TARGET_FACTOR` times the solve's ``atol``."""
        net = self.network(config)
        choice = config.get("solve", {}).get("field", self.defaults["solve"]["field"])
        system = system_of(net, "quadrature" if choice == "quadrature" else "auto")
        if hasattr(system, "set_quadrature_target"):  # the engine's target: 0.01 atol
            atol = config.get("solve", {}).get("atol", self.defaults["solve"]["atol"])
            system.set_quadrature_target(TARGET_FACTOR * float(atol))
        return system

    def initial_state(self, config, system=None):
        """The start: ``[init.statistics]``, or the order parameters of a Gaussian draw."""
        net = self.network(config)
        init = config["init"]
        if init["source"] == "statistics":
            return starts.from_table(net, init["statistics"])
        return starts.gaussian_start(net, config["sgd"]["dimension"], init["scale"],
                                     init["seed"])

    def time_per_step(self, config):
        """One SGD step advances ``alpha = steps/N`` by ``1/N`` (``c_delta/N`` for a mixture in
        the seed's convention): the SGD's own map (:func:`.sgd.time_per_step`)."""
        from hierarchy.models.network import sgd as network_sgd
        return network_sgd.time_per_step(self.network(config), config["sgd"]["dimension"])

    def time_label(self, config):
        return "α"

    # 7 (N2)
    def run_sgd(self, config, out_dir, *, resume=False, progress=None):
        """``hierarchy sgd``: ``sgd.runs`` networks trained together on fresh samples
        (:mod:`hierarchy.models.network.sgd`); the summary adds ``eg``, the population risk
        (the field's ``eg`` at each run's recorded statistics, exact for teacher data),
        averaged over the runs alive at each output time. With ``[spectra] times`` run 0's
        spectra go to ``spectra.npz`` (:func:`hierarchy.spectra.job.run_ensemble`)."""
        from hierarchy.models.network import sgd as network_sgd
        net, table, init = self.network(config), config["sgd"], config["init"]
        network_sgd.check_dimension(net, table["dimension"])
        start = self.initial_state(config) if init["source"] == "statistics" else None

        def run(times, observer=None, **loop):
            return network_sgd.run_sgd(net, table["dimension"], table["runs"], times,
                                       seed=table["seed"], start=start, scale=init["scale"],
                                       observer=observer, **loop)

        built = {}

        def population_risk(state):  # the field is built once SGD is done, as it was
            if "system" not in built:
                built["system"] = self.system(config)
            return built["system"].eg(state)

        risk = RowValue("eg", population_risk,
                        eg_source="population risk of each run's statistics (field eg)")

        adapter = None
        if config.get("spectra", {}).get("times"):
            adapter = NetworkSpectra(net, table["dimension"], table["runs"], table["seed"],
                                     start, init["scale"],
                                     {**DEFAULT_SETTINGS, **config["solve"]})
        return run_ensemble(config, out_dir, run, self.output_times(config), adapter,
                            state_name=self.state_name, row_value=risk, resume=resume,
                            progress=progress, dimension=int(table["dimension"]),
                            sampler="network SGD")

    # 8
    def run_solve(self, config, out_dir, progress):
        """``hierarchy solve``: the ODE from the start, with ``eg`` at every output time."""
        progress = Progress.quiet() if progress is None else progress
        settings = {**DEFAULT_SETTINGS, **config["solve"]}
        system = self.system(config)
        start = np.asarray(self.initial_state(config, system), dtype=float)
        times = self.output_times(config)

        def solve(level=0):  # level: integrator tolerances CHECK_FACTOR^level tighter
            rtol, atol = integrator_tolerances(settings, level)
            return integrate_system(
                system, start, (float(times[0]), float(times[-1])), t_eval=times,
                method=str(settings["method"]), rtol=rtol, atol=atol, progress=progress)

        with interruptible():
            short_before = getattr(system, "rows_short", 0)
            try:
                result = solve()
            except SolveInterrupted as stop:
                with hold_signals(redeliver=False):  # a second Ctrl-C: already stopping
                    write_solution(out_dir, config, system, stop.result,
                                   interrupted=stop.result.message)
                raise

            def check(result, eg):  # post-processing, after the trajectory and eg are kept
                # before the tightened re-solve, whose tighter target leaves rows short
                reason = coarse_reason(system, short_before)
                if result.status != Status.COMPLETE:  # a re-solve would stop there too
                    return Checks(unchecked=UNCHECKED)
                return checked_solve(config, system, solve, result, eg, reason, progress)
            return write_solution(out_dir, config, system, result, check=check)

    def format_summary(self, summary):
        lines = [super().format_summary(summary)]
        if summary.get("eg_final") is not None:
            lines.append(f"  eg  {summary['eg_final']:.6g}  (population risk)")
        lines.append(certification_line(summary))
        return "\n".join(lines)

    def horizon_line(self, summary):
        """The one line of a solve that cannot be certified (exit status 3)."""
        return certification_line(summary)

    # 11 (N2)
    def study_model(self):
        """The ODE against SGD across ``N`` (:mod:`hierarchy.models.network.study`)."""
        return network_study.STUDY

    def check_study(self, config):
        """The study's own check (before any job)."""
        network_study.check(config)

    # 14, 15
    def paired_odes(self, config, labels, starts, times):
        """The ODE from each run's own start (:func:`.study.odes_from_starts`)."""
        return network_study.odes_from_starts(config, labels, starts, times)

    def unit_matching(self, config):
        """Student units matched to teacher units by maximum ``|R|``
        (:mod:`hierarchy.models.network.matching`), when they are interchangeable."""
        from hierarchy.models.network.matching import unit_matching
        return unit_matching(self.network(config))

    # 12 (N2)
    def fixed_points(self, config, progress=None):
        """The symmetric plateau (with its escape eigenvalue), the specialised point and the
        end of the solve, classified (:mod:`hierarchy.models.network.fixed_points`)."""
        from hierarchy.models.network import fixed_points as network_fixed_points
        check_plain_sgd(self.network(config), "the fixed-point search")  # before any work
        if self.network(config).inputs is not None:
            raise HierarchyError("fixed points: the symmetric and specialised points are found "
                                 "for isotropic inputs only; allowed: model.inputs.covariance "
                                 '= "identity"', field="model.inputs.covariance")
        system = self.system(config)
        start = self.initial_state(config, system)
        end, _ = network_study.ode_solution(config, system, start, self.output_times(config))
        return network_fixed_points.fixed_points(self.network(config), system, end[-1, :-1])

    def distances_to_state(self, config, labels, y, u, near):
        """``(T,)``: each row of ``y`` ``(T, n)``'s least ``max |y_t - P u|`` over the student
        relabellings ``P`` of ``u`` (the same point of the dynamics: the ODE does not tell its
        student units apart), states ordered like ``labels``; exact below ``near``
        (:func:`~.relabelling.relabelled_distance`, any ``K``)."""
        from hierarchy.models.network import relabelling
        net = self.network(config)
        y, u = np.atleast_2d(np.asarray(y, dtype=float)), np.asarray(u, dtype=float)
        if not relabelling.students_exchangeable(net) or set(labels) != set(net.labels):
            return np.max(np.abs(y - u), axis=1, initial=0.0)
        columns = relabelling.UnitColumns(net, labels)
        return np.array([relabelling.relabelled_distance(columns, row, u, near) for row in y])

    # 13
    def show(self, config, format="text"):
        """The derived equations of ``config`` (:mod:`hierarchy.models.network.display`)."""
        from hierarchy.models.network.display import render
        net = self.network(config)
        if net.inputs is None:
            return render(net, format)
        note = (f"Structured inputs ({net.inputs.covariance}, L = {net.inputs.blocks} blocks): "
                "the expectations below are taken at the local fields' covariance C = sum_b "
                "f_b rho_b [[q_b, r_b], [r_b^T, t_b]]; each block moves by dq_b = -eta rho_b "
                "(X_b A + A^T X_b^T) + eta^2 rho_b E[dl dl^T], dr_b = -eta rho_b A^T [r_b; t_b], "
                "A = C^+ E[z dl^T] (docs/network.md, Structured inputs).")
        return note + "\n\n" + render(dataclasses.replace(net, inputs=None), format)


#: why a solve that stopped early (it blew up) is not certified when its field needs the
#: re-solves: they would stop at the same place, and the stated errors alone are estimates
UNCHECKED = ("the solve stopped before its end, so the re-solves that check the field's "
             "stated errors did not run")


@dataclasses.dataclass
class Checks:
    """What the certification of a solve ran (:func:`checked_solve`).

    ``result``, ``eg``: the trajectory kept (the solve's, or a tighter one that replaced it)
    and ``eg`` along it; ``level``: how many times the tolerances were divided by
    :data:`CHECK_FACTOR` for it; ``tight``, ``coarse``: the tightened and the coarse
    re-solves (each ``(trajectory, eg along it)`` or None); ``unchecked``: why they did not
    run; ``replaced``: the largest change of the states each replaced solve's check made."""
    result: object = None
    eg: object = None
    level: int = 0
    tight: object = None
    coarse: object = None
    unchecked: str = None
    replaced: list = dataclasses.field(default_factory=list)


def checked_solve(config, system, solve, result, eg, reason, progress):
    """The certification's re-solves of a complete ``result`` (``eg`` along it), as
    :class:`Checks`.

    The solve again with the integrator's ``rtol`` and ``atol`` and the engine's target
    :data:`CHECK_FACTOR` times tighter: its change of the states and of ``eg`` measures the
    integration's global error (the solver controls only its local error: near a saddle the
    dynamics amplify it hundreds of times) and the quadrature's effect together. When that
    change exceeds ``atol + rtol |u|`` somewhere and the tolerances can still be tightened,
    the tighter solve replaces the result and is checked by one tighter again (at most
    :data:`~hierarchy.core.certification.MAX_PROMOTIONS` times, ``rtol`` at least
    :data:`~hierarchy.core.certification.TIGHTEST_RTOL`: the shared loop
    :func:`~hierarchy.core.certification.promote`). The coarse
    re-solve (:func:`coarse_solve`, when ``reason``) runs last, at the kept solve's
    tolerances.
    """
    checks = Checks(result=result, eg=eg)
    if getattr(system, "uncertifiable", None):  # standard errors: no re-solve makes them bounds
        return checks
    tolerance_of = tolerance_function(config)

    def announce(level):
        rtol, atol = integrator_tolerances(config["solve"], level + 1)
        return (f"certification: the solve again at rtol = {rtol:g}, atol = {atol:g}"
                + (f" and a {CHECK_FACTOR ** (level + 1):g}x tighter quadrature target"
                   if getattr(system, "adaptive", False) else ""))

    def usable(kept, tight):  # a kept eg that is not finite stays incomplete, not replaced
        return tight[0].status == Status.COMPLETE and bool(np.all(np.isfinite(kept[1])))

    promotion = promote((result, eg), lambda level: tightened_solve(system, solve, level),
                        lambda kept, tight: _moved(*kept, tight),
                        lambda kept: tolerance_of(kept[0]), usable,
                        saturation(config["solve"]), progress,
                        announce)
    (checks.result, checks.eg), checks.level = promotion.kept, promotion.level
    checks.tight, checks.replaced = promotion.check, promotion.replaced
    checks.unchecked = at_the_floor(config["solve"], checks.level)
    if reason is not None:
        progress.line("certification: the solve again with every quadrature row one "
                      f"order lower ({reason})")
        checks.coarse = coarse_solve(system, lambda: solve(checks.level), checks.level)
    return checks


def tightened_solve(system, solve, level=0):
    """The a-posteriori check of a solve at ``level``: ``solve(level + 1)`` (the integrator's
    tolerances :data:`CHECK_FACTOR` times tighter), with the engine's target divided by
    :data:`CHECK_FACTOR` too when the field has one; returns ``(trajectory, eg along it)``
    and restores the target."""
    target = getattr(system, "quadrature_target", None)
    if target is None:  # closed forms: only the integrator is tightened
        return _solve_again(system, lambda: solve(level + 1), lambda: None, lambda: None)
    return _solve_again(system, lambda: solve(level + 1),
                        lambda: system.set_quadrature_target(
                            target / CHECK_FACTOR ** (level + 1)),
                        lambda: system.set_quadrature_target(target))


def coarse_reason(system, short_before):
    """Why the coarse re-solve runs (:func:`coarse_solve`), or None when it need not: engine
    rows that ran to their highest order short of their target (more of them than
    ``short_before``, the engines' count before the solve), or closed forms taken just off
    the ties, whose stated error follows no target (they are always checked:
    :attr:`~.field.EngineTarget.untargeted_rows`)."""
    reasons = []
    if getattr(system, "rows_short", 0) > short_before:
        reasons.append("rows ran to their highest order short of their target")
    untargeted = getattr(system, "untargeted_rows", None)
    if untargeted:
        reasons.append(untargeted)
    return "; ".join(reasons) or None


def coarse_solve(system, solve, level=0):
    """The a-posteriori check of rows that ran to their highest order: ``solve()`` again
    with every row's highest order one lower; returns ``(trajectory, eg along it)`` and
    restores the orders.

    A row that met its target stops where it stopped (or one order lower, a change within
    its target); a row that ran to its highest order without meeting it gives the order
    below, which differs from the solve's value by exactly its stated error, with its sign.
    A lifted closed form (relu's and erf's steps, :class:`~.closed_forms.LiftedMoment`)
    gives its value its stated error away too: its four-dimensional orthants' lower rule,
    and a lift further off the ties. The tightened re-solve cannot move such rows (they are
    at their highest order, or follow no target), so this is the re-solve that measures
    what their stated errors do to the trajectory.
    """
    target = getattr(system, "quadrature_target", None)

    def change():  # the kept solve's target (a replaced one ran at a tighter one)
        system.set_orders_below_top(1)
        if level and target is not None:
            system.set_quadrature_target(target / CHECK_FACTOR ** level)

    def restore():
        system.set_orders_below_top(0)
        if level and target is not None:
            system.set_quadrature_target(target)
    return _solve_again(system, solve, change, restore)


def _solve_again(system, solve, change, restore):
    """``(trajectory, eg along it)`` of ``solve()`` after ``change()``; ``restore()`` after,
    whatever happens."""
    change()
    try:
        again = solve()
        eg = np.array([system.eg(u) for u in again.y])
    finally:
        restore()
    return again, eg


def _moved(solved, eg, check):
    """``(states, eg)``: the largest changes a re-solve ``check = (trajectory, eg along
    it)`` made at each output time the two share."""
    other, other_eg = check
    rows = min(len(other.y), len(solved.y))
    return (np.max(np.abs(other.y[:rows] - solved.y[:rows]), axis=1, initial=0.0),
            np.abs(other_eg[:rows] - eg[:rows]))


def certify(config, system, result, eg, check=None, coarse=None, unchecked=None, level=0,
            replaced=()):
    """The ``quadrature_error`` summary of a solved trajectory (see :func:`write_solution`):
    ``check`` the tightened re-solve (:func:`tightened_solve`), ``coarse`` the one with the
    rows one order lower (:func:`coarse_solve`), each ``(trajectory, eg along it)`` or None;
    ``unchecked``: why the re-solves the field needs did not run (:data:`UNCHECKED`), which
    leaves the result not certified; ``level``, ``replaced``: see :class:`Checks`."""
    used_rtol, used_atol = integrator_tolerances(config["solve"], level)
    field_error = np.zeros(len(result.y))
    eg_error = np.zeros(len(result.y))
    for j, u in enumerate(result.y):
        rhs_error, risk_error = system.quadrature_error(u)
        field_error[j] = float(np.max(rhs_error, initial=0.0))
        eg_error[j] = risk_error
    tolerance = tolerance_function(config)(result)
    bad = (field_error > tolerance) | (eg_error > tolerance)
    out = {"field": float(field_error.max(initial=0.0)), "eg": float(eg_error.max(initial=0.0)),
           "target": getattr(system, "quadrature_target", None),
           "times_checked": int(len(result.y)),
           # the integrator's tolerances of the trajectory kept (tighter than the config's
           # when a solve moved by more than atol + rtol |u| under its check was replaced)
           "integrator": {"rtol": used_rtol, "atol": used_atol, "level": int(level),
                          "replaced_moves": [float(m) for m in replaced]}}
    # the two re-solves move different rows (those below their highest order, and those
    # at it): their changes add up, and the sum is held to the tolerance
    moved_state, moved_risk = np.zeros(len(result.y)), np.zeros(len(result.y))
    if check is not None:
        state, risk = _moved(result, eg, check)
        rows = len(state)
        moved_state[:rows] += state
        moved_risk[:rows] += risk
        out.update(trajectory=float(state.max(initial=0.0)), eg_trajectory=float(risk.max(
            initial=0.0)), check_factor=CHECK_FACTOR,
            # bitwise the same: every row was already at its highest order (or exact), so
            # the tighter target changed no value and the re-solve checked nothing
            check_changed_nothing=bool(rows and not state.any() and not risk.any()))
    if coarse is not None:
        state, risk = _moved(result, eg, coarse)
        rows = len(state)
        moved_state[:rows] += state
        moved_risk[:rows] += risk
        out.update(coarse_trajectory=float(state.max(initial=0.0)),
                   coarse_eg_trajectory=float(risk.max(initial=0.0)))
    bad |= (moved_state > tolerance) | (moved_risk > tolerance)
    reason = getattr(system, "uncertifiable", None) or unchecked
    if reason:  # standard errors, not bounds, or estimates no re-solve checked
        out["not_certifiable"] = reason
        bad[:] = True
    out["certified"] = bool(not bad.any())
    out["first_uncertified"] = float(result.t[np.argmax(bad)]) if bad.any() else None
    return out


def certification_line(summary):
    """One line: the field, its largest quadrature errors and whether the result is certified."""
    error = summary.get("quadrature_error", {})
    line = (f"field: {summary.get('engine', '')}; largest quadrature error of the field "
            f"{error.get('field', 0.0):.3g}, of eg {error.get('eg', 0.0):.3g}")
    factor = error.get("check_factor", CHECK_FACTOR)
    if error.get("check_changed_nothing"):
        line += (f"; the solve with a {factor:g}x tighter quadrature target gave the same "
                 "trajectory bit for bit (every row already at its highest order or exact), "
                 "so it checks nothing beyond the stated errors")
    elif error.get("trajectory") is not None:
        line += (f"; the solve with {factor:g}x tighter rtol, atol and quadrature target moved "
                 f"the states by {error['trajectory']:.3g}, eg by {error['eg_trajectory']:.3g}")
    integrator = error.get("integrator", {})
    if integrator.get("level"):
        moves = ", ".join(f"{m:.3g}" for m in integrator.get("replaced_moves", []))
        line += (f"; solved at rtol = {integrator['rtol']:.3g}, atol = {integrator['atol']:.3g} "
                 f"(the solves at looser tolerances moved by {moves} under their checks, more "
                 "than atol + rtol |u|)")
    if error.get("coarse_trajectory") is not None:
        line += (f"; with every row one order lower (the rows short of their target, and "
                 f"those whose stated error no target follows, move by it) the states moved by "
                 f"{error['coarse_trajectory']:.3g}, eg by {error['coarse_eg_trajectory']:.3g}")
    if error.get("certified", True):
        return line + f" (certified at every output time against atol + rtol |u|)"
    if error.get("not_certifiable"):
        return line + f" -- NOT CERTIFIED: {error['not_certifiable']}"
    return (line + f" -- NOT CERTIFIED from alpha = {error.get('first_uncertified', 0.0):.6g}: "
            "the stated quadrature error, or the re-solves' change of the states, exceeds "
            "atol + rtol |u| of the solve")


def write_solution(out_dir, config, system, result, interrupted=None, check=None):
    """Write ``result.npz`` (``t``, ``labels``, ``u``, ``eg``) and ``result.json``.

    The trajectory is written first, before any slow post-processing, marked incomplete
    (``stage: "post-processing"``, ``eg`` NaN): an interrupt from there on keeps every row.
    An interrupted solve stops there (``eg`` not computed). Otherwise ``eg`` is computed row
    by row, then ``check()`` (``(tight, coarse)``: the tightened solve,
    :func:`tightened_solve`, and the one with every row an order lower, :func:`coarse_solve`,
    each or both None) and the quadrature errors; an interrupt in any of them keeps the
    ``eg`` rows done, still incomplete. The summary then adds ``eg_final``, the field's
    ``engine``, ``teacher_overlaps`` and ``quadrature_error`` (:func:`certify`): the largest
    stated quadrature error of the field and of ``eg`` over every output time; with the
    checks the largest change of the states and of ``eg`` each made; ``certified`` when at
    every output time the stated errors, and the sum of the checks' changes, are within the
    solve's ``atol + rtol max|u|``. ``certified`` is
    repeated at the top level and ``beyond_horizon`` is its negation (``hierarchy solve``
    exits 3). An ``eg`` that is not finite leaves the result incomplete (``not_finite``).
    """
    summary = trajectory_summary(result, interrupted=interrupted)
    net = system.net
    summary["teacher_overlaps"] = {label: float(net.overlap_matrix[n, m]) for (n, m), label
                                   in zip(zip(*np.triu_indices(net.M)), teacher_labels(net.M))}
    summary["engine"] = system.engine
    arrays = {}
    if net.inputs is not None:
        arrays = field_arrays(net, result.y)
        summary["inputs"] = {"covariance": net.inputs.covariance, "blocks": net.inputs.blocks,
                             "trace": net.inputs.trace}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    eg = np.full(len(result.t), np.nan)
    if interrupted is not None:
        summary["eg"] = "not computed: interrupted"
        write_network_result(out_dir, config, result, eg, summary, False, arrays)
        return summary
    write_network_result(out_dir, config, result, eg, dict(summary, stage="post-processing",
                                                          eg="not computed yet"), False, arrays)
    done = 0
    try:
        for u in result.y:
            eg[done] = system.eg(u)
            done += 1
        checks = check(result, eg) if check is not None else Checks()
        if checks.result is not None:  # a tighter solve may have replaced it
            result, eg = checks.result, checks.eg
        error = certify(config, system, result, eg, checks.tight, checks.coarse,
                        checks.unchecked, level=checks.level, replaced=checks.replaced)
    except KeyboardInterrupt:
        with hold_signals(redeliver=False):  # a second Ctrl-C: already stopping
            write_network_result(out_dir, config, result, eg,
                                 dict(summary, stage="post-processing",
                                      eg=f"interrupted: {done} of {len(eg)} rows computed"),
                                 False, arrays)
        raise
    summary.update(eg_final=float(eg[-1]) if eg.size else None, quadrature_error=error,
                   certified=error["certified"])
    if not error["certified"]:
        summary["beyond_horizon"] = True
        summary["beyond_from"] = error["first_uncertified"]
    complete = result.status == Status.COMPLETE and bool(np.all(np.isfinite(eg)))
    if result.status == Status.COMPLETE and not complete:
        count = int(np.sum(~np.isfinite(eg)))
        summary["not_finite"] = {
            "count": count, "t": float(result.t[np.argmin(np.isfinite(eg))]),
            "message": f"eg is not finite at {count} of {len(eg)} output times (first: t = "
                       f"{float(result.t[np.argmin(np.isfinite(eg))]):.6g}); the result is "
                       "kept, marked incomplete"}
    write_network_result(out_dir, config, result, eg, summary, complete, arrays)
    plot_solved(out_dir, config, result, NETWORK, extra={"eg": eg},  # after the result
                uncertified_from=summary.get("beyond_from"))
    return summary


def write_network_result(out_dir, config, result, eg, summary, complete, arrays=None):
    """``result.npz`` and ``result.json`` of a solve (``complete`` as given); ``arrays``:
    more arrays (the structured inputs' local fields)."""
    write_result(out_dir, t=result.t, mu=result.y, labels=result.labels, config=config,
                 summary=summary, extra_arrays={"eg": eg, **(arrays or {})},
                 complete=complete, state_name="u", command="solve")


def field_arrays(net, states):
    """``field_labels`` (``Q{i}.{k}``, ``R{i}.{n}``) and ``fields`` ``(T, len)``: the local
    fields' covariance ``Q = w Sigma w/N``, ``R = w Sigma w*/N`` at every state."""
    K, M = net.K, net.M
    labels = state_labels(K, M, False)
    iu = np.triu_indices(K)
    values = np.zeros((len(states), len(labels)))
    for j, u in enumerate(states):
        c = net.inputs.field_covariance(net, u)
        values[j] = np.concatenate([c[:K, :K][iu], c[:K, K:].reshape(-1)])
    return {"field_labels": np.array(labels), "fields": values}


NETWORK = NetworkFamily()
