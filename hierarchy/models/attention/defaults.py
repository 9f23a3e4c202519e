"""The attention family's config defaults: its tables and the shared tables it changes.

A module of plain data, so that what needs only the defaults (the command line's ``show``
and ``generate`` flags) does not import the family's validation (which loads sympy for
the losses) or its solver. :mod:`hierarchy.models.attention.config` validates against
these tables and re-exports them as its ``DEFAULTS``.
"""

from hierarchy.study.jobs import REFERENCES

DEFAULTS = {
    "model": {
        "parameterization": "tied",
        "K": 2,
        "trainable": [1],
        "tokens": 1,
        "covariance": [],  # [] means the identity
        "weight_decay": 0.0,
    },
    "loss": {
        "name": "quadratic",
        "student": "h1",
        "teacher": "h1",
        "expression": "",
    },
    "hierarchy": {
        "degree": 8,
        "observables": [],
    },
    "init": {
        "source": "gaussian",
        "moments": "",
        "d": 400,
        "width": [],
        "scale": [],
        "seed": 0,
    },
    "solve": {
        # certified by the default extrapolation (degrees 2..8): valid until 0.04 of 0.04;
        # at t_final = 0.05 it is valid only until 0.045 (radius about 0.089)
        "t_final": 0.04,
        "check_truncation": True,
        "extrapolate": True,
        "min_degree": 2,
        "tolerance": 1e-4,
        "continuation": "",
        "continuation_dims": [200, 400, 800],
        "continuation_draws": [],
    },
    "sgd": {
        "d": 400,
        "learning_rate": 0.01,
        "batch": 512,
        "seeds": [0],
    },
    "study": {
        "degrees": [],
        "min_degree": 2,
        "max_degree": 6,
        "seeds": [0, 1, 2],
        "references": list(REFERENCES),
        "scheduler": "",
        "workers": 0,
        "connect_timeout": 10.0,  # seconds to reach study.scheduler
    },
}
