"""Mini-batch size against the committee plateau and the final risk (ODE, ``[sgd] batch``).

K = M = 2, erf, mse, eta = 1, from the symmetric start ``Q = 0.05 I``, ``R = 1e-3`` (the
committee plateau). For ``B = 1, 2, 4, 16``:

- the escape time: the first alpha (= steps/N) at which ``eg < 1e-3`` (no label noise), and
  the same in samples, ``alpha_samples = B alpha``;
- the final risk with label noise ``sigma = 0.5`` at fixed steps (``alpha = 2000``) and at
  fixed samples (``alpha_samples = 2000``, i.e. ``alpha = 2000/B``).

The ODE only: the SGD side of the comparison is covered by the tests
(``tests/test_network_batch_sphere.py``); it is not run here.

Usage: ``python tools/fig_batch_size.py``
"""

import math
import time

import numpy as np
from scipy.integrate import solve_ivp

from hierarchy.models.network.field import network_system
from hierarchy.models.network.model import network_from_config

BATCHES = (1, 2, 4, 16)
START = np.array([0.05, 0.0, 0.05, 1e-3, 1e-3, 1e-3, 1e-3])


def system_of(batch, noise):
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": 2, "activation": "erf", "second_layer": "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": 2, "activation": "erf", "noise": noise,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": 1.0, "step_second_layer": "step", "batch": batch}}
    return network_system(network_from_config(config), engine="numpy")


def solve(system, horizon, event=None):
    return solve_ivp(lambda t, u: system.rhs(u, t), (0.0, horizon), START, events=event,
                     method="LSODA", rtol=1e-8, atol=1e-12)


def escape(system, horizon=5000.0):
    def low(t, u):
        return system.eg(u) - 1e-3
    low.terminal, low.direction = True, -1
    solution = solve(system, horizon, low)
    return float(solution.t_events[0][0]) if len(solution.t_events[0]) else math.inf


def main():
    start = time.time()
    print("B  alpha_escape  alpha_samples_escape  eg(alpha=2000)  eg(alpha_samples=2000)")
    for batch in BATCHES:
        t = escape(system_of(batch, 0.0))
        noisy = system_of(batch, 0.5)
        steps = noisy.eg(solve(noisy, 2000.0).y[:, -1])
        samples = noisy.eg(solve(noisy, 2000.0 / batch).y[:, -1])
        print(f"{batch:<3d}{t:12.4g}{batch * t:22.4g}{steps:15.4g}{samples:22.4g}")
    print(f"({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
