"""The stated quadrature errors of a written network trajectory against its solve's tolerance.

``hierarchy solve`` certifies a network trajectory only after its post-processing (``eg`` at
every output time, then the solve again with a 100-fold tighter quadrature target, and
where rows ran to their highest order short of their target once more with every row one
order lower). When that
is cut short (a time limit, an interrupt), ``result.json`` says nothing about the field's
error. This script re-evaluates the field of the result's own config at every recorded state
and prints, for the field and ``eg``, the largest stated error against the tolerance
``atol + rtol max|u|`` that certification applies, and the output times where it is exceeded.
It repeats neither the tightened solve nor the coarse one (every row one order lower, where
rows ran to their highest order), so it is the first part of certification only.

Usage: ``python tools/network_stated_errors.py OUT_DIR`` (exit 0 when every output time is
within its tolerance, 1 otherwise, 2 for a result that is not a network solve).
"""
import argparse
import sys
import time

import numpy as np

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import read_result
from hierarchy.core.registry import family_of


def stated_errors(out_dir):
    """``(t, field error, eg error, tolerance)`` arrays at every recorded output time."""
    result = read_result(out_dir)
    config = result["config"]
    family = family_of(config)
    if family.name != "network" or "u" not in result:
        raise HierarchyError(f"{out_dir}: not a network solve (family {family.name})",
                             field="out_dir")
    system = family.system(config)
    atol, rtol = float(config["solve"]["atol"]), float(config["solve"]["rtol"])
    t, states = np.asarray(result["t"], float), np.asarray(result["u"], float)
    field, risk = np.zeros(len(t)), np.zeros(len(t))
    for k, u in enumerate(states):
        rhs_error, risk[k] = system.quadrature_error(u)
        field[k] = float(np.max(rhs_error, initial=0.0))
    tolerance = atol + rtol * np.max(np.abs(states), axis=1, initial=1.0)
    return t, field, risk, tolerance


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    args = parser.parse_args()
    start = time.perf_counter()
    try:
        t, field, risk, tolerance = stated_errors(args.out_dir)
    except HierarchyError as error:
        print(f"network_stated_errors: {error}", file=sys.stderr)
        return 2
    ratio = np.maximum(field, risk) / tolerance
    beyond = t[ratio > 1.0]
    print(f"{len(t)} output times to t = {t[-1]:g}: largest stated error of the field "
          f"{field.max():.3g}, of eg {risk.max():.3g}; largest stated error / tolerance "
          f"{ratio.max():.3g}; within the tolerance at {len(t) - len(beyond)} of {len(t)} "
          f"times" + (f", beyond it at t = {', '.join(f'{x:g}' for x in beyond[:10])}"
                      if len(beyond) else "") + f" ({time.perf_counter() - start:.0f} s)")
    return 0 if len(beyond) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
