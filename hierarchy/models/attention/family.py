"""The attention-indexed family as a :class:`~hierarchy.models.base.ModelFamily`.

The three parameterizations (tied, untied, direct) are data, rows of
:data:`hierarchy.models.attention.variants.VARIANTS`; this class is the family's face to the
shared layers and only delegates to the family's own modules. Nothing inside
``models/attention`` imports this module (it sits on top of them).
"""

from hierarchy.models.attention import config as attention_config
from hierarchy.models.attention import plotting as attention_plotting
from hierarchy.models.attention import solve_job, study_jobs
from hierarchy.models.attention.sgd_problem import sgd_setup
from hierarchy.models.attention.build import build_arguments
from hierarchy.models.attention.variants import VARIANTS
from hierarchy.models.base import ModelFamily
from hierarchy.models.attention import compiled, display
from hierarchy.models.attention.operators import build_field


class AttentionFamily(ModelFamily):
    """Attention-indexed models: the trace-moment hierarchy of ``docs/math.md``."""

    name = "attention"
    state_name = "mu"
    defaults = attention_config.DEFAULTS  # [model], [loss], [hierarchy], [init]
    #: config fields holding a file path, relative to the config file's folder
    path_fields = attention_config.PATH_FIELDS
    #: docs/config.md: one line per table of this family, and (what, allowed) per key
    section_help = attention_config.SECTION_HELP
    key_help = attention_config.KEY_HELP
    #: what a run's memory grows with: the words of the degree, the matrices, the times
    resource_keys = ("hierarchy.degree", "model.K", "init.d", "sgd.d", "solve.points")

    def validate(self, config, sections=None):
        return attention_config.validate(config, sections)

    def math_label(self, label):
        return attention_plotting.math_label(label)

    def time_label(self, config):
        """Axis label of the family's time for a config (``t = 4nα/d`` for tied)."""
        return attention_plotting.time_label(config["model"]["parameterization"])

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

    def sgd_problem(self, config):
        """The :class:`~hierarchy.models.attention.sgd_problem.SgdSetup` of ``hierarchy sgd``."""
        return sgd_setup(config)

    def run_solve(self, config, out_dir, progress):
        return solve_job.run_solve(config, out_dir, progress=progress)

    def study_model(self):
        """The truncation-error study's computations (:mod:`.study_jobs`)."""
        return study_jobs

    def format_summary(self, summary):
        """The table ``hierarchy solve`` prints: final values, truncation check, validity."""
        return solve_job.format_summary(summary)

    def horizon_line(self, summary):
        """The validity horizon of a solve's summary and the exit status it implies."""
        return solve_job.horizon_line(summary)

    #: 13. the formats of :meth:`show`
    show_formats = display.FORMATS

    def show(self, config, format="text"):
        """The truncated equations of a config's model (``hierarchy show --config``).

        The field is the one ``hierarchy solve`` integrates (model, degree, observables of
        the config), rendered as ``hierarchy show`` renders its flags' field, after a line
        naming the config's loss.
        """
        field = build_field(**self.build_arguments(config))
        return display.render_config(field, config, format)


ATTENTION = AttentionFamily()
