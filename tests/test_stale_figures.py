"""A result written incomplete removes the figure an earlier run of the same command left in
its folder (``hierarchy.core.io.COMMAND_FIGURES``): a diverged or interrupted run draws no
figure, and the old one, of another run's settings and a healthy curve, must not stand beside
its result (found by an audit: a diverged attention SGD run kept the previous run's
``sgd.png``)."""
import pytest

from hierarchy.cli.main import main
from hierarchy.core.io import COMMAND_FIGURES, write_result

CONFIG = """[model]
parameterization = "tied"
K = 2
trainable = [1]
[loss]
name = "quadratic"
[hierarchy]
degree = 4
[init]
d = 60
scale = [0.6, 1.0]
seed = 0
[solve]
t_final = {t_final}
points = {points}
[sgd]
d = 60
learning_rate = {rate}
batch = 64
seeds = [0]
"""


@pytest.mark.parametrize("command", sorted(COMMAND_FIGURES))
def test_an_incomplete_result_removes_the_commands_figures(tmp_path, command):
    (tmp_path / "other.png").write_bytes(b"kept")
    for complete in (True, False):
        for figure in COMMAND_FIGURES[command]:
            (tmp_path / figure).write_bytes(b"an earlier run's figure")
        write_result(tmp_path, t=[0.0], mu=[[1.0]], labels=["a"], config={},
                     complete=complete, command=command)
        for figure in COMMAND_FIGURES[command]:
            assert (tmp_path / figure).exists() is complete
    assert (tmp_path / "other.png").read_bytes() == b"kept"


def test_a_diverged_sgd_run_leaves_no_figure_of_the_run_before(tmp_path):
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(CONFIG.format(t_final=0.01, points=3, rate=0.002))
    bad.write_text(CONFIG.format(t_final=2.0, points=11, rate=3.0))
    assert main(["sgd", str(good), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "sgd.png").exists()
    assert main(["sgd", str(bad), "--out", str(tmp_path / "o")]) == 1
    assert not (tmp_path / "o" / "sgd.png").exists()
