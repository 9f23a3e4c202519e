"""The spiked-PCA family through the shared pipeline: config, solve, sgd, fixed points, show.

The family's mathematics is tested in tests/test_summary_pca.py; here the wiring: one
registry line and the family class make ``hierarchy solve``, ``sgd``, ``fixed-points`` and
``show --config`` work, with the interface's file names and one-line errors.
"""

import json
import pathlib
import textwrap

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.config.loader import load_config

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools" / "configs"

SMALL = """
[model]
family = "spiked-pca"
order = 2
snr = 3.0

[init]
source = "statistics"
statistics = {{ m = 0.3 }}

[solve]
t_final = {t_final}
points = 21

[sgd]
dimension = {dimension}
runs = {runs}
seed = 1
"""


def write(tmp_path, text, name="pca.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def small_config(tmp_path, t_final=2.0, dimension=400, runs=40):
    return write(tmp_path, SMALL.format(t_final=t_final, dimension=dimension, runs=runs))


def test_the_example_config_solves_to_its_stable_fixed_point(tmp_path, capsys):
    config = str(TOOLS / "spiked_tensor.toml")
    assert main(["--quiet", "solve", config, "--out", str(tmp_path / "s")]) == 0
    data = np.load(tmp_path / "s" / "result.npz")
    # with the certification's change and tolerance at every output time
    assert sorted(data.files) == ["check_change", "check_tolerance", "labels", "t", "u"]
    assert list(data["labels"]) == ["m", "r2"]
    assert main(["--quiet", "fixed-points", config, "--out", str(tmp_path / "f")]) == 0
    points = json.loads((tmp_path / "f" / "fixed_points.json").read_text())
    assert all(set(p) == {"u", "stable", "eigenvalues"} for p in points)
    stable = [p["u"] for p in points if p["stable"] and p["u"]["m"] > 0]
    assert len(stable) == 1
    np.testing.assert_allclose(data["u"][-1], [stable[0]["m"], stable[0]["r2"]], atol=1e-6)


def test_sgd_writes_the_runs_and_follows_the_ode(tmp_path):
    config = small_config(tmp_path)
    assert main(["--quiet", "solve", config, "--out", str(tmp_path / "ode")]) == 0
    assert main(["--quiet", "sgd", config, "--out", str(tmp_path / "sgd")]) == 0
    ode = np.load(tmp_path / "ode" / "result.npz")
    sgd = np.load(tmp_path / "sgd" / "result.npz")
    assert sgd["u_runs"].shape == (40, 21, 2)
    np.testing.assert_allclose(sgd["u"], sgd["u_runs"].mean(axis=0))
    np.testing.assert_allclose(sgd["t"], ode["t"], rtol=0, atol=1.0 / 400)
    # ballistic statistics: the run mean is within a few n^{-1/2} / sqrt(runs) of the ODE
    assert np.max(np.abs(sgd["u"] - ode["u"])) < 0.05
    record = json.loads((tmp_path / "sgd" / "result.json").read_text())
    assert record["complete"] and record["summary"]["runs"] == 40
    assert record["config"]["model"]["family"] == "spiked-pca"


def test_show_config_prints_the_derived_drift_corrector_and_diffusion(tmp_path, capsys):
    assert main(["show", "--config", small_config(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("f[m]", "g[m]", "g[r2]", "Sigma[r2,r2]", "dm/dt"):
        assert name in out


def test_a_spiked_pca_config_has_only_its_own_tables(tmp_path):
    config = load_config(small_config(tmp_path))
    assert set(config) == {"model", "init", "solve", "sgd", "study"}
    assert set(config["sgd"]) == {"dimension", "step", "runs", "seed", "paired_runs"}
    assert config["init"]["statistics"] == {"m": 0.3}


@pytest.mark.parametrize("text, field", [
    ('[model]\nfamily = "spiked-pca"\norder = 1\n', "model.order"),
    ('[model]\nfamily = "spiked-pca"\nsnr = -2.0\n', "model.snr"),
    ('[model]\nfamily = "spiked-pca"\n[sgd]\nd = 100\n', "sgd.d"),
    ('[model]\nfamily = "spiked-pca"\n[sgd]\nruns = 0\n', "sgd.runs"),
    ('[model]\nfamily = "spiked-pca"\n[init]\nsource = "statistics"\nstatistics = { q = 1.0 }\n',
     "init.statistics.q"),
    ('[model]\nfamily = "spiked-pca"\n[init]\nsource = "statistics"\nstatistics = { r2 = -1.0 }\n',
     "init.statistics.r2"),
    ('[model]\nfamily = "spiked-pca"\n[init]\nstatistics = { m = 1.0 }\n', "init.source"),
])
def test_bad_spiked_pca_configs_are_one_line_errors_before_any_work(tmp_path, capsys, text,
                                                                    field):
    path = write(tmp_path, text)
    for command in ("solve", "sgd", "fixed-points"):
        assert main([command, path, "--out", str(tmp_path / command)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err, err
        assert not (tmp_path / command / "result.json").exists()


# ---------------------------------------------------------------------------------------
# the Gaussian-mixture families, through the same commands

MIXTURE = """
[model]
family = "{family}"
snr = "inf"
ridge = 0.1
{width}

[solve]
t_final = 20.0
points = 11

[sgd]
dimension = 60
runs = 8
"""


@pytest.mark.parametrize("family, width, labels", [
    ("gmm-binary", "", ["v1", "v2", "m1", "m2", "R11", "R12", "R22"]),
    ("gmm-xor", "width = 2", ["v1", "v2", "m1_mu", "m2_mu", "m1_nu", "m2_nu", "R11", "R12",
                              "R22"]),
])
def test_mixture_families_solve_sgd_and_show(tmp_path, capsys, family, width, labels):
    path = write(tmp_path, MIXTURE.format(family=family, width=width))
    assert main(["--quiet", "solve", path, "--out", str(tmp_path / "ode")]) == 0
    ode = np.load(tmp_path / "ode" / "result.npz")
    assert list(ode["labels"]) == labels and ode["u"].shape == (11, len(labels))
    assert np.all(np.isfinite(ode["u"]))
    assert main(["--quiet", "sgd", path, "--out", str(tmp_path / "sgd")]) == 0
    sgd = np.load(tmp_path / "sgd" / "result.npz")
    assert sgd["u_runs"].shape == (8, 11, len(labels))
    assert main(["show", "--config", path]) == 0
    assert "du/dt = -f + g" in capsys.readouterr().out


def test_binary_mixture_fixed_points_through_the_cli(tmp_path):
    path = write(tmp_path, MIXTURE.format(family="gmm-binary", width=""))
    assert main(["--quiet", "fixed-points", path, "--out", str(tmp_path / "fp")]) == 0
    points = json.loads((tmp_path / "fp" / "fixed_points.json").read_text())
    stable = sorted(round(p["u"]["v1"], 6) for p in points if p["stable"])
    assert stable == [-1.17741, 1.17741]   # (±1.177410, ∓1.177410) at α = 0.1


@pytest.mark.parametrize("text, field", [
    ('[model]\nfamily = "gmm-binary"\nsnr = "loud"\n', "model.snr"),
    ('[model]\nfamily = "gmm-binary"\nwidth = 3\n', "model.width"),
    ('[model]\nfamily = "gmm-xor"\nridge = -0.1\n', "model.ridge"),
    ('[model]\nfamily = "gmm-xor"\n[init]\nsource = "statistics"\nstatistics = { m1 = 1.0 }\n',
     "init.statistics.m1"),
    ('[model]\nfamily = "gmm-xor"\n[sgd]\ndimension = 1\n', "sgd.dimension"),
])
def test_bad_mixture_configs_are_one_line_errors(tmp_path, capsys, text, field):
    path = write(tmp_path, text)
    assert main(["solve", path, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err
