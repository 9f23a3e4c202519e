"""What decides a dimension study's job (``DimensionStudy.job_inputs``, stored as its hash).

``hierarchy study --resume`` after a SIGKILL (no ``result.json`` yet) reuses a job file only
when its hash matches the config's: a key that changes a job's result but not its hash is a
silent reuse of another config's numbers. Every key of ``[sgd]`` and ``[solve]`` of every
family with a dimension study is changed in turn, and the jobs whose hash moves are checked
against what the key does: the lists here are written out, not read from the module, so a
key dropped from the hash fails.
"""

import copy

import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.registry import family_of
from hierarchy.study.jobs import DIMENSION, ODE, Job

FAMILIES = ("spiked-pca", "gmm-binary", "gmm-xor", "gmm-multiclass", "network")
#: ``hierarchy sgd``'s own keys: the study has ``study.runs``, ``study.seed`` and its own
#: paired runs
SGD_OF_NO_JOB = {"runs", "seed", "paired_runs"}
#: the network's keys that change both the SGD and the ODE (the corrector over ``B``, the
#: sphere's projection, the second layer's rate, the dimension a drawn teacher is drawn at)
NETWORK_SGD = {"batch", "constraint", "step_second_layer", "dimension", "step"}
STUDY_OF_NO_JOB = {"scheduler", "workers", "connect_timeout", "observables"}
JOBS = (Job(ODE), Job(DIMENSION, dimension=400))
#: another allowed value of each string key (the labels are read from a valid config)
OTHER_WORD = {"none": "sphere", "step": 0.5, "auto": "quadrature", "LSODA": "RK45", "RK45": "LSODA",
              "": "serial"}


def other_value(value):
    """An allowed value different from ``value``, of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 2 * value if value else 1.0
    if isinstance(value, str):
        return OTHER_WORD[value]
    return [*value, value[-1] + 1] if value else ["Q1.1"]


def hashes(config):
    model = family_of(config).study_model()
    labels = model.study_observables(config)
    return {job.kind: model.job_inputs(config, job, labels) for job in JOBS}


def changed_jobs(config, section, key):
    other = copy.deepcopy(config)
    other[section][key] = other_value(other[section][key])
    before, after = hashes(config), hashes(other)
    return {kind for kind in before if before[kind] != after[kind]}


@pytest.mark.parametrize("name", FAMILIES)
def test_every_sgd_key_but_hierarchy_sgds_own_decides_both_jobs(name):
    config = load_config(None, {"model": {"family": name}})
    if name == "network":
        assert NETWORK_SGD <= set(config["sgd"])
    for key in config["sgd"]:
        expected = set() if key in SGD_OF_NO_JOB else {ODE, DIMENSION}
        assert changed_jobs(config, "sgd", key) == expected, key


@pytest.mark.parametrize("name", FAMILIES)
def test_every_solve_key_decides_the_ode_and_the_paired_sgd_jobs(name):
    config = load_config(None, {"model": {"family": name}})
    paired = family_of(config).study_model().paired_references(config) is not None
    if name == "network":
        assert "field" in config["solve"]
    for key in config["solve"]:
        everywhere = key in ("t_final", "points")  # the output times of every job
        expected = {ODE, DIMENSION} if everywhere or paired else {ODE}
        assert changed_jobs(config, "solve", key) == expected, key


@pytest.mark.parametrize("name", FAMILIES)
def test_the_studys_runs_and_seed_decide_the_sgd_jobs_alone(name):
    config = load_config(None, {"model": {"family": name}})
    for key in config["study"]:
        if key == "dimensions":
            continue  # each SGD job carries its own dimension
        expected = set() if key in STUDY_OF_NO_JOB else {DIMENSION}
        assert changed_jobs(config, "study", key) == expected, key
