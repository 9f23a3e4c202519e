"""The drawn teacher, ``[model.teacher] overlaps = "drawn"``: Goldt et al.'s random teacher.

``T`` is drawn once (Bartlett's construction of the Wishart law) and shared by the ODE and
every SGD run. Checked against the Gram of Gaussian vectors formed directly (an independent
path), by its first two moments within standard errors, and end to end: the SGD teachers
have exactly the drawn overlaps.
"""

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.registry import family_of
from hierarchy.models.network import sgd
from hierarchy.models.network.model import drawn_overlaps, network_from_config

CONFIG = """
[model]
family = "network"
[model.student]
width = 2
[model.teacher]
width = {M}
overlaps = {overlaps}
[init]
source = "gaussian"
seed = {seed}
[sgd]
dimension = {N}
runs = 2
"""


def _config(tmp_path, M=3, N=40, seed=0, overlaps='"drawn"'):
    path = tmp_path / "drawn.toml"
    path.write_text(CONFIG.format(M=M, N=N, seed=seed, overlaps=overlaps))
    return load_config(str(path))


def test_drawn_overlaps_have_the_moments_of_a_gaussian_gram():
    M, N, draws = 3, 12, 6000
    bartlett = np.array([drawn_overlaps(M, N, seed) for seed in range(draws)])
    rng = np.random.default_rng(11)
    direct = np.array([(w := rng.standard_normal((M, N))) @ w.T / N for _ in range(draws)])
    for name, reduce in (("mean", np.mean), ("variance", np.var)):
        a, b = reduce(bartlett, axis=0), reduce(direct, axis=0)
        # standard error of a mean of `draws` values, and of a variance (fourth moment)
        spread = (np.std(direct, axis=0) if name == "mean"
                  else np.std((direct - direct.mean(0)) ** 2, axis=0))
        assert np.all(np.abs(a - b) < 4 * np.sqrt(2.0 / draws) * spread), (name, a, b)
    # the exact Wishart moments: E T = I, N Var T_nn = 2, N Var T_nm = 1
    assert np.allclose(np.var(bartlett, axis=0) * N, 1 + np.eye(M), atol=0.15)


def test_the_drawn_teacher_is_the_model_s_and_every_sgd_run_s(tmp_path):
    config = _config(tmp_path, seed=5)
    net = network_from_config(config)
    expected = drawn_overlaps(3, 40, 5)
    assert np.array_equal(net.overlap_matrix, expected)
    assert not np.allclose(expected, np.eye(3))
    ensemble = sgd.start_ensemble(net, 40, 2, seed=1, start=None, scale=0.1)
    directions = ensemble.directions
    for run in directions:
        assert np.allclose(run @ run.T / 40, expected, atol=1e-12)
    # another seed, another teacher; the family's system uses the same T
    assert not np.allclose(network_from_config(_config(tmp_path, seed=6)).overlap_matrix,
                           expected)
    assert np.array_equal(family_of(config).network(config).overlap_matrix, expected)


@pytest.mark.parametrize("overlaps, N", [('"random"', 40), ('"drawn"', 2)])
def test_bad_overlaps_are_one_line_errors(tmp_path, overlaps, N):
    with pytest.raises(HierarchyError) as error:
        network_from_config(_config(tmp_path, N=N, overlaps=overlaps))
    assert error.value.field in ("model.teacher.overlaps", "sgd.dimension")
    assert "\n" not in str(error.value)


def test_the_seed_convention_counts_steps_with_its_own_time_map(tmp_path):
    """A mixture in the seed's convention advances ``t`` by ``c_delta/N`` per step: the
    up-front step count and the run agree (``t N / c_delta`` steps), at ``c_delta != 1``."""
    import json

    from hierarchy.cli.main import main
    text = open("tools/configs/network_mixture_binary.toml").read()
    config = load_config("tools/configs/network_mixture_binary.toml")
    assert config["model"]["mixture"]["convention"] == "seed"
    path = tmp_path / "seed.toml"
    path.write_text(text.replace("step = 1.0", "step = 0.5", 1)
                    .replace("dimension = 250", "dimension = 40")
                    .replace("runs = 200", "runs = 1")
                    .replace("t_final = 100.0", "t_final = 1.0")
                    .replace("points = 101", "points = 5"))
    config = load_config(str(path))
    assert config["sgd"]["step"] == 0.5 and config["sgd"]["dimension"] == 40
    assert family_of(config).time_per_step(config) == pytest.approx(0.5 / 40)
    out = tmp_path / "out"
    assert main(["--quiet", "sgd", str(path), "--out", str(out)]) == 0
    steps = np.load(out / "result.npz")["steps"]
    times = np.load(out / "result.npz")["t"]
    assert steps[-1] == round(1.0 * 40 / 0.5)
    assert np.allclose(steps, np.round(times * 40 / 0.5))
    assert json.loads((out / "result.json").read_text())["complete"]


def test_solve_records_the_teacher_overlaps_it_used(tmp_path):
    import json

    from hierarchy.cli.main import main
    path = tmp_path / "drawn.toml"
    path.write_text(CONFIG.format(M=2, N=60, seed=4, overlaps='"drawn"')
                    + "[solve]\nt_final = 0.5\npoints = 3\n")
    assert main(["--quiet", "solve", str(path), "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "result.json").read_text())["summary"]
    t = drawn_overlaps(2, 60, 4)
    assert summary["teacher_overlaps"] == {"T1.1": t[0, 0], "T1.2": t[0, 1], "T2.2": t[1, 1]}
