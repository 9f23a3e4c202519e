"""The paired comparison of SGD runs with their own ODEs, and the matching of units.

- ``hierarchy sgd`` pairs each run with the ODE from that run's OWN initial statistics (not
  the mean start), and writes ``ode_paired``, ``ode_mean_start`` and the paired differences;
- a committee whose student unit 1 learns teacher unit 2 is relabelled before the means
  (``permutation``), with its paired ODE permuted the same way; the unmatched arrays stay;
- the permutation of labels agrees with permuting the matrices ``Q``, ``R``, ``v``
  (an independent path: numpy fancy indexing of the matrices);
- the dimension study writes and fits the paired differences.
"""

import json

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.registry import family_of
from hierarchy.core.summary_table import comparison_table
from hierarchy.models.network import matching
from hierarchy.sgd import paired
from hierarchy.study import dimension_analysis
from hierarchy.study.dimension_analysis import analyse_paired
from hierarchy.study.run import run_study

COMMITTEE = """
[model]
family = "network"
[model.student]
width = 2
[model.teacher]
width = 2
[solve]
t_final = {t_final}
points = {points}
[sgd]
dimension = {dimension}
runs = {runs}
"""

#: unit 1 starts aligned with teacher 2 and unit 2 with teacher 1: it specialises swapped
SWAPPED = """
[init]
source = "statistics"
[init.statistics]
"Q1.1" = 0.3
"Q2.2" = 0.3
"R1.1" = 0.05
"R1.2" = 0.4
"R2.1" = 0.4
"R2.2" = 0.05
"""


def run_sgd(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    config = load_config(path)
    out = tmp_path / "out"
    family_of(config).run_sgd(config, out)
    with np.load(out / "result.npz") as data:
        arrays = {key: data[key] for key in data.files}
    summary = json.loads((out / "result.json").read_text())["summary"]
    return config, arrays, summary


def matrices(labels, state, K, M):
    """``Q (K, K)``, ``R (K, M)`` of a state, read from its labels."""
    at = {label: state[j] for j, label in enumerate(labels)}
    q = np.array([[at[f"Q{min(i, k)}.{max(i, k)}"] for k in range(1, K + 1)]
                  for i in range(1, K + 1)])
    r = np.array([[at[f"R{i}.{n}"] for n in range(1, M + 1)] for i in range(1, K + 1)])
    return q, r


def test_a_run_that_specialises_swapped_is_matched_before_the_mean(tmp_path):
    config, data, summary = run_sgd(tmp_path, COMMITTEE.format(
        t_final=20.0, points=5, dimension=200, runs=3) + SWAPPED)
    labels = list(data["labels"])
    raw, matched = data["u_runs_unmatched"], data["u_runs"]
    for run in range(3):
        q, r = matrices(labels, raw[run, -1], 2, 2)
        assert abs(r[0, 1]) > 2 * abs(r[0, 0]) and abs(r[1, 0]) > 2 * abs(r[1, 1])  # swapped
        np.testing.assert_array_equal(data["permutation"][run], [1, 0])
        for row in range(raw.shape[1]):  # the matrices permuted by numpy indexing
            q, r = matrices(labels, raw[run, row], 2, 2)
            q_new, r_new = matrices(labels, matched[run, row], 2, 2)
            np.testing.assert_array_equal(q_new, q[[1, 0]][:, [1, 0]])
            np.testing.assert_array_equal(r_new, r[[1, 0]])
        # the paired ODE goes with its run: the same permutation
        np.testing.assert_array_equal(
            data["ode_paired"][run],
            data["ode_paired_unmatched"][run][:, matching.label_columns(labels, [1, 0])])
    np.testing.assert_allclose(data["u"], matched.mean(axis=0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(data["mean_unmatched"], raw.mean(axis=0), rtol=0, atol=1e-15)
    assert summary["final"]["R1.1"] > 2 * summary["final"]["R1.2"]
    assert summary["final_unmatched"]["R1.2"] > 2 * summary["final_unmatched"]["R1.1"]
    assert summary["matching"]["matched"] and summary["matching"]["runs_relabelled"] == 3
    assert "*_unmatched" in comparison_table(summary["comparison"], summary["matching"])


def test_the_paired_odes_start_from_each_runs_own_statistics(tmp_path):
    config, data, summary = run_sgd(tmp_path, COMMITTEE.format(
        t_final=2.0, points=5, dimension=20, runs=4)
        + '[init]\nsource = "gaussian"\nscale = 0.5\nseed = 3\n')
    raw, odes = data["u_runs_unmatched"], data["ode_paired_unmatched"]
    starts = raw[:, 0]
    assert np.min(np.ptp(starts, axis=0)[:3]) > 0.05      # the runs' starts differ
    np.testing.assert_allclose(odes[:, 0], starts, rtol=0, atol=1e-12)
    np.testing.assert_allclose(data["ode_paired"][:, 0], data["u_runs"][:, 0], rtol=0, atol=1e-12)
    assert np.all(data["paired_difference"][0] < 1e-12)
    # an independent solve of the same field from each run's own start
    system = family_of(config).system(config)
    times = data["t"]
    for run in range(4):
        solved = solve_ivp(lambda t, u: system.rhs(u, t), (0.0, times[-1]), starts[run],
                           t_eval=times, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(odes[run], solved.y.T, rtol=0, atol=1e-6)
    # the ODE from the mean start starts at the mean of the matched starts: the mean SGD
    # it is compared with, so the unpaired difference is 0 at t = 0
    np.testing.assert_allclose(data["ode_mean_start"][0], data["u_runs"][:, 0].mean(axis=0),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(data["ode_mean_start"][0], data["u"][0], rtol=0, atol=1e-12)
    relabelled = np.any(data["permutation"] != np.arange(2), axis=1)
    assert relabelled.any()  # so the mean of the raw starts is not the same
    assert np.max(np.abs(data["ode_mean_start"][0] - starts.mean(axis=0))) > 0.01
    # ... which is none of the runs' own starts
    assert np.min(np.max(np.abs(data["ode_mean_start"][0] - data["u_runs"][:, 0]), axis=1)) > 0.01
    # the paired difference is the mean of |SGD_r - ODE_r| over the runs
    np.testing.assert_allclose(data["paired_difference"],
                               np.abs(data["u_runs"] - data["ode_paired"]).mean(axis=0),
                               rtol=1e-12, atol=1e-15)
    entry = summary["comparison"]["statistics"]["R1.1"]
    assert entry["paired"] == pytest.approx(np.max(data["paired_difference"][:, 3]))


def test_label_permutation_is_the_matrix_permutation():
    labels = ["Q1.1", "Q1.2", "Q1.3", "Q2.2", "Q2.3", "Q3.3", "R1.1", "R1.2", "R2.1", "R2.2",
              "R3.1", "R3.2", "v1", "v2", "v3", "eg"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    q, r, v = a @ a.T, rng.standard_normal((3, 2)), rng.standard_normal(3)
    state = np.array([q[0, 0], q[0, 1], q[0, 2], q[1, 1], q[1, 2], q[2, 2], *r.ravel(), *v, 7.0])
    p = [2, 0, 1]
    moved = state[matching.label_columns(labels, p)]
    q_new, r_new = matrices(labels, moved, 3, 2)
    np.testing.assert_array_equal(q_new, q[p][:, p])
    np.testing.assert_array_equal(r_new, r[p])
    np.testing.assert_array_equal(moved[12:15], v[p])
    assert moved[-1] == 7.0


def test_assignment_by_largest_overlap_with_more_students_than_teachers():
    r = np.array([[0.1, 0.9], [0.2, 0.3], [-0.8, 0.1]])   # student 3 -> teacher 1 (|R|)
    np.testing.assert_array_equal(matching.unit_permutation(r), [2, 0, 1])
    np.testing.assert_array_equal(matching.unit_permutation(r[[1, 0, 2]]), [2, 1, 0])


def test_units_with_unequal_fixed_second_layers_are_not_matched():
    config = load_config(None, {"model": {"family": "network",
                                          "student": {"second_layer_values": [1.0, 2.0]}}})
    assert family_of(config).unit_matching(config) is None
    config = load_config(None, {"model": {"family": "network"}})
    assert family_of(config).unit_matching(config) is not None


def test_one_solve_serves_equal_starts_and_each_distinct_start_has_its_own():
    calls = []

    def solve_one(start):
        calls.append(start.copy())
        return np.outer([1.0, 2.0], start)

    same = np.array([[1.0, 2.0], [1.0, 2.0 + 1e-14], [1.0, 2.0]])
    out = paired.solve_starts(same, solve_one)
    assert len(calls) == 1 and out.shape == (3, 2, 2)
    calls.clear()
    distinct = np.array([[1.0, 2.0], [3.0, 4.0], [np.nan, 0.0]])
    out = paired.solve_starts(distinct, solve_one)
    assert len(calls) == 2
    np.testing.assert_array_equal(out[1], [[3.0, 4.0], [6.0, 8.0]])
    assert np.all(np.isnan(out[2]))


def test_paired_difference_over_the_live_pairs():
    runs = np.array([[[1.0], [2.0]], [[3.0], [np.nan]], [[0.0], [5.0]]])
    odes = np.zeros_like(runs)
    mean, se, count = paired.paired_difference(runs, odes)
    np.testing.assert_array_equal(count, [3, 2])
    np.testing.assert_allclose(mean[:, 0], [4.0 / 3.0, 3.5])
    np.testing.assert_allclose(se[:, 0], [np.std([1, 3, 0], ddof=1) / np.sqrt(3),
                                          np.std([2, 5], ddof=1) / np.sqrt(2)])


@pytest.mark.parametrize("power, within", [(-0.5, True), (-0.25, False)])
def test_the_paired_fit_resolves_the_rate(power, within):
    dimensions = [100, 400, 1600, 6400]
    rng = np.random.default_rng(1)
    level = np.array(dimensions, float) ** power * (1 + 0.02 * rng.standard_normal(4))
    curve = np.linspace(0.0, 1.0, 5)[None, :, None] * level[:, None, None]  # max at the end
    out = analyse_paired(dimensions, ["m"], curve, 0.01 * curve)
    assert out["paired_rate"]["m"] == pytest.approx(power, abs=0.05)
    assert out["paired_within_error"]["m"] is within
    assert out["paired_errors"][0]["noise"] == pytest.approx(0.01 * level[0])


def test_the_study_writes_and_fits_the_paired_differences(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(COMMITTEE.format(t_final=1.0, points=3, dimension=20, runs=2) + SWAPPED
                    + '[study]\ndimensions = [8, 16, 32]\nruns = 3\nscheduler = "serial"\n')
    summary = run_study(load_config(path), tmp_path / "s", quiet=True)
    assert set(summary["rate"]) == {"sgd", "paired"} and "paired" in summary["fits"]
    assert set(summary["paired_slope_stderr"]) == set(summary["observables"])
    # the start is swapped and stays so: every run is relabelled, at every dimension
    assert summary["matching"]["runs_relabelled"] == {"8": 3, "16": 3, "32": 3}
    with np.load(tmp_path / "s" / "result.npz") as data:
        assert data["paired_abs"].shape == data["paired_abs_se"].shape == (3, 3, 8)
        assert data["paired_errors"].shape == (3, 8)
        # each run is its own ODE's start (the config's statistics, realised exactly)
        assert np.all(data["paired_abs"][:, 0] < 1e-12)
        assert np.all(data["paired_abs"][:, -1] > 0)
    assert "paired slope" in (tmp_path / "s" / "study_table.txt").read_text()
    assert "paired:" in summary["table"]


def test_the_slope_error_carried_from_two_points():
    e, se = np.array([0.2, 0.1]), np.array([0.02, 0.005])
    span = np.log(400.0) - np.log(100.0)
    expected = np.sqrt((0.02 / 0.2) ** 2 + (0.005 / 0.1) ** 2) / span
    assert dimension_analysis.propagated_stderr([100, 400], e, se) == pytest.approx(expected)


def test_paired_runs_caps_the_solves_of_a_random_start(tmp_path):
    text = COMMITTEE.format(t_final=1.0, points=3, dimension=20, runs=5)
    config, data, summary = run_sgd(tmp_path, text.replace("runs = 5", "runs = 5\npaired_runs = 2")
                                    + '[init]\nsource = "gaussian"\nscale = 0.5\n')
    odes = data["ode_paired_unmatched"]
    assert np.all(np.isfinite(odes[:2])) and np.all(np.isnan(odes[2:]))
    np.testing.assert_array_equal(data["paired_count"], [2, 2, 2])
    assert summary["comparison"]["paired_runs"] == 2 and summary["comparison"]["runs"] == 5
    assert "2 of 5 runs paired" in comparison_table(summary["comparison"])


def test_paired_runs_zero_pairs_none_even_when_one_solve_would_serve_them_all():
    shared, random = np.ones((4, 3)), np.arange(12.0).reshape(4, 3)
    assert paired.paired_count(0, shared) == 0 and paired.paired_count(0, random) == 0
    assert paired.paired_count(2, shared) == 4 and paired.paired_count(2, random) == 2
    assert paired.paired_count("all", random) == 4


@pytest.mark.parametrize("value", ["some", -1, 1.5, True])
def test_a_bad_paired_runs_is_refused_naming_the_field(value):
    with pytest.raises(HierarchyError) as error:
        load_config(None, {"model": {"family": "gmm-binary"}, "sgd": {"paired_runs": value}})
    assert error.value.field == "sgd.paired_runs" and '"all"' in str(error.value)


def test_every_ensemble_family_writes_its_paired_odes(tmp_path):
    config, data, summary = run_sgd(tmp_path, """
[model]
family = "gmm-binary"
snr = "inf"
[solve]
t_final = 2.0
points = 5
[sgd]
dimension = 50
runs = 4
""")
    np.testing.assert_allclose(data["ode_paired"][:, 0], data["u_runs"][:, 0], atol=1e-12)
    assert np.ptp(data["u_runs"][:, 0, 0]) > 1e-3          # the Gaussian start: own starts
    assert not summary["matching"]["matched"] and "u_runs_unmatched" not in data
    assert set(summary["comparison"]["statistics"]) == set(data["labels"])


def test_the_worst_of_each_group_keeps_the_columns_aligned():
    statistics = {f"Q{i}.{j}@{b}": {"paired": 0.01 * i, "paired_se": 0.001, "unpaired": 0.02}
                  for i in (1, 2) for j in (1, 2) for b in range(1, 8)}
    lines = comparison_table({"statistics": statistics, "paired_runs": 2, "runs": 2}).splitlines()
    rows = [line for line in lines[2:] if "±" in line]
    assert len(rows) == 2 and all("(worst of its group)" in row for row in rows)
    assert len({len(line) for line in [lines[1], *rows]}) == 1  # every column right-aligned


def test_the_printed_comparison_gives_the_unpaired_standard_error():
    # the audit's spiked-tensor run: an unpaired difference of 3.7 standard errors in the
    # JSON, printed without its standard error
    statistics = {"m": {"paired": 0.01, "paired_se": 0.002, "unpaired": 0.0724,
                        "unpaired_se": 0.0196}}
    lines = comparison_table({"statistics": statistics, "paired_runs": 4, "runs": 4}).splitlines()
    row, = [line for line in lines if line.lstrip().startswith("m ")]
    assert row.split()[-3:] == ["0.0724", "±", "0.0196"]
    assert len(lines[1]) == len(row)  # the header's columns line up with the row


#: a 3-class cross-entropy network (unit k is the output of class k) whose unit 3 starts
#: with the largest |R| on direction 1: a matching by |R| would swap units 1 and 3
CROSS_ENTROPY = """
[model]
family = "network"
data = "mixture"
loss = "cross-entropy"
ridge = 0.01
[model.student]
width = 3
activation = "linear"
second_layer = "fixed"
[model.mixture]
means = [[1.0, 0.0], [0.0, 1.0], [-2.0, 0.0]]
weights = [0.3, 0.3, 0.4]
labels = [1.0, 2.0, 3.0]
snr = 4.0
convention = "seed"
[init]
source = "statistics"
[init.statistics]
"Q1.1" = 0.5
"Q2.2" = 0.5
"Q3.3" = 0.8
"Q1.2" = 0.1
"R1.1" = 0.2
"R2.2" = 0.1
"R3.1" = -0.6
[solve]
t_final = 2.0
points = 3
rtol = 1e-5
atol = 1e-7
[sgd]
dimension = 400
runs = 8
"""


def test_the_units_of_a_class_loss_are_never_relabelled(tmp_path):
    """Under cross-entropy, relabelling units relabels classes: another network. The mean of
    the runs is then compared with the ODE as it is, and agrees within its standard errors
    (a swap of units 1 and 3 put the comparison 260 standard errors off)."""
    config, data, summary = run_sgd(tmp_path, CROSS_ENTROPY)
    assert family_of(config).unit_matching(config) is None
    assert not summary["matching"]["matched"] and "permutation" not in data
    np.testing.assert_allclose(data["u"], data["u_runs"].mean(axis=0), rtol=0, atol=1e-15)
    for label, row in summary["comparison"]["statistics"].items():
        assert row["unpaired"] <= 4 * row["unpaired_se"], label
