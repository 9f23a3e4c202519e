"""A toy model family registered through exactly the steps of docs/architecture.md.

The toy is the scalar linear ODE ``dy/dt = -a y`` (two independent copies, so that labels
and columns are exercised), with the closed form ``y(t) = y0 exp(-a t)``. The test writes
the family's folder (step 1), fills in the contract (step 2), adds the one registry line
(step 3) and documents its keys (step 4); then ``hierarchy solve`` runs it end to end, and
nothing in the shared layers was touched. It also checks the layout promises of the
architecture: family strings only inside the family, one result type, one integrate loop.
"""

import ast
import json
import pathlib
import textwrap

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.config.loader import load_config
from hierarchy.core import registry
from hierarchy.core.errors import HierarchyError
from hierarchy.core.trajectory import Status, Trajectory
from hierarchy.models.base import ModelFamily

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "hierarchy"
DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

TOY_FAMILY = '''
"""A toy family: two decaying scalars, dy_i/dt = -a_i y_i."""

import numpy as np

from hierarchy.models.base import ModelFamily


class DecaySystem:
    """The right-hand side, in the System protocol of hierarchy.ode.system."""

    labels = ["y1", "y2"]

    def __init__(self, rates):
        self.rates = np.asarray(rates, dtype=float)

    def index(self, label):
        return self.labels.index(label)

    def rhs(self, y, t=0.0):
        return -self.rates * y


class DecayFamily(ModelFamily):
    name = "toy-decay"
    defaults = {"model": {"rate": 1.0, "start": 1.0}}
    key_help = {"model.rate": ("Decay rate a of y1 (y2 decays at 2a).", "number > 0"),
                "model.start": ("Starting value of both.", "number")}
    section_help = {"model": "The toy model."}

    def validate(self, config, sections=None):
        rate = config["model"]["rate"]
        self.check(isinstance(rate, (int, float)) and rate > 0,
                   f"model.rate must be a number > 0; got {rate!r}", "model.rate")
        return config

    def build_arguments(self, config):
        return {"rates": [float(config["model"]["rate"]), 2.0 * float(config["model"]["rate"])]}

    def system(self, config):
        return DecaySystem(**self.build_arguments(config))

    def initial_state(self, config, system):
        return np.full(len(system.labels), float(config["model"]["start"]))


TOY = DecayFamily()
'''


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    """Steps 1-3 of docs/architecture.md: a folder, the contract, one registry line."""
    folder = tmp_path / "toy_models" / "decay"
    folder.mkdir(parents=True)
    (folder.parent / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / "family.py").write_text(textwrap.dedent(TOY_FAMILY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.FAMILIES, "toy-decay", "toy_models.decay.family:TOY")
    return registry.family("toy-decay")


def write_config(tmp_path, text):
    path = tmp_path / "toy.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_documented_steps_are_the_ones_this_test_takes():
    text = DOCS.read_text(encoding="utf-8")
    steps = text[text.index("## How to add a model family"):]
    for needle in ("hierarchy/models/<name>/", "ModelFamily", "FAMILIES",
                   "hierarchy/core/registry.py", "KEY_HELP" if "KEY_HELP" in steps else "key_help",
                   "tests/test_architecture.py"):
        assert needle in steps, needle


def test_toy_family_is_found_by_name_and_is_a_model_family(toy_family):
    assert isinstance(toy_family, ModelFamily)
    assert "toy-decay" in registry.family_names()
    assert registry.family_of({"model": {"family": "toy-decay"}}) is toy_family


def test_toy_config_gets_the_family_defaults_and_the_shared_solve_table(toy_family, tmp_path):
    config = load_config(write_config(tmp_path, """
        [model]
        family = "toy-decay"
        rate = 2.0
    """))
    assert config["model"] == {"family": "toy-decay", "rate": 2.0, "start": 1.0}
    assert set(config) == {"model", "solve"}  # no attention tables leak into another family
    assert {"t_final", "points", "rtol", "atol", "method"} <= set(config["solve"])


@pytest.mark.parametrize("text, field", [
    ('[model]\nfamily = "toy-decay"\nrate = -1.0\n', "model.rate"),
    ('[model]\nfamily = "toy-decay"\nparameterization = "tied"\n', "model.parameterization"),
    ('[model]\nfamily = "no-such-family"\n', "model.family"),
])
def test_bad_toy_configs_are_one_line_errors_naming_the_field(toy_family, tmp_path, capsys,
                                                               text, field):
    path = write_config(tmp_path, text)
    with pytest.raises(HierarchyError) as error:
        load_config(path)
    assert field in str(error.value)
    assert main(["solve", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err
    assert not (tmp_path / "out" / "result.json").exists()


def test_hierarchy_solve_of_the_toy_family_matches_the_closed_form(toy_family, tmp_path):
    path = write_config(tmp_path, """
        [model]
        family = "toy-decay"
        rate = 1.5
        start = 2.0

        [solve]
        t_final = 2.0
        points = 21
        rtol = 1e-10
        atol = 1e-12
    """)
    out = tmp_path / "out"
    assert main(["--quiet", "solve", str(path), "--out", str(out)]) == 0
    data = np.load(out / "result.npz")
    t = data["t"]
    np.testing.assert_allclose(t, np.linspace(0.0, 2.0, 21))
    assert list(data["labels"]) == ["y1", "y2"]
    exact = 2.0 * np.exp(-np.outer(t, [1.5, 3.0]))
    np.testing.assert_allclose(data["y"], exact, rtol=1e-7, atol=1e-10)  # base state_name
    result = json.loads((out / "result.json").read_text())
    assert result["config"]["model"]["family"] == "toy-decay"
    assert result["summary"]["status"] == 0
    assert result["summary"]["final"]["y2"] == pytest.approx(2.0 * np.exp(-6.0), rel=1e-7)


def test_a_contract_item_the_toy_does_not_provide_is_one_line_naming_model_family(
        toy_family, tmp_path, capsys):
    path = write_config(tmp_path, '[model]\nfamily = "toy-decay"\n')
    assert main(["sgd", str(path), "--out", str(tmp_path / "sgd")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.family" in err and "toy-decay" in err


def test_the_toy_solve_goes_through_the_one_integrate_loop(toy_family, tmp_path, monkeypatch):
    from hierarchy.ode import system as ode_system

    calls = []
    original = ode_system.integrate

    def spy(*args, **kwargs):
        calls.append(kwargs.get("method"))
        return original(*args, **kwargs)

    monkeypatch.setattr(ode_system, "integrate", spy)
    config = load_config(write_config(tmp_path, '[model]\nfamily = "toy-decay"\n'))
    summary = toy_family.run_solve(config, tmp_path / "o", None)
    assert calls and summary["status"] == 0


# ---------------------------------------------------------------------------------------
# the layout promises of docs/architecture.md


def python_files(*parts):
    return sorted((PACKAGE.joinpath(*parts)).rglob("*.py"))


def string_constants(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_attention_parameterization_names_appear_only_inside_the_attention_family():
    offenders = []
    for path in python_files():
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("models/attention/"):
            continue
        for value in string_constants(path):
            if value in ("tied", "untied", "direct"):
                offenders.append(f"{relative}: {value!r}")
    assert not offenders, offenders


def test_one_result_type_and_one_integrate_loop():
    dataclass_results, integrator_users = [], []
    for path in python_files():
        relative = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Result", "Trajectory")):
                dataclass_results.append(f"{relative}:{node.name}")
        if "solve_ivp" in text.replace("``solve_ivp``", "") or "scipy.integrate" in text:
            integrator_users.append(relative)
    # ContinuationResult is an estimate with error bars assembled from many flows, not a
    # trajectory of one system (see its docstring); everything else is core.trajectory's.
    assert sorted(dataclass_results) == ["core/trajectory.py:Trajectory",
                                         "models/attention/continuation.py:ContinuationResult"]
    assert integrator_users == ["ode/integrate.py"], integrator_users


def test_no_private_name_is_imported_across_modules():
    offenders = []
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hierarchy"):
                offenders += [f"{path.name}: {alias.name}" for alias in node.names
                              if alias.name.startswith("_") and alias.name != "__version__"]
    assert not offenders, offenders


def canonical_12(label):
    """A producer's look-up that knows only the word 1.2 (and its reversal 2.1)."""
    if label in ("1.2", "2.1"):
        return 1
    raise HierarchyError(f"{label} is not a word this look-up knows", field="label")


def test_a_trajectory_finds_columns_through_the_producers_canonical_lookup():
    trajectory = Trajectory(t=np.zeros(2), y=np.arange(6.0).reshape(2, 3),
                            labels=["1", "1.2", "1.1.2"],
                            index=canonical_12)
    np.testing.assert_array_equal(trajectory["2.1"], [1.0, 4.0])
    np.testing.assert_array_equal(trajectory["1.1.2"], [2.0, 5.0])  # exact label fallback
    assert Trajectory(np.zeros(1), np.zeros((1, 1)), ["a"], status=2).status is Status.INTERRUPTED
