"""Fixed quasi-Monte-Carlo Gaussian points (common random numbers).

The same points are used at every state, so the vector field is a deterministic,
piecewise-smooth function of the state that an adaptive ODE solver can follow. Points come
in antithetic pairs ``(z, -z)``, which makes every odd moment exact.
"""

import functools

import numpy as np

#: default number of points (before antithetic doubling)
POINTS = 4096


@functools.cache
def normal_points(dimension, count=POINTS, seed=20240101):
    """``(2 * count, dimension)`` standard-normal points: scrambled Sobol and negatives.

    ``count`` is rounded up to a power of two.
    """
    # imported here: scipy.stats costs a second of start-up that most commands never need
    from scipy.stats import norm, qmc
    power = int(np.ceil(np.log2(max(count, 2))))
    uniform = qmc.Sobol(dimension, scramble=True, seed=seed).random_base2(power)
    z = norm.ppf(np.clip(uniform, 1e-12, 1 - 1e-12))
    points = np.concatenate([z, -z])
    points.setflags(write=False)
    return points
