"""What a run prints and draws is sized for a reader (issue 24, items 4, 9 and 10).

- the summary families' ``solve`` and ``sgd`` write a PNG and print a short table (by group
  of statistics when there are many), and the mixtures' ``sgd`` prints the classes its runs
  serve, not the mean of statistics that are symmetric across runs;
- the dimension study of a model with 155 statistics prints about a dozen lines (not a
  thousand), writes the full table to a file, and a figure of a few panels (not 155);
- progress never leaves carriage-return debris in a file, a finished status line is erased
  on a terminal, matplotlib's font-cache notice never reaches the output, numbers are
  printed with significant digits, and the untied study says τ where ``solve`` does.
"""
import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from matplotlib import image

from hierarchy.cli.main import main
from hierarchy.core.io import read_result
from hierarchy.core.progress import LOG_INTERVAL, Progress
from hierarchy.core.summary_table import final_table, groups, significant, statistic_group
from hierarchy.models.gmm.basins import class_counts
from hierarchy.models.gmm.model import Mixture

#: no PNG may be larger than this on a side (the old multiclass study figure: 2040 x 19935)
MAX_SIDE = 6000
#: a console summary a reader takes in at a glance
MAX_LINES = 30

MULTICLASS = """
[model]
family = "gmm-multiclass"
classes = 10
snr = 10.0
ridge = 0.01
[init]
source = "gaussian"
[solve]
t_final = {t_final}
points = 6
[sgd]
dimension = 200
runs = 2
[study]
dimensions = [50, 100, 200, 400]
runs = 2
scheduler = "serial"
{extra}
"""

XOR = """
[model]
family = "gmm-xor"
snr = 1000.0
ridge = 0.1
width = 4
[solve]
t_final = 10.0
points = 11
[sgd]
dimension = 100
runs = 24
seed = 0
# the classes served are the runs' own; two paired ODE solves keep that path (the default
# 20 solves cost 15 s of CPU here)
paired_runs = 2
"""


def write(tmp_path, text, name="run.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def png_size(path):
    height, width = image.imread(str(path)).shape[:2]
    return width, height


# ----------------------------------------------------------------------------- tables

def test_significant_digits_and_zero():
    assert significant(8.440239579798892e-06) == "8.44e-06"
    assert significant(0.0) == "0" and significant(-0.0) == "0"
    assert significant(2.1071234, 3) == "2.11"


def test_statistics_are_grouped_by_their_letters_and_diagonal():
    assert statistic_group("m3_mu") == "m_mu" and statistic_group("R12") == "R"
    assert statistic_group("m1.1") == "m (a=b)" and statistic_group("m1.2") == "m (a!=b)"
    assert list(groups(["v1", "m1_mu", "v2", "R11"])) == ["v", "m_mu", "R"]


def test_a_table_of_many_statistics_gives_each_groups_extremes_and_median():
    labels = [f"m{a}.{b}" for a in range(1, 5) for b in range(1, 5)]
    values = np.arange(len(labels), dtype=float) - 3.0
    table = final_table(labels, values, "final values").splitlines()
    assert len(table) == 2 + 2  # head, column names, the two groups
    off = [v for label, v in zip(labels, values) if label.split(".")[0][1:] != label.split(".")[1]]
    row = next(line for line in table if line.strip().startswith("m (a!=b)")).split()
    assert row[2:] == ["12", significant(min(off), 4), "m1.2", significant(np.median(off), 4),
                       significant(max(off), 4), "m4.3"]


# ----------------------------------------------------------------------------- solve, sgd

def test_a_solve_of_155_statistics_prints_a_short_table_and_draws_them(tmp_path, capsys):
    config, out = write(tmp_path, MULTICLASS.format(t_final=5.0, extra="")), tmp_path / "solve"
    # exit 3: a finite-lambda field averaged over fixed QMC points is never certified
    assert main(["solve", config, "--out", str(out)]) == 3
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) <= 8, lines  # was 155 lines, one per statistic
    result = read_result(out)
    diagonal = [j for j, label in enumerate(result["labels"]) if statistic_group(label) == "m (a=b)"]
    final = result["u"][-1, diagonal]
    row = next(line for line in lines if line.strip().startswith("m (a=b)")).split()
    assert row[2] == "10" and row[5] == significant(np.median(final), 4)
    width, height = png_size(out / "observables.png")
    assert max(width, height) <= MAX_SIDE


def test_the_mixtures_sgd_prints_the_classes_its_runs_serve(tmp_path, capsys):
    config, out = write(tmp_path, XOR), tmp_path / "sgd"
    assert main(["sgd", config, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "classes served" in printed and "mean of" not in printed
    result = read_result(out)
    model = Mixture(kind="xor", snr=1000.0, ridge=0.1, width=4)
    counts = class_counts(model, result["u_runs"][:, -1, :].T)
    sgd_row = next(line for line in printed.splitlines() if line.strip().startswith("SGD"))
    shown = [float(cell.split(": ")[1]) for cell in sgd_row.split("  ")[1:] if ": " in cell]
    assert shown == [round(float(np.mean(counts == j)), 3) for j in (1, 2, 3, 4)]
    assert json.loads((out / "result.json").read_text())["complete"] is True
    width, height = png_size(out / "sgd.png")
    assert max(width, height) <= MAX_SIDE


# ----------------------------------------------------------------------------- the study

@pytest.fixture(scope="module")
def multiclass_study(tmp_path_factory):
    """The multiclass dimension study (155 statistics) at a small size: its folder, output."""
    tmp_path = tmp_path_factory.mktemp("multiclass-study")
    config = write(tmp_path, MULTICLASS.format(t_final=5.0, extra='observables = ["m1.1"]'))
    out = tmp_path / "out"
    assert main(["--quiet", "study", config, "--out", str(out)]) == 0
    return out


def test_the_multiclass_study_prints_a_short_summary(multiclass_study, capsys):
    config = multiclass_study.parent / "run.toml"
    assert main(["study", str(config), "--out", str(multiclass_study), "--resume"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) <= MAX_LINES, len(lines)  # was about 1000
    record = json.loads((multiclass_study / "result.json").read_text())
    assert record["summary"]["chosen"] == ["m1.1"]
    errors = {(e["observable"], e["dimension"]): e["error"] for e in record["errors"]}
    row = next(line for line in lines if line.startswith("m1.1 "))
    assert row.split()[1:5] == [significant(errors[("m1.1", n)], 3) for n in (50, 100, 200, 400)]
    worst = max(errors[(label, 400)] for label, n in errors if label.startswith("R")
                and n == 400 and label.split(".")[0][1:] != label.split(".")[1])
    assert next(line for line in lines if line.startswith("R (a!=b) worst")).split()[-2] == \
        significant(worst, 3)


def test_the_full_table_is_in_a_file(multiclass_study):
    record = json.loads((multiclass_study / "result.json").read_text())
    table = (multiclass_study / "study_table.txt").read_text().splitlines()
    for label in record["labels"]:
        # a line per dimension, then the slope of the error of the mean and the paired slope
        assert sum(line.split()[:1] == [label] for line in table) == 4 + 2, label


def test_the_multiclass_study_figure_has_a_panel_per_group_not_per_statistic(multiclass_study):
    width, height = png_size(multiclass_study / "study_errors.png")
    assert max(width, height) <= MAX_SIDE  # was 2040 x 19935 with 155 panels
    assert height < width  # 4 groups and 1 chosen statistic: two rows


def test_study_figure_log_ticks_are_the_dimensions_and_there_is_a_title():
    from hierarchy.study import dimension_report
    labels = ["m1", "m2"]
    dimensions = [50, 100, 200, 400]
    analysis = {"errors": [{"observable": label, "dimension": n, "error": 1.0 / np.sqrt(n),
                            "noise": 0.1 / np.sqrt(n)} for label in labels for n in dimensions],
                "rate": {"sgd": {label: -0.5 for label in labels}}}
    fig = dimension_report.plot_errors(io.BytesIO(), analysis, dimensions, labels,
                                       title="spiked-pca: SGD against the ODE")
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        assert ticks == ["50", "100", "200", "400"]
        assert not [t for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert fig.get_suptitle().startswith("spiked-pca")


def test_study_figure_panel_titles_give_the_slope_with_its_standard_error():
    # the audit's gb_study: "v1: slope -0.37" in the figure, "-0.37 ± 0.21" in the table
    from hierarchy.study import dimension_report
    dimensions = [50, 100, 200, 400]
    analysis = {"errors": [{"observable": "m1", "dimension": n, "error": 1.0 / np.sqrt(n),
                            "noise": 0.1 / np.sqrt(n)} for n in dimensions],
                "rate": {"sgd": {"m1": -0.37}}, "slope_stderr": {"m1": 0.21}}
    fig = dimension_report.plot_errors(io.BytesIO(), analysis, dimensions, ["m1"])
    assert "slope -0.37 ± 0.21" in fig.axes[0].get_title()


def test_study_observables_that_are_not_statistics_are_refused_before_any_job(tmp_path, capsys):
    config = write(tmp_path, MULTICLASS.format(t_final=5.0, extra='observables = ["q1.2"]'))
    assert main(["study", config, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "study.observables" in err and "'q1.2'" in err
    assert not (tmp_path / "out" / "jobs").exists()


# ----------------------------------------------------------------------------- progress

class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_into_a_file_is_whole_lines_without_carriage_returns():
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=0.0)
    progress.update("sgd: t = 0 / 4")
    progress.update("spectra at t = 1 (1/3)", force=True)
    progress.line("[1/2] done")
    progress.close()
    text = stream.getvalue()
    assert "\r" not in text
    assert text.splitlines() == ["sgd: t = 0 / 4", "spectra at t = 1 (1/3)", "[1/2] done"]
    assert LOG_INTERVAL >= 5  # a log gets a status line every few seconds at most


def test_a_finished_status_line_is_erased_on_a_terminal():
    stream = Terminal()
    progress = Progress(stream=stream, interval=0.0)
    progress.update("t = 2.06886e-05 / 0.3")
    progress.close()
    text = stream.getvalue()
    assert text.endswith("\r\033[K") and "\n" not in text  # nothing left behind


def test_matplotlib_font_cache_notice_never_reaches_the_output(tmp_path):
    config = write(tmp_path, """
    [model]
    family = "gmm-binary"
    snr = "inf"
    [init]
    source = "statistics"
    statistics = { v1 = 1.0, v2 = -1.0, m1 = 0.5, m2 = -0.3, R11 = 0.2, R22 = 0.2 }
    [solve]
    t_final = 1.0
    points = 5
    """)
    env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "fresh-mpl"))  # no font cache yet
    proc = subprocess.run([sys.executable, "-m", "hierarchy", "solve", config, "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "fresh-mpl").exists()  # the cache was built in this run
    assert "fontManager" not in proc.stdout + proc.stderr


def test_the_untied_study_names_its_time_tau():
    from hierarchy.models.attention.family import ATTENTION
    from hierarchy.study.report import format_extrapolation
    untied = {"model": {"parameterization": "untied"}}
    symbol = ATTENTION.time_label(untied).split("=")[0].strip()
    entry = {"claimed_error": 1e-6, "certified_until": 0.06,
             "matrix-flow": {"error": 1e-7, "best_degree": 5, "best_degree_error": 2e-7}}
    text = format_extrapolation({"degrees": [2, 3, 4, 5], "tolerance": 1e-3,
                                 "observables": {"M1": entry}}, ["M1"], symbol)
    assert "certified until τ = 0.06" in text


def test_the_answer_line_names_its_own_time_when_degree_m_stopped_earlier():
    """After a degree-M blow-up the table is headed by where degree M stopped (t = 2.9) while
    the answer column is the extrapolation at the last output time (t = 4): an audit found
    the two paired without a word. The answer line now names its time."""
    from hierarchy.models.attention.solve_job import format_summary
    summary = {"final": {"1": -799.2}, "answer": {"1": -1834.66}, "answer_t": 4.0,
               "t_recorded": 2.9, "tolerance": 1e-4, "degrees": list(range(2, 11)),
               "extrapolate": True, "error_estimate": {"1": 10.0}, "valid_until": {"1": 1.0},
               "beyond_horizon": True, "beyond_from": 1.1, "status": 1, "message": "blew up"}
    lines = format_summary(summary).splitlines()
    assert lines[0] == "final values at t = 2.9"
    assert lines[1].startswith("answer at t = 4: extrapolated across degrees 2..10")
