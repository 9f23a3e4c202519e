"""The ``network`` family's face to the shared layers: ``NETWORK``.

Config (the interface of issue 22): ``[model] data, loss, ridge``; ``[model.student] width,
activation, second_layer, second_layer_values``; ``[model.teacher] width, activation, noise,
overlaps, second_layer_values``; ``[init] source`` (``statistics`` with ``[init.statistics]``,
or ``gaussian``: a random start drawn at ``[sgd] dimension``); ``[solve]``; ``[sgd] dimension,
step, step_second_layer, runs, seed``.
"""

from hierarchy.config import fields
from hierarchy.config.statistics_start import SGD_KEY_HELP, check_start
from hierarchy.models.base import ModelFamily
from hierarchy.models.network import activations, mixture
from hierarchy.models.network.model import DATA, MAX_WIDTH, SECOND_LAYERS, network_from_config

#: largest ``sgd.dimension`` (the Gaussian start draws ``K x N`` weights)
MAX_DIMENSION = 10_000_000

KEY_HELP = {
    "model.data": ("The data: `teacher` (x ~ N(0, I_N), y = sum_n v*_n g*(nu_n) + sigma xi) or "
                   "`mixture` (a labelled Gaussian mixture).", " \\| ".join(DATA)),
    "model.loss": ("The loss l(yhat, y): `mse` = (yhat - y)^2/2, `logistic` = "
                   "log(1 + exp(-y yhat)) (labels +-1), or an expression in `yhat` and `y`.",
                   f"{' | '.join(activations.LOSSES)} | a whitelisted expression"),
    "model.ridge": ("Ridge alpha of the penalty (alpha/2N) sum_k |w_k|^2 per step.",
                    "number in 0..1000"),
    "model.student.width": ("Student width K (hidden units).", f"integer in 1..{MAX_WIDTH}"),
    "model.student.activation": ("Student activation g: `erf` means erf(x/sqrt 2); or an "
                                 "expression in `x`.",
                                 f"{' | '.join(activations.ACTIVATIONS)} | expression in x "
                                 f"(polynomial degree <= {activations.ACTIVATION_DEGREE})"),
    "model.student.second_layer": ("`fixed`: v stays at `second_layer_values`; `trained`: v is "
                                   "learnt (labels v1..vK), starting there.",
                                   " | ".join(SECOND_LAYERS)),
    "model.student.second_layer_values": ("The student's second layer v (fixed values or the "
                                          "start); `[]`: all 1.",
                                          "[] or K numbers of magnitude <= 1000"),
    "model.teacher.width": ("Teacher width M (`data = \"teacher\"`).",
                            f"integer in 1..{MAX_WIDTH}"),
    "model.teacher.activation": ("Teacher activation g*.",
                                 f"{' | '.join(activations.ACTIVATIONS)} | expression in x"),
    "model.teacher.noise": ("Label noise sigma: y gets sigma xi, xi ~ N(0, 1).",
                            "number in 0..1000"),
    "model.teacher.overlaps": ("Teacher overlaps T = w*_n.w*_m/N (labels T{n}.{m}, constant); "
                               "`[]`: the identity.",
                               "[] or a symmetric positive semi-definite M x M matrix"),
    "model.teacher.second_layer_values": ("The teacher's second layer v*; `[]`: all 1.",
                                          "[] or M numbers of magnitude <= 1000"),
    "init.source": ("`statistics`: start from `[init.statistics]`; `gaussian`: draw the student "
                    "weights w_k ~ N(0, scale^2 I_N) and a teacher with overlaps T at "
                    "`sgd.dimension`, and start from their Q, R.", "statistics | gaussian"),
    "init.statistics": ("Starting values by label (Q{i}.{k} with i <= k, R{i}.{n}, and v{i} when "
                        "trained); missing Q, R start at 0, missing v at "
                        "`second_layer_values`. [[Q, R], [R^T, T]] must be positive "
                        "semi-definite.", "table of numbers"),
    "init.scale": ("Standard deviation of each student weight of the Gaussian start.",
                   "number > 0 and <= 1000"),
    "init.seed": ("Seed of the Gaussian start's draw.", "integer >= 0"),
    "sgd.dimension": ("Input dimension N of SGD (and of the Gaussian start).",
                      f"integer in 2..{MAX_DIMENSION}"),
    "sgd.step": ("Learning rate eta of the first layer: w_k <- w_k - eta dl/dlambda_k x/sqrt(N).",
                 "number > 0 and <= 1000"),
    "sgd.step_second_layer": ("Learning rate eta_v of a trained second layer: "
                              "v_k <- v_k - (eta_v/N) dl/dv_k; `\"step\"`: eta.",
                              "\"step\" or a number > 0 and <= 1000"),
    **mixture.KEY_HELP,
    **SGD_KEY_HELP,
}


class NetworkFamily(ModelFamily):
    """Two-layer networks learning teacher or mixture data, seen through ``Q``, ``R``, ``v``."""

    name = "network"
    state_name = "u"
    key_help = KEY_HELP
    section_help = {
        "model": "A two-layer student yhat = sum_k v_k g(w_k.x/sqrt N), its data and its loss "
                 "(`[model.student]`, `[model.teacher]`).",
        "init": "Where the order parameters start.",
        "solve": "Output times (alpha = steps/N) and integrator of `hierarchy solve`.",
        "sgd": "Online SGD of the network itself.",
    }
    defaults = {
        "model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                  "student": {"width": 2, "activation": "erf", "second_layer": "fixed",
                              "second_layer_values": []},
                  "teacher": {"width": 2, "activation": "erf", "noise": 0.0, "overlaps": [],
                              "second_layer_values": []},
                  "mixture": mixture.DEFAULTS},
        "init": {"source": "statistics", "statistics": {}, "scale": 0.01, "seed": 0},
        "solve": {"t_final": 300.0, "points": 301, "rtol": 1e-8, "atol": 1e-10},
        "sgd": {"dimension": 1000, "step": 1.0, "step_second_layer": "step", "runs": 20,
                "seed": 0},
    }

    def network(self, config):
        """The :class:`~hierarchy.models.network.model.Network` of a merged config."""
        return network_from_config(config)

    # 2
    def validate(self, config, sections=None):
        """Check the model, ``[init]`` and ``[sgd]``; one line naming the field."""
        net = self.network(config)
        sgd = config["sgd"]
        sgd["dimension"] = fields.integer(sgd, "sgd", "dimension", 2, MAX_DIMENSION)
        sgd["runs"] = fields.integer(sgd, "sgd", "runs", 1)
        sgd["seed"] = fields.integer(sgd, "sgd", "seed", 0)
        init = config["init"]
        init["seed"] = fields.integer(init, "init", "seed", 0)
        init["scale"] = fields.real(init, "init", "scale", 0.0, True, 1e3)
        init["statistics"] = check_start(init, net.labels, self.name)
        return config


NETWORK = NetworkFamily()
