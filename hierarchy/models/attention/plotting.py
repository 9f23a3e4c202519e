"""How the attention family's words and times are named in figures.

- :func:`math_label`: a word's moment in mathematics, not its raw label (tied ``1.2`` ->
  ``q₁₂``, untied ``M1.Mt2`` -> ``q⁽¹⁾₁₂``, direct ``Psi1.2`` -> ``Ψ₁₂``, longer words
  ``μ(1.1.2)``);
- :func:`time_label`: the axis label of a parameterization's time (``t = 4nα/d`` for tied),
  made from :data:`hierarchy.models.attention.variants.VARIANTS`.

The ``make_*_figure`` functions here are those of :mod:`hierarchy.core.plotting` with these
labels filled in (the parameterization inferred from the labels when not given);
:func:`~hierarchy.core.plotting.save_figure` is importable from here too, so a caller that
draws attention figures needs one import.
"""

import re

from hierarchy.core import plotting
from hierarchy.core.errors import HierarchyError
from hierarchy.core.plotting import save_figure, subscript
from hierarchy.models.attention.variants import VARIANTS

#: time variable of a parameterization -> its symbol on an axis
TIME_SYMBOLS = {"t": "t", "tau": "τ"}
UNTIED_LETTER = re.compile(r"^(Mt|M|A|B)(\d+)$")
DIRECT_LETTER = re.compile(r"^(St|S)(\d+)$")
DIRECT_ORDER = re.compile(r"^(t|Psi|Omega)(\d+(?:\.\d+)?)$")


def _time_axis(variant):
    factor = f"{variant.time_factor:g}" if variant.time_factor != 1 else ""
    return f"{TIME_SYMBOLS[variant.time_variable]} = {factor}nα/d"


#: parameterization -> axis label of its time (``t = 4nα/d``: ``n`` SGD steps)
TIME_LABELS = {name: _time_axis(variant) for name, variant in VARIANTS.items()}


# ----------------------------------------------------------------------------- labels

def label_parameterization(label):
    """The parameterization a word label belongs to (tied, untied or direct).

    Raises
    ------
    HierarchyError
        If the label is none of the three kinds (README "Words and labels").
    """
    parts = str(label).split(".")
    if all(p.isdigit() for p in parts):
        return "tied"
    if DIRECT_ORDER.match(str(label)) or all(DIRECT_LETTER.match(p) for p in parts):
        return "direct"
    if all(UNTIED_LETTER.match(p) for p in parts):
        return "untied"
    raise HierarchyError(f"{label!r} is not a word label (examples: 1.2, M1.Mt2, Psi1.2)",
                         field="label")


def labels_parameterization(labels):
    """The one parameterization of a list of labels (tied when the list is empty)."""
    kinds = {label_parameterization(label) for label in labels}
    if len(kinds) > 1:
        raise HierarchyError(f"labels mix parameterizations {sorted(kinds)}", field="labels")
    return kinds.pop() if kinds else "tied"


def math_label(label, parameterization=None):
    """Readable mathematics for a word label.

    Parameters
    ----------
    label : str
        A word label (README "Words and labels").
    parameterization : {"tied", "untied", "direct"}, optional
        Checked against the label; inferred from it when omitted.

    Returns
    -------
    str
        Tied ``1`` -> ``t₁``, ``1.2`` -> ``q₁₂``, longer ``μ(1.1.2)``; untied ``M1`` ->
        ``μ(M₁)``, ``A1`` -> ``tᴬ₁``, ``M1.Mt2`` -> ``q⁽¹⁾₁₂``, ``M1.M2`` -> ``q⁽²⁾₁₂``,
        longer ``μ(M₁B₁M₂ᵀ)``; direct ``t1`` -> ``t₁``, ``Psi1.2`` -> ``Ψ₁₂``,
        ``Omega1.2`` -> ``Ω₁₂``, longer ``μ(S₁S₂ᵀS₁)``.

    Raises
    ------
    HierarchyError
        A label of no parameterization, or not of ``parameterization``.
    """
    label = str(label)
    kind = label_parameterization(label)
    if parameterization is not None and parameterization != kind:
        raise HierarchyError(f"label {label!r} is not a {parameterization} word label",
                             field="label")
    return MATH_LABELS[kind](label)


def _tied_math(label):
    idx = label.split(".")
    if len(idx) <= 2:
        return ("t" if len(idx) == 1 else "q") + subscript(idx)
    return f"μ({label})"


def _untied_math(label):
    letters = [UNTIED_LETTER.match(p).groups() for p in label.split(".")]
    kinds = [k for k, _ in letters]
    idx = [i for _, i in letters]
    if kinds in (["A"], ["B"]):
        return ("tᴬ" if kinds == ["A"] else "tᴮ") + subscript(idx)
    if kinds in (["M", "Mt"], ["M", "M"]):
        return ("q⁽¹⁾" if kinds[1] == "Mt" else "q⁽²⁾") + subscript(idx)
    names = {"M": "M", "Mt": "M", "A": "A", "B": "B"}
    return "μ(" + "".join(names[k] + subscript([i]) + ("ᵀ" if k == "Mt" else "")
                          for k, i in letters) + ")"


def _direct_math(label):
    order = DIRECT_ORDER.match(label)
    if order:
        name, idx = order.groups()
        return {"t": "t", "Psi": "Ψ", "Omega": "Ω"}[name] + subscript(idx.split("."))
    letters = [DIRECT_LETTER.match(p).groups() for p in label.split(".")]
    return "μ(" + "".join("S" + subscript([i]) + ("ᵀ" if k == "St" else "")
                          for k, i in letters) + ")"


#: parameterization -> its label typesetter
MATH_LABELS = {"tied": _tied_math, "untied": _untied_math, "direct": _direct_math}


def time_label(parameterization):
    """Axis label of a parameterization's time variable (``t = 4nα/d`` for tied).

    Raises
    ------
    HierarchyError
        An unknown parameterization (naming the field ``parameterization``).
    """
    if parameterization not in TIME_LABELS:
        raise HierarchyError(f"parameterization must be one of {', '.join(TIME_LABELS)}, "
                             f"got {parameterization!r}", field="parameterization")
    return TIME_LABELS[parameterization]


def labeller(parameterization):
    """``label -> math_label(label, parameterization)``, for :mod:`hierarchy.core.plotting`."""
    return lambda label: math_label(label, parameterization)


# ----------------------------------------------------------------------------- figures

__all__ = ["TIME_LABELS", "figure_options", "label_parameterization", "labeller",
           "labels_parameterization", "make_errors_figure", "make_observables_figure",
           "make_sgd_figure", "make_trajectories_figure", "math_label", "save_figure",
           "time_label"]


def figure_options(parameterization):
    """``math_label`` and ``time_label`` keyword arguments of the core figures."""
    return {"math_label": labeller(parameterization), "time_label": time_label(parameterization)}


def sgd_title(config):
    """The title of ``sgd.png``: the model, the loss and the SGD settings of a config."""
    model, sgd, loss = config["model"], config["sgd"], config.get("loss", {})
    trainable = ",".join(str(k) for k in model.get("trainable", []))
    seeds = sgd.get("seeds", [])
    count = len(seeds) if isinstance(seeds, list) else seeds
    return (f"online SGD: {model['parameterization']}, K = {model['K']}, trainable {trainable}, "
            f"loss {loss.get('name', '?')}; d = {sgd.get('d')}, α = {sgd.get('learning_rate'):g}, "
            f"B = {sgd.get('batch')}, {count} seed{'s' * (count != 1)}")


def make_observables_figure(t, series, parameterization=None, **options):
    """:func:`hierarchy.core.plotting.make_observables_figure` with attention labels."""
    parameterization = parameterization or labels_parameterization(series)
    return plotting.make_observables_figure(t, series, math_label=labeller(parameterization),
                                            **options)


def save_observables_figure(path, t, series, parameterization=None, **options):
    """:func:`make_observables_figure` saved at ``path``; returns the figure."""
    fig = make_observables_figure(t, series, parameterization, **options)
    save_figure(fig, path)
    return fig


def make_sgd_figure(t, mu_seeds, loss_seeds, labels, parameterization=None, max_panels=6):
    """:func:`hierarchy.core.plotting.make_sgd_figure` with attention labels and time."""
    parameterization = parameterization or labels_parameterization(labels)
    return plotting.make_sgd_figure(t, mu_seeds, loss_seeds, labels,
                                    math_label=labeller(parameterization),
                                    time_label=time_label(parameterization),
                                    max_panels=max_panels)


def make_errors_figure(analysis, degrees, labels, parameterization=None, extrapolated=None):
    """:func:`hierarchy.core.plotting.make_errors_figure` with attention labels."""
    parameterization = parameterization or labels_parameterization(labels)
    return plotting.make_errors_figure(analysis, degrees, labels,
                                       math_label=labeller(parameterization),
                                       extrapolated=extrapolated)


def make_trajectories_figure(t, degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None,
                             parameterization=None, extrapolation=None):
    """:func:`hierarchy.core.plotting.make_trajectories_figure` with attention labels."""
    parameterization = parameterization or labels_parameterization(labels)
    return plotting.make_trajectories_figure(
        t, degrees, labels, hierarchy_mu, flow_mu, sgd_mu_seeds,
        math_label=labeller(parameterization), time_label=time_label(parameterization),
        extrapolation=extrapolation)
