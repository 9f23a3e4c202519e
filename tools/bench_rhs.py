"""Benchmark the generated right-hand-side kernels against three baselines, in one run.

For each case it reports rhs evaluations per second of the generated kernel (every form
that compiles in reasonable time) and the ratios against

(a) ``scipy.sparse`` CSR + numpy: ``Σ_c κ_c (A_c @ μ)`` (what ``Field.rhs`` does);
(b) sympy ``lambdify`` of the same field (small systems only);
(c) a minimal hand-written C loop (Cython, typed memoryviews) over the same CSR data,
    fused over the coefficients -- the practical limit of a CSR kernel;

plus the times to build the field, render the kernel and compile it (into a fresh
temporary cache, so the compile is real), and an end-to-end ``Solver.solve``.

Usage::

    python tools/bench_rhs.py            # all cases of the issue
    python tools/bench_rhs.py --quick    # two small cases
    python tools/bench_rhs.py --only untied --only "tied K=2 t=[1] M=16"   # some cases
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sympy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hierarchy.jit import cache, sparse_kernels
from hierarchy.models.attention.compiled import Solver, build, solver_metadata
from hierarchy.models.attention.moments import moments_of
from hierarchy.models.attention.operators import build_field

CASES = [("tied", 2, (1,), m) for m in (8, 12, 16)] + [("untied", 2, (1,), m) for m in (4, 5, 6, 7)]
QUICK_CASES = [("tied", 2, (1,), 8), ("untied", 2, (1,), 4)]
SYMPY_MAX_ENTRIES = 3000
UNROLL_MAX_ENTRIES = 12000

CSR_LOOP = """
# cython: language_level=3, boundscheck=False, wraparound=False
def rhs(const int[:, ::1] indptr, const int[::1] indices, const double[::1] data,
        const double[::1] mu, const double[::1] kappa, double[::1] out):
    cdef Py_ssize_t i, c, j, n = out.shape[0], n_coef = kappa.shape[0]
    cdef double acc, s
    with nogil:
        for i in range(n):
            acc = 0.0
            for c in range(n_coef):
                s = 0.0
                for j in range(indptr[c, i], indptr[c, i + 1]):
                    s += data[j] * mu[indices[j]]
                acc += kappa[c] * s
            out[i] = acc
"""


def rate(func, min_time=0.2):
    """Calls/second over one window of at least ``min_time`` seconds."""
    calls, start = 0, time.perf_counter()
    while True:
        func()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return calls / elapsed


def rates(funcs, rounds=5):
    """Best calls/second of each function, measured round-robin.

    Interleaving the windows makes the ratios robust to the load of a shared machine
    (every candidate sees the same spread of background load).
    """
    best = dict.fromkeys(funcs, 0.0)
    for _ in range(rounds):
        for name, func in funcs.items():
            best[name] = max(best[name], rate(func))
    return best


def scipy_rhs(field):
    ops = [field.operators[c] for c in field.coefficient_names]

    def rhs(mu, kappa):
        out = kappa[0] * (ops[0] @ mu)
        for c in range(1, len(ops)):
            out += kappa[c] * (ops[c] @ mu)
        return out
    return rhs


def sympy_rhs(field):
    n, names = len(field.labels), field.coefficient_names
    mus = sympy.symbols(f"mu0:{n}")
    ks = sympy.symbols(f"k0:{len(names)}")
    exprs = [sympy.Integer(0)] * n
    for c, name in enumerate(names):
        coo = field.operators[name].tocoo()
        for i, j, v in zip(coo.row, coo.col, coo.data):
            exprs[i] += ks[c] * sympy.nsimplify(v) * mus[j]
    func = sympy.lambdify([mus, ks], exprs, "numpy")
    return lambda mu, kappa: np.array(func(mu, kappa), dtype=float)


def csr_loop(field):
    module = cache.compile_pyx(CSR_LOOP, "bench_csr_loop")
    ops = [field.operators[c].tocsr() for c in field.coefficient_names]
    offsets = np.cumsum([0] + [op.nnz for op in ops])
    indptr = np.stack([op.indptr + off for op, off in zip(ops, offsets)]).astype(np.int32)
    indices = np.concatenate([op.indices for op in ops]).astype(np.int32)
    data = np.concatenate([op.data for op in ops]).astype(np.float64)

    def rhs(mu, kappa, out):
        module.rhs(indptr, indices, data, mu, kappa, out)
    return rhs


def compile_kernel(field, form):
    """Render and compile one form; return (solver, render seconds, compile seconds)."""
    start = time.perf_counter()
    generated = sparse_kernels.generate(field, form)
    render = time.perf_counter() - start
    start = time.perf_counter()
    module = cache.compile_pyx(generated.source, generated.name_hint)
    compile_s = time.perf_counter() - start
    solver = Solver(module, solver_metadata(field, generated.form), generated.tables, field=field)
    return solver, render, compile_s


def initial_state(field, d=120, seed=0):
    rng = np.random.default_rng(seed)
    if field.parameterization == "tied":
        mats = [rng.normal(0, 1 / np.sqrt(d), (d, d)) for _ in range(field.K)]
    else:
        mats = [(rng.normal(0, 1 / np.sqrt(d), (d, d)), rng.normal(0, 1 / np.sqrt(d), (d, d)))
                for _ in range(field.K)]
    return moments_of(field, mats)


def solve_coefficients(field):
    """Constant coefficients of a well-behaved run (the exactly solvable Γ for tied)."""
    values = {"Gamma[1,1]": 2.0, "Gamma[1,2]": -2.0, "a1[1,1]": 0.5, "a2[1,1]": 0.5,
              "a1[1,2]": -0.5, "a2[1,2]": -0.5, "beta[1]": 0.0, "gamma": 0.0}
    return {c: values.get(c, 0.0) for c in field.coefficient_names}


def case_name(case):
    return f"{case[0]} K={case[1]} t={list(case[2])} M={case[3]}"


def bench_case(case, rng):
    row = {"case": case_name(case)}
    start = time.perf_counter()
    field = build_field(*case)
    row["field_s"] = time.perf_counter() - start
    n, entries = len(field.labels), sum(op.nnz for op in field.operators.values())
    row.update(words=n, entries=entries)
    mu = rng.standard_normal(n)
    kappa = rng.standard_normal(len(field.coefficient_names))
    out = np.empty(n)
    forms = ["table"] + (["unrolled"] if entries <= UNROLL_MAX_ENTRIES else [])
    solvers, funcs = {}, {}
    for form in forms:
        solver, render, compile_s = compile_kernel(field, form)
        solvers[form] = solver
        row[f"{form}_render_s"], row[f"{form}_compile_s"] = render, compile_s
        funcs[form] = (lambda module: lambda: module.rhs(mu, kappa, out))(solver.module)
    ref = scipy_rhs(field)
    funcs["scipy"] = lambda: ref(mu, kappa)
    loop = csr_loop(field)
    funcs["c_loop"] = lambda: loop(mu, kappa, out)
    row.update(rates(funcs))
    if entries <= SYMPY_MAX_ENTRIES:
        lam = sympy_rhs(field)
        row["sympy"] = max(rate(lambda: lam(mu, kappa)) for _ in range(2))
    best_form = sparse_kernels.choose_form(field, "auto")
    solver = solvers.get(best_form, solvers["table"])
    mu0 = initial_state(field)
    start = time.perf_counter()
    result = solver.solve(mu0, (0.0, 0.1), solve_coefficients(field), method="RK45",
                          rtol=1e-8, atol=1e-10)
    row["solve_s"] = time.perf_counter() - start
    row["solve_nfev"], row["solve_status"] = result.nfev, result.status
    row["auto"] = best_form
    row["build_s"], row["cached_s"] = build_times(case)
    return row


def build_times(case):
    """Seconds of a first ``build`` (field, render, compile with its metadata) and of a
    repeated one (the index: no field, no render, no compile)."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        build(*case)
        times.append(time.perf_counter() - start)
    return times


def report(rows):
    header = (f"{'case':<26}{'words':>7}{'entries':>9}  {'kernel/s':>10} {'form':<8}"
              f"{'/scipy':>8}{'/sympy':>8}{'/C-loop':>8}  {'unrolled/s':>11}{'table/s':>10}"
              f"  {'field':>6}{'render':>7}{'cc-tab':>7}{'cc-unr':>7}{'solve':>7}{'nfev':>6}"
              f"{'build':>7}{'again':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        form = r["auto"]
        best = r[form]
        sympy_ratio = f"{best / r['sympy']:8.0f}" if "sympy" in r else f"{'-':>8}"
        unrolled = f"{r['unrolled']:11.0f}" if "unrolled" in r else f"{'-':>11}"
        cc_unr = f"{r['unrolled_compile_s']:7.1f}" if "unrolled" in r else f"{'-':>7}"
        print(f"{r['case']:<26}{r['words']:>7}{r['entries']:>9}  {best:10.0f} {form:<8}"
              f"{best / r['scipy']:8.1f}{sympy_ratio}{best / r['c_loop']:8.2f}  {unrolled}"
              f"{r['table']:10.0f}  {r['field_s']:6.2f}{r[form + '_render_s']:7.2f}"
              f"{r['table_compile_s']:7.1f}{cc_unr}{r['solve_s']:7.2f}{r['solve_nfev']:6d}"
              f"{r['build_s']:7.2f}{r['cached_s']:7.3f}")
    print("\nkernel/s: rhs evaluations per second of the form 'auto' picks; ratios are that "
          "rate over (a) scipy CSR+numpy, (b) sympy lambdify, (c) the hand-written C CSR "
          "loop (>1 = generated kernel faster). Times in seconds: field build, kernel render, "
          "compile of the table / unrolled form (fresh cache), RK45 solve over t in [0, 0.1] "
          "with constant coefficients from Gaussian initial moments (d=120), and its rhs "
          "evaluations; a first hierarchy.build (field + render + compile) and a repeated "
          "one (found through the build index, nothing rebuilt).")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small cases only")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the cases whose name contains TEXT (repeatable)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-rhs-") as tmp:
        # Build into and search only a fresh cache, so every compile and first build is real.
        cache.set_default_cache(cache.Cache(tmp))
        rows = []
        for case in QUICK_CASES if args.quick else CASES:
            if args.only and not any(text in case_name(case) for text in args.only):
                continue
            rows.append(bench_case(case, rng))
            print(f"done {rows[-1]['case']}", file=sys.stderr, flush=True)
        report(rows)


if __name__ == "__main__":
    main()
