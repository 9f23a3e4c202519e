"""Timings of the network family, against baselines measured in the same run.

1. the compiled field (``kernel.CompiledField``) against the straightforward numpy evaluation
   of the same closed forms (``field.TableField``) at K = M = 8 (erf, trained second layer),
   results checked equal (target >= 10x);
2. the SGD ensemble (:class:`hierarchy.models.network.sgd.NetworkEnsemble`, all runs at once)
   against a plain per-run numpy loop written here (one run, one sample at a time), in samples
   per second, both on the same network;
3. the expectation engine (issue 29): time per field call of the new field (compiled engine,
   relu/erf step moments) against the old one (the numpy Gauss-Hermite / QMC quadrature of
   the same rows) for tanh K = M = 1 and 3, relu/erf K = M = 2 and 3 and logistic K = 2, their
   difference against the old field's stated error, and the time of ``hierarchy solve`` to
   alpha = 300 (default tolerances) with its certification, each under a wall-clock limit;
   and the engine's per-level trapezoid rules and ball ``|xi| <= U`` against its uniform
   rules over the whole cube (``engine_for(..., uniform=True)``), the same rows, the largest
   difference of the two fields printed beside; for a network whose activations turn (tanh),
   a call at a steep state (``Q_kk`` about 9) with the levels split at the turns against the
   trapezoid alone (the engine before, ``activation_turns`` empty); the engines without the
   mirror ``z -> -z`` (every node of an even row summed, :func:`no_mirror`); and the engine
   on one thread against its rows spread over every available CPU
   (:mod:`hierarchy.core.row_threads`; the joint engine shares a row's outermost level among
   the threads). The contexts that
   change the engine derive its plan afresh and never store it in the derivation cache.

Usage: ``python tools/bench_network.py [--quick] [--engine-only] [--only TEXT] [--limit SECONDS]``
"""
import argparse
import contextlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hierarchy.config.documents import toml_text
from hierarchy.core import row_threads
from hierarchy.models.network import kernel, sgd
from hierarchy.models.network.field import TableField
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import network_from_config


def committee(width, trained=True):
    config = {"model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                        "student": {"width": width, "activation": "erf",
                                    "second_layer": "trained" if trained else "fixed",
                                    "second_layer_values": []},
                        "teacher": {"width": width, "activation": "erf", "noise": 0.1,
                                    "overlaps": [], "second_layer_values": []}},
              "sgd": {"step": 1.0, "step_second_layer": "step"}}
    return network_from_config(config)


def timed(function, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        out = function()
    return out, (time.perf_counter() - start) / repeat


def bench_field(width, repeat):
    net = committee(width)
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((width, 64)) * 0.4
    teacher = rng.standard_normal((width, 64))
    state = sgd.statistics(net, weights[None], teacher[None], np.full((1, width), 0.8))[0]
    table = TableField(net)
    compiled = kernel.CompiledField(table, kernel.kernel_module())
    fast, t_fast = timed(lambda: compiled.outputs(state), repeat)
    slow, t_slow = timed(lambda: table.outputs(state), max(1, repeat // 10))
    assert np.allclose(fast, slow, rtol=1e-10, atol=1e-12)
    print(f"field K = M = {width} ({len(net.labels)} statistics): compiled "
          f"{t_fast * 1e3:.3f} ms, numpy closed forms {t_slow * 1e3:.3f} ms, ratio "
          f"{t_slow / t_fast:.1f} (target >= 10)")


def per_run_loop(net, weights, teacher, v, steps, rng):
    """The baseline: one run, one sample at a time, plain numpy."""
    grads = SampleGradients(net)
    n = weights.shape[1]
    root = math.sqrt(n)
    for _ in range(steps):
        x = rng.standard_normal(n)
        y = grads.teacher_labels((teacher @ x / root)[None], rng.standard_normal(1))
        lam = (weights @ x / root)[None]
        coef = grads.dl_dlambda(lam, v, y)[0]
        v = v - net.step_second_layer / n * grads.dl_dv(lam, v, y)[0]
        weights = weights - net.step / root * np.outer(coef, x)
    return weights


def bench_sgd(dimension, runs, steps):
    net = committee(2)
    ensemble = sgd.start_ensemble(net, dimension, runs, seed=0, scale=0.5)
    _, t_ensemble = timed(lambda: ensemble.advance(steps), 1)
    rng = np.random.default_rng(0)
    few = 2
    _, t_loop = timed(lambda: [per_run_loop(net, ensemble.weights[r].copy(),
                                            ensemble.directions[r], ensemble.v[r].copy(),
                                            steps, rng) for r in range(few)], 1)
    fast, slow = runs * steps / t_ensemble, few * steps / t_loop
    print(f"SGD K = M = 2, N = {dimension}: ensemble of {runs} runs {fast:,.0f} samples/s, "
          f"per-run numpy loop {slow:,.0f} samples/s, ratio {fast / slow:.1f}")


#: (student, teacher, K = M, loss, learning rate) of the engine's cases (relu K = 3 diverges
#: at eta = 1)
ENGINE_CASES = (("tanh", "tanh", 1, "mse", 1.0), ("tanh", "tanh", 3, "mse", 1.0),
                ("relu", "erf", 2, "mse", 0.5), ("relu", "erf", 3, "mse", 0.5),
                ("erf", "erf", 2, "logistic", 1.0))


def case_name(student, teacher, width, loss):
    """The name printed for a case, and what ``--only`` matches (a substring of it)."""
    return f"{student}/{teacher} K = M = {width} {loss}"


def engine_config(student, teacher, width, loss, step=1.0):
    return {"model": {"family": "network", "data": "teacher", "loss": loss, "ridge": 0.0,
                      "student": {"width": width, "activation": student,
                                  "second_layer": "fixed", "second_layer_values": []},
                      "teacher": {"width": width, "activation": teacher, "noise": 0.0,
                                  "overlaps": [], "second_layer_values": []}},
            "init": {"source": "gaussian", "scale": 0.3, "seed": 1},
            "solve": {"t_final": 300.0, "points": 61},
            "sgd": {"step": step, "step_second_layer": "step", "dimension": 1000}}


@contextlib.contextmanager
def old_engine():
    """The field as it was: no compiled engine, no relu/erf step moments (numpy quadrature),
    no joint engine (randomised QMC where the term table does not apply)."""
    from hierarchy.models.network import engine, field
    saved = engine.engine_of_plan, field.step_expectation, field.joint_applies
    engine.engine_of_plan = lambda plan: None  # the field's numpy quadrature
    field.step_expectation = lambda net, pattern: None
    field.joint_applies = lambda net: False  # no joint engine: QMC for non-polynomial losses
    try:
        yield
    finally:
        engine.engine_of_plan, field.step_expectation, field.joint_applies = saved


@contextlib.contextmanager
def fresh_engine_plan():
    """The field's engine plan derived afresh and not stored (the derivation cache keeps the
    real one): what the contexts below change is in the plan."""
    from hierarchy.models.network import table_cache
    saved = table_cache.cached_json

    def derived(net, kind, compute, cache=None):
        if kind == "engine":
            return json.loads(json.dumps(compute()))
        return saved(net, kind, compute, cache)

    table_cache.cached_json = derived
    try:
        yield
    finally:
        table_cache.cached_json = saved


@contextlib.contextmanager
def uniform_rules():
    """The compiled engine with every level on its order's rule, over the whole cube."""
    from hierarchy.models.network import engine
    saved = engine.engine_source
    engine.engine_source = lambda expressions, uniform=False, turns=(): saved(
        expressions, True, turns)
    try:
        with fresh_engine_plan():
            yield
    finally:
        engine.engine_source = saved


@contextlib.contextmanager
def no_turns():
    """The compiled engine without the activations' turns: every smooth level on the
    trapezoid rule, however steep (the engine before the turns)."""
    from hierarchy.models.network import field
    saved = field.activation_turns
    field.activation_turns = lambda net: ()
    try:
        with fresh_engine_plan():
            yield
    finally:
        field.activation_turns = saved


@contextlib.contextmanager
def no_mirror():
    """The engines without the mirror ``z -> -z``: every node of an even row's outermost
    level summed and its innermost table built over the whole range (the engines before)."""
    from hierarchy.models.network import engine, joint
    saved = engine.function_parity, joint.output_parities
    engine.function_parity = lambda expr, points: 0
    joint.output_parities = lambda spec: (0,) * len(spec.outputs)
    try:
        with fresh_engine_plan():
            yield
    finally:
        engine.function_parity, joint.output_parities = saved


@contextlib.contextmanager
def one_thread():
    """The engine's rows on one thread (:mod:`hierarchy.core.row_threads`)."""
    saved = row_threads.THREADS
    row_threads.THREADS = 1
    try:
        yield
    finally:
        row_threads.THREADS = saved


def engine_state(net, scale=0.15):
    """A state of ``net``: random student weights of norm about ``scale`` (``Q_kk`` about
    ``scale^2``), a random teacher (``T_nn`` about 1)."""
    rng = np.random.default_rng(2)
    weights = rng.standard_normal((net.K, 64)) * scale
    teacher = rng.standard_normal((net.M, 64))
    return sgd.statistics(net, weights[None], teacher[None], np.ones((1, net.K)))[0]


#: the students' weight scale of the steep state at which the split levels are compared
#: with the trapezoid alone (``Q_kk`` about 9: weights grown in training)
STEEP_SCALE = 3.0


def steep_comparison(net, repeat):
    """A call at a steep state (:data:`STEEP_SCALE`) with the levels split at the turns and on
    the trapezoid alone: time and stated error of each, and their values' difference."""
    from hierarchy.models.network.field import activation_turns, network_system
    if not activation_turns(net):
        return
    state = engine_state(net, STEEP_SCALE)
    split = network_system(net, target=1e-12)
    with no_turns():
        plain = network_system(net, target=1e-12)
    out = {}
    for name, system in (("split", split), ("trapezoid", plain)):
        system.rhs(state)
        states = iter(state * (1 + 1e-7 * k) for k in range(1, repeat + 2))
        _, seconds = timed(lambda: system.rhs(next(states)), repeat)
        out[name] = (system.rhs(state), seconds, float(np.max(system.quadrature_error(state)[0])))
    q = np.max(state[[j for j, label in enumerate(net.labels) if label.startswith("Q")]])
    (v_split, t_split, e_split), (v_plain, t_plain, e_plain) = out["split"], out["trapezoid"]
    print(f"  the engine at a steep state (Q_kk up to {q:.1f}): split at the turns "
          f"{t_split * 1e3:.1f} ms, stated error {e_split:.1e}; the trapezoid alone "
          f"{t_plain * 1e3:.1f} ms, stated error {e_plain:.1e}; ratio trapezoid/split "
          f"{t_plain / t_split:.2f}; largest difference {np.max(np.abs(v_split - v_plain)):.1e}")


def mirror_comparison(net, new, states, t_new, repeat):
    """The engine without the mirror (:func:`no_mirror`) at the bench's state: time per call,
    ratio, and the largest difference of the two fields (rounding where the mirror applies)."""
    from hierarchy.models.network.field import network_system
    with no_mirror():
        full = network_system(net, target=1e-12)
    state = next(states)
    full.rhs(state)
    same = np.max(np.abs(full.rhs(state) - new.rhs(state)))
    _, t_full = timed(lambda: full.rhs(next(states)), repeat)
    print(f"  the engine without the mirror z -> -z (every node of an even row): "
          f"{t_full * 1e3:.1f} ms, ratio without/with {t_full / t_new:.2f}; largest "
          f"difference {same:.1e}")


def solve_time(config, limit):
    """``hierarchy solve`` of ``config`` in a fresh process: ``(wall s, CPU s, summary or
    None)`` (the CPU time of the child, less sensitive to the machine's load)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "case.toml"
        path.write_text(toml_text(config))
        start = time.perf_counter()
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            subprocess.run([sys.executable, "-m", "hierarchy", "solve", str(path), "--out",
                            str(Path(folder) / "out"), "--quiet"], capture_output=True,
                           timeout=limit)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - start, None, None
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        result = Path(folder) / "out" / "result.json"
        return wall, used, (json.loads(result.read_text())["summary"] if result.exists()
                            else None)


def checks(summary):
    """``; tightened re-solve moved ...; coarse re-solve moved ...`` of a solve's summary (the
    certification's two re-solves, where they ran)."""
    error = summary.get("quadrature_error", {})
    text = ""
    if error.get("trajectory") is not None:
        text += f"; tightened re-solve moved the states by {error['trajectory']:.2g}"
    if error.get("coarse_trajectory") is not None:
        text += f"; coarse re-solve moved the states by {error['coarse_trajectory']:.2g}"
    return text


def bench_engine(limit, repeat, only=""):
    from hierarchy.models.network.field import network_system
    from hierarchy.models.network.model import network_from_config as from_config
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for student, teacher, width, loss, step in ENGINE_CASES:
        name = case_name(student, teacher, width, loss)
        if only and only not in name:
            continue
        config = engine_config(student, teacher, width, loss, step)
        net = from_config(config)
        state = engine_state(net)
        new = network_system(net, target=1e-12)
        with old_engine():
            old = network_system(net)
        new.rhs(state)  # builds what is built once
        # a new state every call (the engine's groups keep their last evaluation)
        states = iter(state * (1 + 1e-7 * k) for k in range(1, 8 * repeat + 4))
        fast, t_new = timed(lambda: new.rhs(next(states)), repeat)
        slow, t_old = timed(lambda: old.rhs(next(states)), repeat)
        new_error = float(np.max(new.quadrature_error(state)[0]))
        old_error = float(np.max(old.quadrature_error(state)[0]))
        print(f"{name}: field call new {t_new * 1e3:.1f} ms ({new.engine}, stated error "
              f"{new_error:.1e}), old {t_old * 1e3:.1f} ms (stated error {old_error:.1e}), "
              f"ratio old/new {t_old / t_new:.2f}; largest difference "
              f"{np.max(np.abs(fast - slow)):.1e}")
        if new.engine.startswith("compiled"):
            with uniform_rules():
                plain = network_system(net, target=1e-12)
            plain.rhs(state)
            same = np.max(np.abs(plain.rhs(state) - new.rhs(state)))
            _, t_plain = timed(lambda: plain.rhs(next(states)), repeat)
            print(f"  the engine's uniform rules over the whole cube: {t_plain * 1e3:.1f} ms, "
                  f"ratio uniform/new {t_plain / t_new:.2f}; largest difference {same:.1e}")
        if new.engine.startswith("compiled"):
            steep_comparison(net, repeat)
        if new.engine.startswith(("compiled", "joint")):
            mirror_comparison(net, new, states, t_new, repeat)
        if new.engine.startswith(("compiled", "joint")):
            threads = row_threads.thread_count()
            with one_thread():
                new.rhs(next(states))  # the joint engine decides its threads at the last call
                _, t_one = timed(lambda: new.rhs(next(states)), repeat)
            print(f"  the same engine on one thread: {t_one * 1e3:.1f} ms, ratio one/{threads} "
                  f"threads {t_one / t_new:.2f}")
        if t_new * 200 > limit:
            print(f"  solve to alpha = 300: not attempted (one field call {t_new:.1f} s, a "
                  f"solve takes hundreds; limit {limit:g} s)")
            continue
        wall, used, summary = solve_time(config, limit)
        if summary is None:
            print(f"  solve to alpha = 300: not finished within {limit:g} s")
        else:
            print(f"  solve to alpha = 300 (eta = {step:g}): {wall:.1f} s wall, {used:.1f} s "
                  f"CPU (the whole command, fresh process), t reached "
                  f"{summary['t_reached']:g}, status {summary.get('status')}, certified "
                  f"{summary.get('certified')}, nfev {summary.get('nfev')}{checks(summary)}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    parser.add_argument("--engine-only", action="store_true", help="only part 3")
    parser.add_argument("--only", default="", help="part 3: only the cases whose name holds "
                        "this text (e.g. logistic, tanh, 'K = M = 1')")
    parser.add_argument("--limit", type=float, default=300.0,
                        help="wall-clock limit of each solve (s)")
    args = parser.parse_args()
    if not args.engine_only:
        bench_field(8, 20 if args.quick else 100)
        bench_sgd(1000, 20, 200 if args.quick else 1000)
    bench_engine(args.limit, 1 if args.quick else 3, args.only)


if __name__ == "__main__":
    main()
