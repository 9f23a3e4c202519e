"""The registry: name -> model family.

Adding a model family is one line in :data:`FAMILIES` (``docs/architecture.md``). Families
are named by ``"module:attribute"`` and imported on first use, so that ``hierarchy --help``
does not import every family, and so that the families (which import the shared layers)
never import this module back.

The other choice lists a config can name live next to the code that implements them, each
defined once: ODE methods in :data:`hierarchy.ode.integrate.METHODS`, SGD engines in
:data:`hierarchy.sgd.engines.ENGINES`, study references in
:data:`hierarchy.study.jobs.REFERENCES`, and each family's losses in that family.
"""

import importlib

from hierarchy.core.errors import HierarchyError

DEFAULT_FAMILY = "attention"

#: ``[model] family`` value -> ``"module:attribute"`` of its :class:`ModelFamily` instance
FAMILIES = {
    "attention": "hierarchy.models.attention.family:ATTENTION",
    "spiked-pca": "hierarchy.models.summary.family:SPIKED_PCA",
    "gmm-binary": "hierarchy.models.gmm.family:GMM_BINARY",
    "gmm-xor": "hierarchy.models.gmm.family:GMM_XOR",
    "gmm-multiclass": "hierarchy.models.multiclass.family:GMM_MULTICLASS",
    "network": "hierarchy.models.network.family:NETWORK",
}

_LOADED = {}


def family_names():
    """The registered family names, in registration order."""
    return tuple(FAMILIES)


def family(name=DEFAULT_FAMILY):
    """The :class:`~hierarchy.models.base.ModelFamily` registered as ``name``.

    Raises
    ------
    HierarchyError
        One line naming ``model.family`` and the allowed values, for an unknown name.
    """
    if name not in FAMILIES:
        raise HierarchyError(f"family must be one of {', '.join(FAMILIES)}; got {name!r}",
                             field="model.family")
    target = FAMILIES[name]
    if target not in _LOADED:
        module, attribute = target.split(":")
        _LOADED[target] = getattr(importlib.import_module(module), attribute)
    return _LOADED[target]


def family_of(config):
    """The family a (raw or merged) config names; the default when it names none."""
    model = config.get("model", {}) if isinstance(config, dict) else {}
    return family(model.get("family", DEFAULT_FAMILY) if isinstance(model, dict) else
                  DEFAULT_FAMILY)
