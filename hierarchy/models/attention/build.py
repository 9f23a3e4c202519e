"""From a config to a compiled attention hierarchy.

:func:`build_arguments` is the one place a config becomes the arguments of
:func:`hierarchy.build` (and of :func:`hierarchy.models.attention.operators.build_field`,
which takes the same ones): the solve job, the SGD job and the study all call it.
"""


def build_arguments(config, degree=None):
    """The model arguments of ``build``/``build_field`` for a validated config.

    Parameters
    ----------
    config : dict
        A validated config (:func:`hierarchy.config.loader.load_config`).
    degree : int, optional
        Truncation degree; default ``[hierarchy] degree``.

    Returns
    -------
    dict
        ``parameterization``, ``K``, ``trainable`` (1-based tuple), ``degree`` and
        ``observables`` (tuple of labels).
    """
    model, hier = config["model"], config["hierarchy"]
    return {
        "parameterization": model["parameterization"],
        "K": int(model["K"]),
        "trainable": tuple(int(k) for k in model["trainable"]),
        "degree": int(degree if degree is not None else hier["degree"]),
        "observables": tuple(hier.get("observables", ())),
    }
