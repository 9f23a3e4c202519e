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
