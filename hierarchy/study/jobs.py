"""The study's independent jobs, as data.

A study is a set of :class:`Job`. The truncation study (the attention family): one per
truncation degree, one exact ``matrix-flow`` reference, one per SGD seed of the ``sgd``
reference; :func:`plan_jobs` lists them for a config, longest first. The dimension study
(the summary-statistics families, :mod:`hierarchy.study.dimensions`): one ``ode`` job (the
ballistic solve) and one ``sgd`` job per dimension ``n`` (an ensemble of runs). This module only describes jobs (it imports no model code, so that
``hierarchy.config`` can take :data:`REFERENCES` from here); :mod:`hierarchy.study.compute`
computes them and hashes what decides them.
"""

import dataclasses
from typing import Optional

import numpy as np

from hierarchy.core.errors import HierarchyError

#: What a study's truncations can be compared with (``[study] references``).
REFERENCES = ("matrix-flow", "sgd")

#: Job kinds: a truncation degree, the exact flow (reference ``matrix-flow``), an SGD seed;
#: the ballistic ODE and an SGD ensemble at one dimension (the dimension study).
DEGREE, FLOW, SGD = "degree", "flow", "sgd"
ODE, DIMENSION = "ode", "dimension"
KINDS = (DEGREE, FLOW, SGD, ODE, DIMENSION)
#: Key prefix of a dimension job: ``sgd-n400``
DIMENSION_PREFIX = "sgd-n"


@dataclasses.dataclass(frozen=True)
class Job:
    """One independent job of a study.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    degree : int or None
        The truncation degree of a ``degree`` job.
    seed : int or None
        The SGD seed of an ``sgd`` job.
    dimension : int or None
        The dimension ``n`` of a ``dimension`` job.
    """

    kind: str
    degree: Optional[int] = None
    seed: Optional[int] = None
    dimension: Optional[int] = None

    @property
    def key(self):
        """The job's name, also the stem of its file: ``degree-4``, ``flow``, ``sgd-0``,
        ``ode``, ``sgd-n400``."""
        if self.kind == ODE:
            return ODE
        if self.kind == DIMENSION:
            return f"{DIMENSION_PREFIX}{self.dimension}"
        if self.kind == DEGREE:
            return f"degree-{self.degree}"
        if self.kind == SGD:
            return f"sgd-{self.seed}"
        return FLOW

    @property
    def reference(self):
        """The reference this job computes (``matrix-flow``, ``sgd``); None for a degree."""
        return {FLOW: "matrix-flow", SGD: "sgd", DIMENSION: "sgd"}.get(self.kind)

    @classmethod
    def from_key(cls, key):
        """The job named ``key`` (inverse of :attr:`key`).

        Raises
        ------
        HierarchyError
            ``key`` names no job.
        """
        key = str(key)
        if key == ODE:
            return cls(ODE)
        if key.startswith(DIMENSION_PREFIX) and key[len(DIMENSION_PREFIX):].isdigit():
            return cls(DIMENSION, dimension=int(key[len(DIMENSION_PREFIX):]))
        kind, _, number = key.partition("-")
        if kind == FLOW and not number:
            return cls(FLOW)
        if kind in (DEGREE, SGD) and number.isdigit():
            return cls(DEGREE, degree=int(number)) if kind == DEGREE else cls(SGD, seed=int(number))
        raise HierarchyError(f"{key!r} names no study job", field="study")


def plan_jobs(config):
    """Every independent job of a study, longest first (SGD seeds, degrees down, the flow).

    Parameters
    ----------
    config : dict
        A validated study config.

    Returns
    -------
    list of Job
    """
    study = config["study"]
    jobs = []
    if "sgd" in study["references"]:
        jobs += [Job(SGD, seed=int(seed)) for seed in study["seeds"]]
    jobs += [Job(DEGREE, degree=int(M)) for M in sorted(study["degrees"], reverse=True)]
    jobs.append(Job(FLOW))
    return jobs


def study_times(config):
    """The study's output times: ``solve.points`` times evenly spaced on ``[0, t_final]``."""
    solve = config["solve"]
    return np.linspace(0.0, float(solve["t_final"]), int(solve["points"]))


# The flow's own tolerances (hierarchy.models.attention.flows.matrix_flow's defaults); it never
# integrates less accurately than the hierarchy it is the reference of.
FLOW_RTOL, FLOW_ATOL = 1e-10, 1e-12


def flow_tolerances(config):
    """``(rtol, atol)`` of the flow job: the tighter of the flow's own and ``[solve]``'s."""
    solve = config["solve"]
    return min(FLOW_RTOL, float(solve["rtol"])), min(FLOW_ATOL, float(solve["atol"]))
