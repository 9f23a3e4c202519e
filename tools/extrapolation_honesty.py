"""How honest is the extrapolation's error estimate on the attention family's own ladders?

For each case (a finite-``d`` model, so the exact matrix flow from the same matrices is the
truth) it solves every degree from 2 to ``M``, extrapolates across them as ``hierarchy solve``
does, and counts, at the validity tolerances 1e-4 (the default), 1e-3 and 1e-2, over the
observables of degree <= 2 that move:

- ``certified``: the (time, observable) points inside the validity horizon;
- ``>10x``: certified points whose true error exceeds ten times the claimed one (the
  project's criterion for an under-claim);
- ``>tol``: certified points whose true error exceeds the tolerance times the observable's
  scale (the certification itself is wrong there), and ``>10 tol`` ten times that.

and, over all of them, the largest ratio of true to claimed error of a certified point.
Each count is given three times, measured in the same run: for the estimator as it is
(``vouched``: an irregular ladder is not credited with acceleration,
:func:`hierarchy.core.extrapolation.irregular`, and every estimate is checked against the one
built without the two newest degrees, ``LEFT_OUT``), without that check (``no-check``, the
previous release), and without either (``unvouched``: every ladder counts as regular).

    python tools/extrapolation_honesty.py            # 18 cases, about two minutes
    python tools/extrapolation_honesty.py --quick    # 4 cases
    python tools/extrapolation_honesty.py --degree 8 # every case on the ladder 2..8 (short
                                                     # ladders: no check against an older
                                                     # estimate, which needs 9 degrees)
"""

import argparse
import copy
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOLERANCES = (1e-4, 1e-3, 1e-2)
TIED_QUADRATIC = {"model": {"parameterization": "tied", "K": 2, "trainable": [1]},
                  "loss": {"name": "quadratic"}, "hierarchy": {"degree": 10},
                  "init": {"d": 200, "scale": [0.6, 1.0], "seed": 0},
                  "solve": {"t_final": 0.3, "points": 61}}
FIGURE_1 = {"model": {"tokens": 2}, "loss": {"name": "softmax-mse"},
            "hierarchy": {"degree": 12}, "init": {"d": 100, "seed": 0},
            "solve": {"t_final": 1.5, "points": 61}}


def with_changes(base, **changes):
    """A copy of ``base`` with ``section_key=value`` changes (``init_seed=3``)."""
    out = copy.deepcopy(base)
    for name, value in changes.items():
        section, key = name.split("_", 1)
        out[section][key] = value
    return out


def cases(quick, degree=None):
    out = {f"tied quadratic, seed {seed}": with_changes(TIED_QUADRATIC, init_seed=seed)
           for seed in range(8)}
    out["tied quadratic, scales 0.8, 1"] = with_changes(TIED_QUADRATIC, init_scale=[0.8, 1.0],
                                                        solve_t_final=0.2)
    out["tied quadratic, both trainable"] = with_changes(TIED_QUADRATIC,
                                                         model_trainable=[1, 2])
    out["tied quadratic, degree 12"] = with_changes(TIED_QUADRATIC, hierarchy_degree=12)
    out.update({f"Figure 1 model, seed {seed}": with_changes(FIGURE_1, init_seed=seed)
                for seed in range(4)})
    # tests/test_study_extrapolation.py's study: degrees 2..16 past the radius (about 0.22)
    out["tied quadratic, d = 30, degree 16"] = with_changes(
        TIED_QUADRATIC, init_d=30, hierarchy_degree=16, solve_t_final=0.3, solve_points=13,
        solve_rtol=1e-11, solve_atol=1e-13)
    out["default config, seed 2, t = 1"] = {"hierarchy": {"degree": 10},
                                            "init": {"d": 100, "seed": 2},
                                            "solve": {"t_final": 1.0, "points": 51}}
    if quick:
        keep = ("tied quadratic, seed 0", "tied quadratic, seed 5", "Figure 1 model, seed 0",
                "default config, seed 2, t = 1")
        out = {name: out[name] for name in keep}
    if degree is not None:
        out = {f"{name} (M = {degree})": with_changes(document, hierarchy_degree=degree)
               for name, document in out.items()}
    return out


def ladder_and_flow(document):
    """``(ladder (D, T, O), flow (T, O), rtol, times)`` of the observables of degree <= 2."""
    import hierarchy
    from hierarchy.config.loader import load_config
    from hierarchy.core.progress import Progress
    from hierarchy.models.attention import solve_job
    from hierarchy.models.attention.coefficients import coefficients_from_config
    from hierarchy.models.attention.flows import matrix_flow
    from hierarchy.models.attention.initial import initial_matrices
    from hierarchy.models.attention.ladder import stack_words

    config = load_config(None, document)
    run = solve_job.SolveRun(config, "unused", Progress.quiet())
    run.solve()
    runs = solve_job.solve_ladder(config, run.solver, run.mu0, run.t_eval, top=run.result)
    labels = solve_job.observable_labels(run.solver)
    ladder = stack_words(runs, run.solver.labels, run.t_eval.size)
    columns = [run.solver.index(label) for label in labels]
    model = config["model"]
    solver = hierarchy.build(model["parameterization"], model["K"], model["trainable"],
                             config["hierarchy"]["degree"])
    matrices = initial_matrices(config)
    flow = matrix_flow(solver.field, matrices,
                       coefficients_from_config(solver.field, config, matrices), run.t_eval,
                       words=[solver.words[solver.index(label)] for label in labels]).mu
    return ladder[:, :, columns], flow, float(config["solve"]["rtol"]), run.t_eval


RULES = ("vouched", "no-check", "unvouched")


@contextmanager
def rules(name):
    """The estimator as it is (``vouched``), without the check against the estimate built
    without the newest degrees (``no-check``), or without that check and with every ladder
    regular (``unvouched``)."""
    from hierarchy.core import extrapolation
    saved = extrapolation.irregular, extrapolation.LEFT_OUT
    if name != "vouched":
        extrapolation.LEFT_OUT = ()
    if name == "unvouched":
        extrapolation.irregular = lambda seqs: np.zeros(np.shape(seqs)[1:], dtype=bool)
    try:
        yield
    finally:
        extrapolation.irregular, extrapolation.LEFT_OUT = saved


def counts(ladder, flow, rtol, times):
    """``({tolerance: (certified, >10x, >tol, >10 tol, worst)}, (first, last))`` of the
    extrapolation of ``ladder``: the counts, the largest ratio of true to claimed error over
    the certified points, and the earliest and latest validity horizon of the moving
    observables at the default tolerance 1e-4."""
    from hierarchy.core.extrapolation import extrapolate_across_degrees, validity
    from hierarchy.models.attention.ladder import LADDER_RTOL_FACTOR

    estimate, error = extrapolate_across_degrees(ladder, rtol=LADDER_RTOL_FACTOR * rtol)
    true = np.abs(estimate - flow)
    moving = np.ptp(flow, axis=0) > 0
    scale = np.maximum.accumulate(np.abs(estimate), axis=0)
    out = {}
    for tolerance in TOLERANCES:
        _, certified = validity(estimate, error, tolerance)
        certified &= moving
        with np.errstate(divide="ignore", invalid="ignore"):
            under = certified & (true > 10 * error)
            worst = float(np.max(true[certified] / error[certified], initial=0.0))
        out[tolerance] = (int(certified.sum()), int(under.sum()),
                          int((certified & (true > tolerance * scale)).sum()),
                          int((certified & (true > 10 * tolerance * scale)).sum()), worst)
        if tolerance == TOLERANCES[0]:
            reached = certified.sum(axis=0)[moving]
            horizons = [times[n - 1] if n else 0.0 for n in reached]
    return out, (min(horizons), max(horizons))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four cases")
    parser.add_argument("--degree", type=int, default=None,
                        help="the highest degree of every case's ladder (default: each case's)")
    args = parser.parse_args(argv)
    totals = {rule: {tol: np.zeros(4, int) for tol in TOLERANCES} for rule in RULES}
    worst = {rule: 0.0 for rule in RULES}
    start = time.perf_counter()
    header = " | ".join(f"tol {tol:g}: certified, >10x, >tol, >10 tol" for tol in TOLERANCES)
    print(f"{'case':<34} {'rule':<10} {header} | horizons at 1e-4")
    for name, document in cases(args.quick, args.degree).items():
        ladder, flow, rtol, times = ladder_and_flow(document)
        for rule in RULES:
            with rules(rule):
                found, (first, last) = counts(ladder, flow, rtol, times)
            for tol, row in found.items():
                totals[rule][tol] += row[:4]
                worst[rule] = max(worst[rule], row[4])
            cells = " | ".join(f"{a:4d} {b:4d} {c:4d} {d:4d}" for a, b, c, d, _ in found.values())
            print(f"{name:<34} {rule:<10} {cells} | t = {first:.3g}-{last:.3g}", flush=True)
    for rule, by_tol in totals.items():
        cells = " | ".join(f"{a:4d} {b:4d} {c:4d} {d:4d}" for a, b, c, d in by_tol.values())
        print(f"{'TOTAL':<34} {rule:<10} {cells}")
    print("largest true/claimed error of a certified point, at any of the tolerances: "
          + ", ".join(f"{rule} {worst[rule]:.3g}" for rule in RULES))
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
