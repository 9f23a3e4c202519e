"""Input handling of the attention family and its study (audit of user input, round 16).

Bad input must be one line naming the config key and what is allowed, exit status 2, before
any work: a huge ``study.max_degree`` (T2), ``sgd.batch`` (T3) or ``init.scale`` (T9/M1), a
loss that overflows double precision (T4), an untied loss the study cannot use (T7/M3), too
many spectra samples (M2), keys the chosen option ignores (A5), a moments label longer than
the degree (H2) and tied power moments no PSD matrix has (A3). An allowed degree-16 loss is
evaluated exactly (T5), and a start that runs away at once is exit 1 (T8).
"""
import json
import math

import numpy as np
import pytest
from cli_checks import assert_one_line, no_work, run_cli, write_config  # noqa: F401 (fixture)

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError



# --- T2: study.max_degree is bounded before the degree list is built ------------------------

@pytest.mark.parametrize("key", ["max_degree", "min_degree"])
@pytest.mark.parametrize("value", ["10000000", "1e9", str(2**63 - 1)])
def test_huge_study_degree_is_refused_by_value_before_any_list(tmp_path, capsys, no_work,
                                                                monkeypatch, key, value):
    import hierarchy.models.attention.config as attention_config

    def no_range(*args):
        raise AssertionError("the degree list was built before the bound was checked")

    monkeypatch.setattr(attention_config, "range", no_range, raising=False)
    config = write_config(tmp_path, f"[study]\n{key} = {value}\n")
    status, err = run_cli(capsys, "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, f"study.{key}", "512")


# --- T4: a loss that overflows double precision is one line naming its key -------------------

@pytest.mark.parametrize("key", ["student", "teacher"])
def test_an_mse_activation_overflowing_the_squared_loss_is_one_line(tmp_path, capsys, no_work,
                                                                     key):
    # atan(x)*1e299 is finite but its square (the loss) is ~1e598: not a double.
    config = write_config(tmp_path, f'[loss]\nname = "mse"\n{key} = "atan(x)*1e299"\n')
    status, err = run_cli(capsys, "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, f"loss.{key}", "overflows")


def test_a_large_but_finite_mse_loss_is_accepted():
    # 1e150*atan(x) squares to ~2.5e300: finite, so it stays a valid (if odd) loss.
    config = load_config(None, {"loss": {"name": "mse", "student": "atan(x)*1e150"}})
    assert config["loss"]["student"] == "atan(x)*1e150"


# --- T5: an allowed degree-16 polynomial loss is derived and evaluated exactly ---------------

def _gaussian_power_moment(n, mean, variance):
    """``E u^n`` for ``u ~ N(mean, variance)``: Σ_k C(n, 2k) mean^(n-2k) variance^k (2k-1)!!."""
    total = 0.0
    for k in range(n // 2 + 1):
        total += (math.comb(n, 2 * k) * mean ** (n - 2 * k) * variance ** k
                  * math.prod(range(1, 2 * k, 2)))
    return total


def test_a_degree_16_polynomial_loss_gets_its_exact_gaussian_expectation():
    from hierarchy.models.attention.losses import make_loss
    from hierarchy.models.attention.potential import _WickPiece

    loss = make_loss({"name": "expression", "expression": "(G[1,1,1]+G[1,1,2]+1)**16"}, 1, 2)
    (term,) = loss.terms
    piece = _WickPiece(term)  # the lambdified form hit a RecursionError after ~35 s
    mean, cov = np.array([0.3, 0.2]), np.array([[0.5, 0.1], [0.1, 0.4]])
    value, gradient, hessian, error, _ = piece(mean, cov)
    u_mean, u_var = 1.0 + mean.sum(), cov.sum()
    # Every monomial is positive here (positive mean and covariance), so the table's sum is
    # accurate to (number of monomials) x machine epsilon.
    rtol = piece._coefficients.shape[1] * np.finfo(float).eps
    assert value == pytest.approx(_gaussian_power_moment(16, u_mean, u_var), rel=rtol)
    assert gradient == pytest.approx([16 * _gaussian_power_moment(15, u_mean, u_var)] * 2, rel=rtol)
    assert hessian == pytest.approx(np.full((2, 2), 240 * _gaussian_power_moment(14, u_mean, u_var)),
                                    rel=rtol)
    assert error == 0.0


# --- T8: a start that runs away at once is exit 1 even with extrapolation --------------------

def test_a_solve_that_runs_away_at_once_is_exit_1_naming_the_blow_up(tmp_path, capsys):
    # weight decay 1e300: the integrator cannot take a step past t = 0 (docs/cli.md, exit 1:
    # "a start from which the solution runs away at once"), though solve.extrapolate is on.
    config = write_config(tmp_path, "[model]\nweight_decay = 1e300\n[solve]\nt_final = 0.01\n"
                                    "points = 3\nextrapolate = true\n")
    out = tmp_path / "out"
    status, err = run_cli(capsys, "--quiet", "solve", config, "--out", out)
    assert status == 1, err
    assert "ran away at once" in err and "integrator failed" in err, err
    assert "validity horizon" not in err, err
    assert json.loads((out / "result.json").read_text())["complete"] is False


# --- T7/M3: a loss the untied hierarchy cannot use is refused before the study's jobs --------

UNTIED_CONCAVE = ('[model]\nparameterization = "untied"\nK = 2\ntrainable = [1]\n'
                  '[loss]\nname = "expression"\nexpression = "-(G[1,1,1]-G[1,1,2])**2"\n'
                  '[init]\nd = 20\n[sgd]\nd = 20\n[solve]\nt_final = 0.01\npoints = 3\n'
                  '[study]\nmax_degree = 3\nseeds = [0]\nscheduler = "serial"\n')


def test_study_refuses_an_untied_loss_without_a_convex_mean_before_any_job(tmp_path, capsys,
                                                                           monkeypatch):
    from hierarchy.models.attention import study_jobs

    def forbidden(*args, **kwargs):
        raise AssertionError("a study job ran before the loss was checked")

    for job in ("sgd_job", "degree_job", "flow_job"):
        monkeypatch.setattr(study_jobs, job, forbidden)
    config = write_config(tmp_path, UNTIED_CONCAVE)
    out = tmp_path / "out"
    status, err = run_cli(capsys, "study", config, "--out", out)
    assert_one_line(status, err, "loss.expression", 'model.parameterization = "untied"')
    assert not (out / "jobs").exists()


# --- T3: a minibatch beyond memory is refused naming sgd.batch -------------------------------

@pytest.mark.parametrize("batch", ["1000000000000", "1e15", str(2**63 - 1)])
def test_a_batch_beyond_memory_is_refused_naming_sgd_batch(tmp_path, capsys, no_work,
                                                           monkeypatch, batch):
    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(8 * 2**30))
    config = write_config(tmp_path, f"[sgd]\nbatch = {batch}\n")
    status, err = run_cli(capsys, "sgd", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "sgd.batch", "allowed: batch <=")
    assert "out of memory" not in err


def test_the_largest_batch_the_message_allows_is_accepted(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(8 * 2**30))
    with pytest.raises(HierarchyError) as refused:
        load_config(None, {"sgd": {"batch": 10**12}})
    largest = int(str(refused.value).rsplit("batch <= ", 1)[1])
    assert load_config(None, {"sgd": {"batch": largest}})["sgd"]["batch"] == largest
    with pytest.raises(HierarchyError, match="sgd.batch"):
        load_config(None, {"sgd": {"batch": largest + 1}})


# --- M2: a huge spectra.test_ratio gets a short line naming spectra.test_ratio ---------------

MULTICLASS_SPECTRA = ('[model]\nfamily = "gmm-multiclass"\nclasses = 3\n[sgd]\ndimension = 60\n'
                      "[spectra]\ntimes = [0.0]\n")


@pytest.mark.parametrize("line, key", [("test_ratio = 1e300", "spectra.test_ratio"),
                                       ("test_size = 10000000", "spectra.test_size")])
def test_too_many_spectra_samples_are_one_short_line_naming_the_key_set(tmp_path, capsys,
                                                                        no_work, line, key):
    config = write_config(tmp_path, MULTICLASS_SPECTRA + line + "\n")
    status, err = run_cli(capsys, "sgd", config, "--out", tmp_path / "out")
    assert_one_line(status, err, key, "allowed: M~ <= 1000000 at d = 60")
    assert len(err) < 200, err  # the 1e300 ratio spelled a 300-digit integer (415 characters)


# --- A5: keys the chosen option ignores are refused, not silently dropped ---------------------

@pytest.mark.parametrize("loss, key", [
    ({"name": "quadratic", "student": "tanh"}, "loss.student"),
    ({"name": "quadratic", "expression": "G[1,1,1]**2"}, "loss.expression"),
    ({"name": "expression", "expression": "G[1,1,1]**2", "teacher": "erf"}, "loss.teacher"),
    ({"name": "mse", "expression": "G[1,1,1]**2"}, "loss.expression"),
])
def test_a_loss_key_the_loss_does_not_read_is_refused(loss, key):
    with pytest.raises(HierarchyError) as refused:
        load_config(None, {"loss": loss})
    assert refused.value.field == key and "does not read it" in str(refused.value)


@pytest.mark.parametrize("loss", [{"name": "mse", "student": "tanh", "teacher": "erf"},
                                  {"name": "expression", "expression": "G[1,1,1]**2"},
                                  {"name": "quadratic", "student": "h1"}])
def test_loss_keys_read_by_the_loss_or_left_at_their_default_are_accepted(loss):
    assert load_config(None, {"loss": loss})["loss"]["name"] == loss["name"]


@pytest.mark.parametrize("source", ["gaussian", "limit"])
def test_a_moments_file_with_another_source_is_refused(tmp_path, capsys, no_work, source):
    config = write_config(tmp_path, f'[init]\nsource = "{source}"\nmoments = "m.json"\n')
    status, err = run_cli(capsys, "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "init.moments", f'init.source = "{source}"')


@pytest.mark.parametrize("references", ['["sgd"]', "[]"])
def test_study_references_without_the_matrix_flow_are_refused(tmp_path, capsys, no_work,
                                                              references):
    # The study always runs the flow and reported its errors whatever the list said.
    config = write_config(tmp_path, f"[study]\nreferences = {references}\n")
    status, err = run_cli(capsys, "study", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "study.references", '"matrix-flow"')


def test_study_references_without_sgd_plan_no_sgd_job():
    from hierarchy.study.jobs import FLOW, SGD, plan_jobs

    config = load_config(None, {"study": {"references": ["matrix-flow"], "max_degree": 3}})
    kinds = {job.kind for job in plan_jobs(config)}
    assert SGD not in kinds and FLOW in kinds


# --- H2: a moments label longer than the degree is refused by its length, at once ------------

def test_a_huge_moments_label_is_refused_by_its_length_before_canonicalising(tmp_path, capsys,
                                                                             no_work,
                                                                             monkeypatch):
    from hierarchy.models.attention import initial

    parse = initial.parse_label

    def no_canonical(label, alph):
        assert len(label) < 100, "the long label was canonicalised (quadratic time)"
        return parse(label, alph)

    labels = {"1": 1.0, "2": 1.0, "1.1": 2.0, "1.2": 0.5, "2.2": 2.0}
    moments = dict(labels, **{".".join(["1"] * 60_000): 1.0})
    (tmp_path / "m.json").write_text(json.dumps(moments), encoding="utf-8")
    monkeypatch.setattr(initial, "parse_label", no_canonical)
    config = write_config(tmp_path, '[hierarchy]\ndegree = 4\n'
                                    '[init]\nsource = "moments"\nmoments = "m.json"\n')
    status, err = run_cli(capsys, "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "init.moments", "60000 letters", "more than 512")


def test_a_moments_file_with_words_beyond_the_degree_is_accepted(tmp_path):
    # the audit's regression: a degree-12 file at hierarchy.degree = 10 (a study's max_degree
    # 12 reads those words) was refused; it was accepted before and is again
    from hierarchy.config.loader import load_config
    from hierarchy.models.attention.initial import initial_moments

    base = load_config(None, {"hierarchy": {"degree": 12}, "init": {"d": 50, "seed": 1}})
    import hierarchy
    solver = hierarchy.build("tied", 2, [1], 12)
    values = initial_moments(solver.field, base)
    (tmp_path / "m.json").write_text(json.dumps(dict(zip(solver.labels, map(float, values)))),
                                     encoding="utf-8")
    config = load_config(None, {"hierarchy": {"degree": 10},
                                "init": {"source": "moments", "moments": str(tmp_path / "m.json")},
                                "study": {"max_degree": 12}})
    assert config["init"]["source"] == "moments"


def test_moments_labels_up_to_the_degree_are_read(tmp_path):
    from hierarchy.models.attention import words
    from hierarchy.models.attention.initial import read_moments_file

    path = tmp_path / "m.json"
    path.write_text(json.dumps({"1.2.1.2": 0.5, "2.1": 0.25}), encoding="utf-8")
    values = read_moments_file(path, words.alphabet("tied", 2), degree=4)
    assert values == {"1.2.1.2": 0.5, "1.2": 0.25}
    with pytest.raises(HierarchyError, match="more than 3, the longest word"):
        read_moments_file(path, words.alphabet("tied", 2), degree=3)


# --- A3: tied powers Tr(S_k^n)/d must be the moments of a spectrum >= 0 -----------------------

def _tied_moments(field, matrices):
    from hierarchy.models.attention.moments import moments_of

    return dict(zip(field.labels, (float(v) for v in moments_of(field, matrices))))


@pytest.mark.parametrize("label, value", [("1.1.1.1", -5.0),  # Tr(S^4)/d < 0
                                          ("1", 1.6),          # Tr(S^2)/d < (Tr(S)/d)^2
                                          ("1.1.1.1", 1e-2)])  # m4 m2 < m3^2
def test_unrealisable_tied_power_moments_are_refused_naming_init_moments(tmp_path, capsys,
                                                                         label, value):
    from hierarchy.models.attention.operators import build_field

    field = build_field("tied", 2, [1], 4)
    rng = np.random.default_rng(0)
    moments = _tied_moments(field, [rng.standard_normal((20, 20)) / np.sqrt(20)] * 2)
    moments[label] = value
    (tmp_path / "m.json").write_text(json.dumps(moments), encoding="utf-8")
    config = write_config(tmp_path, '[hierarchy]\ndegree = 4\n[solve]\nt_final = 0.01\n'
                                    '[init]\nsource = "moments"\nmoments = "m.json"\n')
    status, err = run_cli(capsys, "--quiet", "solve", config, "--out", tmp_path / "out")
    assert_one_line(status, err, "Tr(S_1^n)/d", "not PSD")


@pytest.mark.parametrize("width, scale", [(1, 1.0), (2, 1.0), (20, 1.0), (20, 0.0)])
def test_realisable_low_rank_and_zero_starts_pass_the_power_check(width, scale):
    # A rank-1 or zero S_1 puts its spectrum on one or two points: the Hankel matrices are
    # exactly singular, so rounding decides the sign; HANKEL_TOLERANCE must absorb it.
    from hierarchy.models.attention.initial import check_moments
    from hierarchy.models.attention.moments import moments_of
    from hierarchy.models.attention.operators import build_field

    field = build_field("tied", 2, [1], 10)
    rng = np.random.default_rng(1)
    matrices = [scale * rng.standard_normal((20, width)) / np.sqrt(20),
                rng.standard_normal((20, 20)) / np.sqrt(20)]
    check_moments(field, moments_of(field, matrices))


# --- T9/M1: an init.scale whose start overflows is refused at validation ---------------------

@pytest.mark.parametrize("command", ["solve", "sgd", "study"])
def test_a_huge_init_scale_is_refused_naming_init_scale(tmp_path, capsys, no_work, command):
    # sgd called it a divergence at step 0 ("lower sgd.learning_rate"), solve blamed
    # init.moments after numpy overflow warnings.
    config = write_config(tmp_path, "[init]\nscale = [1e300, 1.0]\n")
    status, err = run_cli(capsys, command, config, "--out", tmp_path / "out")
    assert_one_line(status, err, "init.scale", "index 1", "allowed: scale <=")


@pytest.mark.parametrize("parameterization", ["tied", "untied", "direct"])
def test_the_largest_scale_allowed_gives_finite_moments(parameterization):
    from hierarchy.models.attention.initial import initial_moments
    from hierarchy.models.attention.operators import build_field

    overrides = {"model": {"parameterization": parameterization},
                 "hierarchy": {"degree": 4}, "init": {"d": 20, "scale": [1e300, 1.0]}}
    with pytest.raises(HierarchyError) as refused:
        load_config(None, overrides)
    largest = float(str(refused.value).rsplit("scale <= ", 1)[1])
    overrides["init"]["scale"] = [largest, 1.0]
    config = load_config(None, overrides)
    field = build_field(parameterization, 2, [1], 4)
    with np.errstate(all="raise"):
        mu = initial_moments(field, config)
    # At the bound the degree-4 moments are below 1e150 (Bai-Yin norm estimate), far from
    # the double range, and their pairwise products stay finite.
    assert np.all(np.isfinite(mu)) and np.max(np.abs(mu)) < 1e150


def test_a_long_trainable_list_is_refused_in_linear_time():
    # the input audit's H3: 150,000 copies of 1 took 25 s to be refused (list.count per entry)
    import time as clock
    from hierarchy.config.loader import load_config

    start = clock.perf_counter()
    with pytest.raises(HierarchyError) as error:
        load_config(None, {"model": {"parameterization": "tied", "K": 2,
                                     "trainable": [1] * 150_000}})
    assert error.value.field == "model.trainable" and "index 1 is repeated" in str(error.value)
    assert clock.perf_counter() - start < 5.0  # quadratic: 25 s; linear: milliseconds
