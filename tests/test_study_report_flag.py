"""A study's ``complete`` flag is true only when every file of its report is on disk.

The issue: SIGTERM during the report stage (after the last job) gave exit 130 and "partial
results kept (marked incomplete)", but ``result.json`` said ``"complete": true``, lacked
``errors`` and ``rate``, and ``study_errors.png`` was missing. The report now writes the
result marked incomplete first, then the plots, then flips the flag.
"""
import json
import textwrap

import pytest

from hierarchy.cli.main import main
from hierarchy.study import dimension_report, report

# Four jobs of the truncation study (sgd-0, degree-3, degree-2, flow), about a second.
TINY = """
[loss]
name = "quadratic"
[init]
scale = [0.6, 1.0]
[solve]
t_final = 0.05
points = 5
[sgd]
d = 30
learning_rate = 0.002
batch = 16
[study]
min_degree = 2
max_degree = 3
seeds = [0]
scheduler = "serial"
"""

# A dimension study of spiked PCA: one ODE job and two small ensembles.
PCA = """
[model]
family = "spiked-pca"
order = 2
snr = 3.0
[init]
source = "statistics"
statistics = { m = 0.3 }
[solve]
t_final = 0.5
points = 6
[study]
dimensions = [50, 100]
runs = 8
scheduler = "serial"
"""


def _write(tmp_path, text):
    path = tmp_path / "study.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def _interrupting(*args, **kwargs):
    raise KeyboardInterrupt


def _record(out):
    return json.loads((out / "result.json").read_text())


@pytest.mark.parametrize("text, module, writer, pngs", [
    (TINY, report, "plot_trajectories", ("study_errors.png", "study_trajectories.png")),
    (PCA, dimension_report, "plot_errors", ("study_errors.png",)),
], ids=["truncation", "dimension"])
def test_an_interrupt_while_drawing_leaves_the_study_marked_incomplete(
        tmp_path, monkeypatch, capsys, text, module, writer, pngs):
    config, out = _write(tmp_path, text), tmp_path / "out"
    monkeypatch.setattr(module, writer, _interrupting)
    assert main(["--quiet", "study", config, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "marked incomplete" in err
    record = _record(out)
    assert record["complete"] is False
    assert record["errors"] and record["rate"]  # the numbers were kept ...
    assert not (out / pngs[-1]).exists()        # ... the figure the interrupt cut was not

    monkeypatch.undo()  # --resume reuses every job and finishes the report
    assert main(["--quiet", "study", config, "--out", str(out), "--resume"]) == 0
    record = _record(out)
    assert record["complete"] is True and record["summary"]["resume"]["reused"] > 0
    assert all((out / name).exists() for name in pngs)


def test_the_flag_is_written_after_every_figure(tmp_path, monkeypatch):
    """At the moment each figure is saved, result.json on disk still says incomplete."""
    seen = []
    original = report.save_figure

    def spy(fig, path, *args, **kwargs):
        seen.append((path.name, _record(path.parent)["complete"]))
        return original(fig, path, *args, **kwargs)

    monkeypatch.setattr(report, "save_figure", spy)
    out = tmp_path / "out"
    assert main(["--quiet", "study", _write(tmp_path, TINY), "--out", str(out)]) == 0
    assert seen == [("study_errors.png", False), ("study_trajectories.png", False)]
    assert _record(out)["complete"] is True
