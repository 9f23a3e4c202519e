"""The Python API's extrapolated answer (issue 24 item 8).

``Solver.solve(..., extrapolate=True)`` must give what ``hierarchy solve`` gives: the answer
across degrees with an error estimate and a validity horizon. Checked against the exact
``d -> infinity`` limit of the exactly solvable case (an independent integral), against a
ladder rebuilt degree by degree with its own coefficient functions, and by running the
README's example and comparing what it prints with what the README says it prints.
"""

import contextlib
import io
import pathlib
import re

import numpy as np
import pytest
from scenarios import TIED_QUADRATIC_GAMMA

import hierarchy
from hierarchy.core.errors import HierarchyError
from hierarchy.core.extrapolation import extrapolate_across_degrees, stack_degrees
from hierarchy.models.attention.coefficients import make_coefficients
from hierarchy.models.attention.exact_limit import (
    convergence_radius,
    limit_moments,
    marchenko_pastur_moment,
)
from hierarchy.models.attention.initial import initial_moments
from hierarchy.models.attention.losses import make_loss

ROOT = pathlib.Path(__file__).resolve().parents[1]
OBSERVABLES = ["1", "1.1", "1.2"]
RTOL = 1e-12


def catalan_start(solver):
    """``S_2 = I`` and Marchenko-Pastur ``S_1``: a word with ``n`` ones is Catalan C_n."""
    return np.array([marchenko_pastur_moment(label.split(".").count("1"))
                     for label in solver.labels])


def test_extrapolated_answer_is_within_its_error_of_the_exact_limit():
    solver = hierarchy.build("tied", 2, [1], 14)
    times = np.linspace(0.0, 0.18, 19)   # to 2.5 convergence radii
    run = solver.solve(catalan_start(solver), (0.0, 0.18), TIED_QUADRATIC_GAMMA, t_eval=times,
                       extrapolate=True, rtol=RTOL, atol=RTOL * 1e-2)
    exact = limit_moments(OBSERVABLES, times)
    columns = [solver.index(label) for label in OBSERVABLES]
    answer, error = run.y[:, columns], run.error[:, columns]
    assert np.all(np.abs(answer - exact) <= error)
    assert np.all(np.abs(answer[-1] - exact[-1]) < 1e-5)
    # degree 14 alone is far off there: the extrapolation is what makes the answer
    top = solver.solve(catalan_start(solver), (0.0, 0.18), TIED_QUADRATIC_GAMMA, t_eval=times,
                       rtol=RTOL, atol=RTOL * 1e-2, blowup=1e300)
    assert times[-1] == pytest.approx(2.5 * convergence_radius(), rel=0.01)
    assert abs(top["1.1"][-1] - exact[-1, 1]) > 0.1 or not top.success
    assert run.degrees == list(range(2, 15)) and run.tolerance == 1e-4
    for label in OBSERVABLES:   # valid_until is the last time of the valid prefix
        valid = run.valid[:, solver.index(label)]
        prefix = np.cumprod(valid).astype(bool)
        assert run.valid_until[label] == times[prefix.sum() - 1]
    assert run.beyond_horizon == (not run.valid.all())


def test_coefficient_function_is_read_on_the_lower_degrees():
    loss = make_loss({"name": "mse", "student": "h2", "teacher": "h2"}, 1, 2)
    config = {"model": {"parameterization": "tied", "K": 2},
              "init": {"d": 400, "scale": [0.6, 1.0]}}
    solver = hierarchy.build("tied", 2, [1], 8)
    mu0 = initial_moments(solver.field, config)
    times = np.linspace(0.0, 0.1, 6)
    run = solver.solve(mu0, (0.0, 0.1), make_coefficients(solver.field, loss), t_eval=times,
                       extrapolate=True)
    # the reference ladder: each degree with its own field's coefficient function
    runs = []
    for degree in range(2, 9):
        lower = hierarchy.build("tied", 2, [1], degree)
        begin = mu0[[solver.index(label) for label in lower.labels]]
        runs.append(lower.solve(begin, (0.0, 0.1), make_coefficients(lower.field, loss),
                                t_eval=times, blowup=1e150))
    estimate, _ = extrapolate_across_degrees(stack_degrees(runs, OBSERVABLES, len(times)),
                                             rtol=10 * 1e-8)
    columns = [solver.index(label) for label in OBSERVABLES]
    assert np.allclose(run.y[:, columns], estimate, rtol=1e-10, atol=1e-12)


def test_bad_arguments_are_one_line_errors():
    solver = hierarchy.build("tied", 2, [1], 6)
    mu0 = catalan_start(solver)
    with pytest.raises(HierarchyError) as error:   # no inputs: cannot be read on degree 2
        solver.solve(mu0, (0.0, 0.1), lambda mu: [2.0, -2.0, 0.0], extrapolate=True)
    assert error.value.field == "coefficients"
    with pytest.raises(HierarchyError) as error:
        solver.solve(mu0, (0.0, 0.1), TIED_QUADRATIC_GAMMA, extrapolate=True, min_degree=4)
    assert error.value.field == "min_degree"   # 4..6: too few degrees to estimate an error


def readme_block():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python"):]
    return section[section.index("```python\n") + 10:section.index("```\n", 10)], section


def test_readme_example_prints_what_the_readme_says():
    code, section = readme_block()
    printed, space = io.StringIO(), {}
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), space)   # the repository's own example
    run, q12 = space["run"], space["q12"]
    relative = run.error[-1, q12] / np.max(np.abs(run["1.2"]))
    shown = f"{relative:.1e}".replace("e-0", "e-")
    assert f"error {shown} is above" in section.replace("\n", " ")
    assert run.beyond_horizon and relative > run.tolerance
    looser = space["solver"].solve(space["mu0"], (0.0, 0.1), space["kappa"],
                                   t_eval=space["times"], extrapolate=True, tolerance=1e-3)
    assert f"is valid to {looser.valid_until['1.2']:g})" in section.replace("\n", " ")
    lines = printed.getvalue().splitlines()
    assert len(lines) == code.count("print(") == 2
    for line in lines:   # each printed line is the comment the README gives for it
        assert f"# {line}\n" in code, line
    # the per-degree values the text quotes
    solver = hierarchy.build("tied", 2, [1], 12)
    config = {"model": {"parameterization": "tied", "K": 2},
              "init": {"d": 400, "scale": [0.6, 1.0]}}
    loss = make_loss({"name": "mse", "student": "h2", "teacher": "h2"}, 1, 2)
    mu0 = initial_moments(solver.field, config)
    quoted = re.search(r"this `q₁₂` is ([\d.,\s]+) at `M = 4, 6, 8, 10, 12`", section)
    values = []
    for degree in (4, 6, 8, 10, 12):
        lower = hierarchy.build("tied", 2, [1], degree)
        begin = mu0[[solver.index(label) for label in lower.labels]]
        run = lower.solve(begin, (0.0, 0.1), make_coefficients(lower.field, loss),
                          t_eval=[0.0, 0.1])
        values.append(f"{run['1.2'][-1]:.4f}")
    assert quoted and [v.strip() for v in quoted.group(1).split(",")] == values
