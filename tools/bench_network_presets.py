"""The gmm-* presets of the network family against the hand-built fields: time per field call
and whole solves, measured in the same run (the hand-built field is the baseline).

This is what decided that the hand-built mixture families are kept next to their network
presets (README, docs/network.md): the generic field is the same function (tests/
test_network_presets.py) but slower per call, and at snr = inf it has no Filippov handling,
so its adaptive solve chatters where units slide on m = 0.

Usage::

    python tools/bench_network_presets.py [--budget SECONDS] [--binary] [--xor-final T]
"""
import argparse
import math
import time

import numpy as np

from hierarchy.config.documents import deep_merge
from hierarchy.config.loader import defaults_for, validate_config
from hierarchy.core import registry
from hierarchy.models.gmm import ballistic
from hierarchy.models.gmm.field import field_function
from hierarchy.models.gmm.layout import pack
from hierarchy.models.gmm.model import from_config
from hierarchy.models.multiclass import field as mfield
from hierarchy.models.multiclass.layout import pack as mpack
from hierarchy.models.multiclass.model import Multiclass
from hierarchy.models.network import presets
from hierarchy.models.network.engine import TARGET_FACTOR
from hierarchy.models.network.field import network_system
from hierarchy.ode.integrate import integrate

NET = registry.family("network")


#: the generic solves' atol (the field's quadrature target is TARGET_FACTOR times it)
ATOL = 1e-7


def generic(name, hand):
    cfg = validate_config(deep_merge(defaults_for(NET), presets.preset_config(name, hand)))
    system = network_system(NET.network(cfg))
    system.set_quadrature_target(TARGET_FACTOR * ATOL)
    return system, presets.statistics_map(name, hand)


def per_call(fun, u, repeat):
    """Seconds per call, a new state each call (the joint field keeps its last evaluation)."""
    fun(u)
    start = time.perf_counter()
    for k in range(1, repeat + 1):
        fun(u * (1 + 1e-9 * k))
    return (time.perf_counter() - start) / repeat


BUDGET = 150.0  # seconds of wall time for one generic solve


class OutOfTime(Exception):
    pass


def solve_generic(system, u0, times, rtol, atol):
    """RK45 on the generic field, its quadrature target ``TARGET_FACTOR atol`` as the family
    sets it; stops after BUDGET seconds (then returns the time reached)."""
    system.set_quadrature_target(TARGET_FACTOR * atol)
    start = time.perf_counter()
    reached = [times[0]]
    calls = [0]

    def rhs(t, u):
        calls[0] += 1
        reached[0] = max(reached[0], t)
        if time.perf_counter() - start > BUDGET:
            raise OutOfTime
        return system.rhs(u)

    try:
        traj = integrate(rhs, u0, (times[0], times[-1]), t_eval=times, method="RK45",
                         rtol=rtol, atol=atol, blowup=None, labels=system.labels,
                         subject="generic", entries="statistics")
    except OutOfTime:
        traj = None
    elapsed = time.perf_counter() - start
    print(f"    generic ({system.engine}): {calls[0]} field calls, reached t = "
          f"{reached[0]:.4g}", flush=True)
    if traj is not None:
        print(f"    {certification(system, traj, rtol, atol)}", flush=True)
    return traj, elapsed


def certification(system, traj, rtol, atol):
    """The family's check (``network.family.certify`` without the tightened re-solve): the
    stated quadrature error of the field and of eg at every output time against
    ``atol + rtol max|u|``."""
    worst, bad = 0.0, False
    for u in traj.y:
        rhs_error, eg_error = system.quadrature_error(u)
        error = max(float(np.max(rhs_error)), eg_error)
        worst = max(worst, error)
        bad |= error > atol + rtol * max(1.0, float(np.max(np.abs(u))))
    return (f"largest stated quadrature error {worst:.2g}: "
            f"{'NOT certified' if bad else 'certified'} at every output time")


def two_layer(kind, width, snr, u, t_final):
    name = f"gmm-{kind}"
    hand = {"model": {"family": name, "snr": snr, "ridge": 0.1, "width": width},
            "init": {"source": "statistics", "statistics": {}}, "sgd": {"step": 1.0}}
    model = from_config(hand)
    system, smap = generic(name, hand)
    rhs, engine = field_function(model)
    un = smap.to_network(u[:, None])[:, 0]
    t_hand = per_call(lambda x: rhs(x[:, None]), u, 20)
    t_gen = per_call(system.rhs, un, 5)
    times = np.linspace(0.0, t_final, 11)
    start = time.perf_counter()
    ref = ballistic.solve(model, u, times)
    s_hand = time.perf_counter() - start
    print(f"{name} K={width} snr={snr}: field {t_hand * 1e3:.2f} ms ({engine}) vs generic "
          f"{t_gen * 1e3:.1f} ms (x{t_gen / t_hand:.0f}); hand solve to t={t_final} "
          f"{s_hand:.2f} s ({ref.info.get('method', 'RK45')})", flush=True)
    traj, s_gen = solve_generic(system, un, times, 1e-4, ATOL)
    if traj is None:
        print(f"    generic solve: not done in {BUDGET:g} s", flush=True)
        return
    mapped = smap.to_network(ref.y.T).T
    n = min(len(traj.y), len(mapped))
    diff = np.abs(traj.y[:n] - mapped[:n]).max()
    print(f"    generic solve {s_gen:.1f} s (RK45 rtol 1e-4, {traj.status.name}); max |diff| "
          f"{diff:.2e}", flush=True)


def multiclass(snr, t_final, k=10):
    hand = {"model": {"family": "gmm-multiclass", "classes": k, "snr": snr, "ridge": 0.01,
                      "weights": "uniform", "means": "orthonormal"},
            "init": {"source": "statistics", "statistics": {}}, "sgd": {"step": 1.0}}
    model = Multiclass(classes=k, snr=snr, ridge=0.01)
    system, smap = generic("gmm-multiclass", hand)
    u = mpack(np.zeros((1, k, k)), np.eye(k)[None])[:, 0]
    un = smap.to_network(u[:, None])[:, 0]
    t_hand = per_call(lambda x: mfield.field(model, x), u, 5)
    t_gen = per_call(system.rhs, un, 3)
    times = np.linspace(0.0, t_final, 11)
    start = time.perf_counter()
    ref = mfield.integrate_field(model, u, times, rtol=1e-5)
    s_hand = time.perf_counter() - start
    print(f"gmm-multiclass k={k} snr={snr}: field {t_hand * 1e3:.2f} ms vs generic "
          f"{t_gen * 1e3:.1f} ms (x{t_gen / t_hand:.0f}); hand solve to t={t_final} "
          f"{s_hand:.2f} s", flush=True)
    traj, s_gen = solve_generic(system, un, times, 1e-5, ATOL)
    if traj is None:
        print(f"    generic solve: not done in {BUDGET:g} s", flush=True)
        return
    diff = np.abs(traj.y - smap.to_network(ref.y.T).T).max()
    print(f"    generic solve {s_gen:.1f} s; max |diff| {diff:.2e}", flush=True)


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--budget", type=float, default=BUDGET,
                    help="wall seconds allowed to one generic solve (default %(default)s)")
parser.add_argument("--binary", action="store_true", help="also the binary mixture")
parser.add_argument("--xor-final", type=float, default=20.0,
                    help="t_final of the XOR solve at snr = inf (default %(default)s)")
args = parser.parse_args()
BUDGET = args.budget
rng = np.random.default_rng(0)
# a start off the kinks (|m| = O(1)); XOR with v > 0 units slides on m_nu = 0 later
xor_u = pack(np.array([[1.0, -0.8, 0.6, -0.5]]), 0.3 * rng.standard_normal((1, 2, 4)),
             0.2 * np.eye(4)[None])[:, 0]
bin_u = pack(np.array([[0.7, -0.4]]), np.array([[[0.3, 0.2]]]), 0.1 * np.eye(2)[None])[:, 0]
if args.binary:
    two_layer("binary", 2, math.inf, bin_u, 20.0)
two_layer("xor", 4, math.inf, xor_u, args.xor_final)
two_layer("xor", 4, 10.0, xor_u, 5.0)
multiclass(math.inf, 10.0)
multiclass(10.0, 2.0, k=4)
