"""A second run of a network written with table names imports no sympy (issue 29, part 3).

The first run derives (sympy) and keeps what it derived in the derivation cache: the term
table, its predicted size, whether it applies, the closed form of each group and, for the
groups without one, the engine's Cython source and Stein terms
(:func:`~hierarchy.models.network.table_cache.cached_json`). A second run reads them, and the
network's formulas are :class:`~hierarchy.models.network.activations.Formula` table entries
whose sympy expressions are never built, so ``sympy`` stays a lazy module that never ran
(:mod:`hierarchy.core.lazy_import`). The checks run in a fresh process; the control (a
formula written out, which the whitelisting parser turns into sympy) shows that the probe
sees an import when there is one.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from hierarchy.models.network import activations, closed_forms, derivation, formulas
from hierarchy.models.network import table_cache
from hierarchy.models.network.model import network_from_config
from tests.test_network_field import config as network_config
from tests.test_network_field import network

#: builds the system from each config file of argv[1:], evaluates the drift once, and prints
#: whether sympy's code ran
PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    from hierarchy.config.loader import load_config
    from hierarchy.core import registry
    from hierarchy.core.lazy_import import is_loaded
    finite = True
    for path in sys.argv[1:]:
        config = load_config(path)
        family = registry.family_of(config)
        system = family.system(config)
        u = family.initial_state(config, system)
        finite = finite and bool(np.isfinite(system.rhs(np.asarray(u, dtype=float))).all())
    print(json.dumps({"sympy": is_loaded("sympy"), "finite": finite}))
""")
#: ``(student, teacher)``: closed forms (erf; polynomials by Wick), relu's orthant moments
#: with the relu/erf step moments, and the compiled engine's rows (tanh)
TABLE_NETWORKS = (("erf", "erf"), ("relu", "erf"), ("quadratic", "linear"), ("tanh", "tanh"))
#: the control: the erf network with ``g`` written out as a formula
WRITTEN = ("erf(x/sqrt(2))", "erf")


def write_config(path, student, teacher="erf", loss="mse"):
    """A small teacher-student config file (``K = M = 2``) at ``path``."""
    path.write_text(textwrap.dedent(f"""
        [model]
        family = "network"
        loss = "{loss}"
        [model.student]
        width = 2
        activation = "{student}"
        [model.teacher]
        width = 2
        activation = "{teacher}"
        [solve]
        t_final = 1.0
    """))
    return path


def run_probe(*paths):
    """The :data:`PROBE`'s report on ``paths`` in a fresh interpreter."""
    run = subprocess.run([sys.executable, "-c", PROBE, *map(str, paths)], capture_output=True,
                         text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """The config files of :data:`TABLE_NETWORKS` and :data:`WRITTEN`, each run once in one
    fresh interpreter, which fills the derivation cache (this test process's memoised tables
    may come from another test's cache, so it does not warm the cache itself)."""
    folder = tmp_path_factory.mktemp("warm_path")
    paths = {case: write_config(folder / f"network{j}.toml", *case)
             for j, case in enumerate(TABLE_NETWORKS + (WRITTEN,))}
    run_probe(*paths.values())
    return paths


@pytest.mark.parametrize("case", TABLE_NETWORKS, ids="/".join)
def test_second_run_of_a_table_network_imports_no_sympy(configs, case):
    """Every row's evaluation is read from the derivation cache, the engine's C source with
    it. (Every field test reads its engine's plan back through JSON too:
    :func:`~.table_cache.cached_json` returns what JSON reads on a miss as on a hit, so
    kinked engine rows are checked there.)"""
    assert run_probe(configs[case]) == {"sympy": False, "finite": True}


def test_the_probe_sees_sympy_when_a_formula_is_written_out(configs):
    """The control: the same network with ``g`` written as a formula parses it with sympy."""
    assert run_probe(configs[WRITTEN]) == {"sympy": True, "finite": True}


@pytest.mark.parametrize("data", ["teacher", "noisy teacher", "mixture"])
def test_every_table_combination_passes_the_formula_checks(data):
    """``network_from_config`` skips :func:`~.formulas.check_network` when every formula is a
    table entry: every combination of the tables passes it."""
    losses = activations.LOSS_NAMES + (("cross-entropy",) if data == "mixture" else ())
    teachers = ("erf",) if data == "mixture" else activations.ACTIVATION_NAMES
    for student in activations.ACTIVATION_NAMES:
        for teacher in teachers:
            for loss in losses:
                net = table_network(student, teacher, loss, data)
                formulas.check_network(net)


def table_network(student, teacher, loss, data):
    """A ``K = 2`` network of table entries: teacher data (``M = 2``, noisy or not), or the
    default two-cluster mixture (class labels 1, 2 for the cross-entropy)."""
    model = {"student": {"width": 2, "activation": student}, "loss": loss}
    if data == "mixture":
        model.update(data="mixture", mixture={"labels": [1.0, 2.0]} if loss == "cross-entropy"
                     else {})
    else:
        model["teacher"] = {"width": 2, "activation": teacher,
                            "noise": 0.1 if data == "noisy teacher" else 0.0}
    return network_from_config(network_config(model=model))


def test_a_table_entry_builds_the_table_expression_and_compares_by_name():
    erf = activations.activation("erf", "model.student.activation")
    assert erf.table == "ACTIVATIONS" and erf.identity == "ACTIVATIONS:erf"
    assert erf.expression == activations.ACTIVATIONS["erf"]
    assert erf == activations.activation("erf", "model.teacher.activation")
    assert erf != activations.activation("tanh", "model.student.activation")
    written = activations.activation("tanh(x)", "model.student.activation")
    assert written.table is None and written.expression == activations.ACTIVATIONS["tanh"]
    assert written != activations.activation("tanh", "model.student.activation")
    assert activations.loss("mse").expression == activations.LOSSES["mse"]


@pytest.mark.parametrize("student, teacher", [("erf", "erf"), ("relu", "relu"),
                                              ("quadratic", "linear"), ("relu", "tanh")])
def test_plans_read_back_from_the_cache_equal_the_derived_ones(student, teacher):
    """The closed form of every group, through JSON and back, is the one :func:`plan` derives
    (names, positions in order, Wick coefficients and pairs)."""
    net = network(student={"width": 2, "activation": student},
                  teacher={"width": 2, "activation": teacher})
    table = derivation.term_table(net)
    read = closed_forms.table_plans(net, table)
    derived = [closed_forms.plan(net, group.pattern) for group in table.groups]
    assert read == derived
    assert any(how is not None for how in derived)


def test_cached_json_computes_once_and_refuses_a_file_of_another_key(tmp_path):
    from hierarchy.jit.cache import Cache
    cache = Cache(tmp_path / "cache")
    net = table_network("erf", "erf", "mse", "teacher")
    calls = []

    def compute():
        calls.append(1)
        return [1, [2.5, None]]

    assert table_cache.cached_json(net, "probe", compute, cache) == [1, [2.5, None]]
    assert table_cache.cached_json(net, "probe", compute, cache) == [1, [2.5, None]]
    assert len(calls) == 1
    (path,) = (cache.writable_root() / table_cache.FOLDER).glob("*.probe.json")
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "key": "another", "value": "stale"}))
    assert table_cache.cached_json(net, "probe", compute, cache) == [1, [2.5, None]]
    path.write_text("{not json")
    assert table_cache.cached_json(net, "probe", compute, cache) == [1, [2.5, None]]
    assert len(calls) == 3
