"""What ``hierarchy solve`` of a network config imports: the command's own time.

A solve of the ``network`` family needs neither the attention family's solver (its
validation loads sympy for the losses, its solver the compiled hierarchy), nor Dask (the
study's scheduler), nor pyplot; matplotlib only for the figure, after the integration.
These tests run the command in a fresh interpreter and read ``sys.modules``, so an import
made eager again (at module level in the CLI, the loader or the network family) fails here.
"""
import json
import subprocess
import sys

#: attention modules the command line may load for any command: the tables of the
#: ``show`` / ``generate`` flags (plain data)
ATTENTION_ALLOWED = {"hierarchy.models.attention", "hierarchy.models.attention.defaults",
                     "hierarchy.models.attention.variants"}

PROBE = r"""
import json, sys
from hierarchy.cli.main import build_parser, main
from hierarchy.config import loader
from hierarchy.core import registry
from hierarchy.core.lazy_import import is_loaded
build_parser()
registry.family_of(loader.load_config(sys.argv[1]))
before = sorted(sys.modules)
status = main(sys.argv[2:])
print(json.dumps({"status": status, "before": before, "after": sorted(sys.modules),
                  "sympy": is_loaded("sympy")}))
"""

NETWORK_TOML = """
[model]
family = "network"
[model.student]
width = 1
activation = "erf"
[model.teacher]
width = 1
activation = "erf"
[solve]
t_final = 1.0
points = 3
"""


def forbidden(modules):
    """The loaded modules a network solve must not need: attention beyond the flag
    tables, the hand-built gmm families (their package loads their
    solvers), Dask, pyplot, the study runner."""
    return sorted(name for name in modules
                  if (name.startswith("hierarchy.models.attention")
                      and name not in ATTENTION_ALLOWED)
                  or name.startswith("hierarchy.models.gmm")
                  or name.split(".")[0] in ("dask", "distributed")
                  or name in ("matplotlib.pyplot", "hierarchy.study.run",
                              "hierarchy.study.runner"))


def test_forbidden_names_what_it_should():
    """The filter itself: it must catch each class of module it is meant to catch."""
    names = ["hierarchy.models.attention.solve_job", "hierarchy.models.attention.config",
             "dask", "distributed.client", "matplotlib.pyplot", "hierarchy.study.run",
             "hierarchy.models.gmm.quadrature", "hierarchy.models.gmm",
             "hierarchy.models.attention.defaults", "matplotlib.figure", "sympy",
             "hierarchy.models.network.family"]
    assert forbidden(names) == sorted(names[:8])


def solve_probe(config, out):
    """The :data:`PROBE`'s report of ``hierarchy solve config`` in a fresh interpreter."""
    run = subprocess.run([sys.executable, "-c", PROBE, str(config), "solve", str(config),
                          "--out", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    probe = json.loads(run.stdout.strip().splitlines()[-1])
    assert probe["status"] == 0, run.stderr
    return probe


def test_network_solve_imports_no_attention_dask_or_pyplot(tmp_path):
    """Parse, load and find the family: no matplotlib, no sympy-loading attention module,
    no gmm family, no Dask; the whole solve (figure included): still none, and matplotlib
    only through its Agg canvas (no pyplot). A second solve of the same network reads its
    derivation from the cache and runs no sympy at all (sympy is a lazy module that never
    ran), and finds its compiled kernel without rendering its template (no jinja2;
    ``tests/test_network_warm_path.py`` holds the control that the probe sees sympy when
    it runs)."""
    config = tmp_path / "network.toml"
    config.write_text(NETWORK_TOML)
    solve_probe(config, tmp_path / "first")
    probe = solve_probe(config, tmp_path / "out")
    assert probe["sympy"] is False
    before, after = probe["before"], probe["after"]
    assert forbidden(before) == []
    assert not [name for name in before if name.split(".")[0] == "matplotlib"]
    assert forbidden(after) == []
    assert "matplotlib.backends.backend_agg" in after  # the figure was drawn, lazily
    assert "jinja2" not in after  # the kernel found through the cache's index, not rendered
    assert (tmp_path / "out" / "observables.png").is_file()


LOGISTIC_TOML = NETWORK_TOML.replace('family = "network"', 'family = "network"\nloss = "logistic"')


def test_a_second_joint_engine_solve_runs_no_sympy(tmp_path):
    """A logistic loss (the joint engine, :mod:`hierarchy.models.network.joint`): the engine's
    plan (its fields, outputs, kinks and turns, and its module's source) is kept in the
    derivation cache, so a second solve of the same network runs no sympy; the first one
    fills the cache (``tests/test_network_warm_path.py`` holds the control that the probe
    sees sympy when it runs, and ``tests/test_network_joint.py`` that the plan read back is
    the derived one)."""
    config = tmp_path / "logistic.toml"
    config.write_text(LOGISTIC_TOML)
    first = solve_probe(config, tmp_path / "first")
    second = solve_probe(config, tmp_path / "second")
    assert "joint" in json.loads((tmp_path / "second" / "result.json").read_text())[
        "summary"]["engine"]
    assert first["status"] == 0 and second["sympy"] is False
