"""What the merge check costs: a tanh ``K = M = 3`` field call with and without it.

Every engine pattern's rows are checked for fields the compiled factor reports it merged
(:mod:`hierarchy.models.network.merged_fields`), and a row with such a merge is evaluated
once more. At a state without merges (a random one, as here) the check is the whole cost.
Both variants run in the same process, alternating call by call, at states a little apart
(so that no memo answers), and the medians and their ratio are printed, together with the
time the check itself took per call.

    python tools/bench_merge_check.py            # 9 calls of each
    python tools/bench_merge_check.py --calls 3
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONFIG = {"model": {"family": "network", "loss": "mse",
                    "student": {"width": 3, "activation": "tanh"},
                    "teacher": {"width": 3, "activation": "tanh"}}}


def random_state(system, seed=0):
    """``Q``, ``R`` of students ``N(0, 0.25)`` in 8 dimensions against teachers ``e_1..e_3``."""
    rng = np.random.default_rng(seed)
    w = 0.5 * rng.standard_normal((3, 8))
    q, r = w @ w.T, w @ np.eye(3, 8).T
    return np.array([(q if label[0] == "Q" else r)[int(label[1]) - 1, int(label[3]) - 1]
                     for label in system.labels])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=9, help="calls of each variant")
    args = parser.parse_args(argv)
    from hierarchy.config.loader import load_config
    from hierarchy.core.registry import family
    from hierarchy.models.network import engine

    system = family("network").system(load_config(None, CONFIG))
    u = random_state(system)
    checked = engine.merge_errors
    spent = []

    def timed_check(*args):
        start = time.perf_counter()
        out = checked(*args)
        spent[-1] += time.perf_counter() - start
        return out

    def unchecked(_evaluate, _c, _kinked, _merged, _values, errors):
        return errors

    system.rhs(u)  # compile and warm
    times = {"with the check": [], "without": []}
    for call in range(args.calls):
        for name, check in (("with the check", timed_check), ("without", unchecked)):
            engine.merge_errors = check
            spent.append(0.0)
            start = time.perf_counter()
            system.rhs(u * (1.0 + 1e-9 * (2 * call + (name == "without") + 1)))
            times[name].append(time.perf_counter() - start)
    engine.merge_errors = checked
    medians = {name: float(np.median(values)) for name, values in times.items()}
    for name, value in medians.items():
        print(f"tanh K = M = 3 field call, {name}: {value * 1e3:.1f} ms (median of {args.calls})")
    check = float(np.median(spent[0::2]))
    print(f"the check itself: {check * 1e3:.2f} ms a call, "
          f"{100 * check / medians['with the check']:.1f}% of the call")
    print(f"ratio with / without: {medians['with the check'] / medians['without']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
