"""The sympy symbols of the summary-statistics engine (one shared set).

State symbols are the statistics of spiked PCA, ``m = <x, v>`` and ``r2 = |x - m v|^2``;
``q = |x|^2`` is the squared radius used while differentiating functions of the invariants
(``q = m^2 + r2`` is substituted before anything is shown or compiled). ``eps = n^{-1/2}`` is
the small parameter of every large-``n`` limit.
"""

import sympy as sp

#: dimension n of the parameter vector
n = sp.Symbol("n", positive=True)
#: overlap with the spike, m = <x, v>
m = sp.Symbol("m", real=True)
#: squared distance to the spike axis, r2 = |x - m v|^2
r2 = sp.Symbol("r2", nonnegative=True)
#: squared radius q = |x|^2 = m^2 + r2
q = sp.Symbol("q", nonnegative=True)
#: signal-to-noise ratio lambda
snr = sp.Symbol("lambda", positive=True)
#: ridge coefficient a of the penalty (a/2)|x|^2
ridge = sp.Symbol("a", nonnegative=True)
#: step constant c_delta of delta = c_delta / n
step = sp.Symbol("c_delta", positive=True)
#: n^{-1/2}, the small parameter of the limits
eps = sp.Symbol("epsilon", positive=True)
#: the pairing s = <x, y> of two parameter vectors (covariance kernels)
pairing = sp.Symbol("s", real=True)

#: the parameters every compiled function takes after the state, in this order
PARAMETERS = (snr, ridge, step)
#: the state symbols, ordered like the fixed labels
STATE = (m, r2)
#: the fixed statistic labels of spiked PCA
LABELS = ("m", "r2")
