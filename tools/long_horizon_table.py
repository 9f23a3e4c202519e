"""The single-degree column of the README's long-horizon table (Figure 1's model, d = 100, seed 0).

Each zero-closure truncation M = 2 … 12 of the tied L = 2 softmax-MSE model is solved to t = 1
from the seed-0 matrices and compared with the exact matrix flow from the same matrices; the
extrapolated column comes from ``python tools/bench_long_horizons.py``.

    python tools/long_horizon_table.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hierarchy.models.attention.coefficients import coefficients_from_config  # noqa: E402
from hierarchy.config.loader import load_config  # noqa: E402
from hierarchy.models.attention.flows import matrix_flow  # noqa: E402
from hierarchy.models.attention.initial import initial_matrices  # noqa: E402
from hierarchy.models.attention.moments import moments_of  # noqa: E402
from hierarchy.models.attention.compiled import build  # noqa: E402

OBSERVABLES = ("1", "1.1", "1.2")
T_FINAL = 1.0


def figure1_config():
    return load_config(None, {"model": {"tokens": 2}, "loss": {"name": "softmax-mse"},
                              "hierarchy": {"degree": 12}, "init": {"d": 100, "seed": 0}})


def flow_at_the_end(config, mats):
    solver = build("tied", 2, [1], 12)
    coefficients = coefficients_from_config(solver.field, config, mats)
    flow = matrix_flow(solver.field, mats, coefficients, np.array([0.0, T_FINAL]),
                       rtol=1e-11, atol=1e-13)
    return {label: float(np.asarray(flow[label])[-1]) for label in OBSERVABLES}


def degree_error(config, mats, degree, reference):
    """``|μ^(M)(t_final) − flow|`` per observable (NaN if the degree did not reach t_final)."""
    solver = build("tied", 2, [1], degree)
    run = solver.solve(moments_of(solver.field, mats), (0.0, T_FINAL),
                       coefficients_from_config(solver.field, config, mats),
                       t_eval=np.array([0.0, T_FINAL]), rtol=1e-10, atol=1e-12, blowup=1e300)
    reached = len(run.t) == 2
    return {label: abs(float(np.asarray(run[label])[-1]) - reference[label]) if reached else np.nan
            for label in OBSERVABLES}


def main():
    config = figure1_config()
    mats = initial_matrices(config)
    reference = flow_at_the_end(config, mats)
    print(f"|zero closure - matrix flow| at t = {T_FINAL}")
    for degree in range(2, 13):
        errors = degree_error(config, mats, degree, reference)
        print(f"M = {degree:2d}  " + "  ".join(f"{label}: {errors[label]:.2e}" for label in OBSERVABLES))


if __name__ == "__main__":
    main()
