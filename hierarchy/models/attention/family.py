"""The attention-indexed family as a :class:`~hierarchy.models.base.ModelFamily`.

The three parameterizations (tied, untied, direct) are data, rows of
:data:`hierarchy.models.attention.variants.VARIANTS`; this class is the family's face to the
shared layers and only delegates to the family's own modules. Nothing inside
``models/attention`` imports this module (it sits on top of them).
"""

from hierarchy.models.attention import solve_job
from hierarchy.models.attention.build import build_arguments
from hierarchy.models.attention.variants import VARIANTS
from hierarchy.models.base import ModelFamily
from hierarchy.ode import solver as compiled


class AttentionFamily(ModelFamily):
    """Attention-indexed models: the trace-moment hierarchy of ``docs/math.md``."""

    name = "attention"
    defaults = {}  # the attention tables are the historical defaults of hierarchy.config

    def build_arguments(self, config, degree=None):
        return build_arguments(config, degree)

    def system(self, config, degree=None):
        return compiled.build(**self.build_arguments(config, degree))

    def variant(self, config):
        """The :class:`~hierarchy.models.attention.variants.Variant` a config names."""
        return VARIANTS[config["model"]["parameterization"]]

    def time_per_step(self, config):
        sgd = config["sgd"]
        return (self.variant(config).time_factor * float(sgd["learning_rate"])
                / float(sgd["d"]))

    def run_solve(self, config, out_dir, progress):
        return solve_job.run_solve(config, out_dir)


ATTENTION = AttentionFamily()
