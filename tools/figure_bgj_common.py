"""Shared helpers of the effective-dynamics figure scripts (tools/figure_bgj_*.py).

The four scripts draw the summary-statistics families (docs/summary_models.md
§2, §3): spiked matrix and tensor PCA phase portraits in ``(m, r2)``, and the binary and
XOR Gaussian-mixture classifiers. Each takes ``--quick`` (minutes at most on 2 cores),
``--tiny`` (seconds, for the tests) and ``--out DIR``; without either flag it runs the
contract's settings. The generic plumbing (CSV, PNG, ``result.json``) is imported from
:mod:`figure_common`; this module adds what only these four scripts share: the command line
and clock, the PCA phase portraits, and for the mixtures the optimality criterion, SGD runs
paired with the finite-``lambda`` ODE from each run's own start (:func:`paired_runs`), the
basin agreement of the pairs, and the fraction-optimal panels against time and ``lambda``.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import time

import numpy as np
from figure_common import (  # also puts the repo on sys.path
    save_png,
    write_csv,
    write_summary,
)

from hierarchy.core.errors import HierarchyError
from hierarchy.core.plotting import legend
from hierarchy.models.gmm import (
    class_counts,
    ensemble,
    gaussian_start,
    optimal_probability,
    run_sgd,
)
from hierarchy.models.gmm.ballistic import DT
from hierarchy.models.gmm.layout import unpack
from hierarchy.models.gmm.starts import init_scale
from hierarchy.models.summary import fixed_points, noise_sgd, solve
from hierarchy.models.summary.ballistic import field

__all__ = ["Clock", "agreement", "basins", "binomial_se", "centre_margins",
           "draw_fixed_points", "draw_fraction", "draw_sweep", "draw_vector_field",
           "fraction_curve", "lambda_sweep", "legend", "merge_rows", "mixture_runs",
           "paired_runs", "parse_args", "pca_panel", "reached_optimal", "save_png", "settings",
           "sweep_summary", "write_csv", "write_summary"]


# ----------------------------------------------------------------------------- command line

def parse_args(description, default_out, argv=None):
    """``--quick``, ``--tiny``, ``--out DIR`` and ``--seed``; the output folder is created.

    ``argv`` is the command line without the program name (default: ``sys.argv[1:]``), so
    that a test can run a script's ``main`` in its own process.
    """
    parser = argparse.ArgumentParser(description=description)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="smaller sizes, fewer runs (under 2 minutes on 2 cores)")
    size.add_argument("--tiny", action="store_true",
                      help="the smallest sizes, seconds (used by the tests; not a result)")
    parser.add_argument("--out", default=default_out, help="output folder (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args(argv)
    if args.seed < 0:
        error = HierarchyError(f"--seed must be an integer >= 0; got {args.seed}", field="seed")
        parser.exit(2, f"error: {error}\n")
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    return args


def settings(args, full, quick, tiny, full_seconds):
    """The settings of this run: ``full`` updated by ``quick`` or ``tiny``, plus ``mode``.

    In full mode it first prints how long that mode took when measured (``full_seconds``
    on 2 cores), so a run says up front what it costs.
    """
    chosen = dict(full)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    if mode == "full":
        print(f"full mode: up to about {full_seconds:.0f} s on 2 cores (measured; --quick "
              "is faster)", flush=True)
    chosen.update({"full": {}, "quick": quick, "tiny": tiny}[mode])
    chosen["mode"] = mode
    chosen["seed"] = args.seed
    return chosen


class Clock:
    """Wall-clock (and process CPU) time since construction, printed by :meth:`report`."""

    def __init__(self):
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()

    def elapsed(self):
        """Wall-clock seconds since construction."""
        return time.perf_counter() - self.start

    def cpu(self):
        """CPU seconds of this process since construction (all its threads)."""
        return time.process_time() - self.cpu_start

    def report(self, name, mode):
        """Print and return the elapsed wall seconds of script ``name`` in ``mode``.

        The CPU seconds are printed too: on a shared machine they say what the run costs.
        """
        seconds = self.elapsed()
        print(f"{name} ({mode} mode) took {seconds:.1f} s (after imports; {self.cpu():.1f} s "
              "CPU)", flush=True)
        return seconds


# ----------------------------------------------------------------------------- spiked PCA

def draw_vector_field(ax, model, m_range, r2_range, density=0.9):
    """Streamlines of the ballistic field ``-f + g`` of ``model`` over a box of ``(m, r2)``."""
    rhs, _ = field(model)
    m, r2 = np.meshgrid(np.linspace(*m_range, 41), np.linspace(*r2_range, 41))
    dm, dr = rhs(np.stack([m, r2]))
    speed = np.hypot(dm, dr)
    ax.streamplot(m, r2, dm, dr, density=density, color=np.log10(speed + 1e-12),
                  cmap="Greys", linewidth=0.6, arrowsize=0.7)


def draw_fixed_points(ax, points):
    """Stable fixed points filled, unstable ones open (``hierarchy fixed-points`` records)."""
    for kind, face in ((True, "k"), (False, "white")):
        chosen = [p["u"] for p in points if p["stable"] is kind]
        if chosen:
            ax.plot([u["m"] for u in chosen], [u["r2"] for u in chosen], "o", mfc=face,
                    mec="k", ms=7, zorder=5,
                    label="stable fixed point" if kind else "unstable fixed point")


def pca_panel(ax, model, cfg, starts, sgd_start, title, extra=()):
    """One phase portrait: field, ODE and SGD trajectories, fixed points; CSV rows and summary.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    model : hierarchy.models.summary.SpikedPCA
        The model (its ``order`` and ``snr``).
    cfg : dict
        ``dimension``, ``runs``, ``t_final``, ``points``, ``m_range``, ``r2_range``, ``seed``.
    starts : list of dict
        ``{"m": .., "r2": ..}`` starts of the ODE (and of SGD when ``sgd_start = "warm"``).
    sgd_start : str
        ``"gaussian"`` (SGD from ``x0 ~ N(0, I/n)``, CSV start 0) or ``"warm"`` (SGD from
        each of ``starts``, ``cfg["runs"]`` runs each, CSV start = its index).
    title : str
        The panel title.
    extra : sequence of dict
        Further starts of the ODE only (drawn thinner, numbered after ``starts``).

    Returns
    -------
    (dict, dict)
        CSV columns (long format: ``source, start, run, t, m, r2``) and a JSON-able summary.
    """
    points = fixed_points(model)
    draw_vector_field(ax, model, cfg["m_range"], cfg["r2_range"])
    rows = {"source": [], "start": [], "run": [], "t": [], "m": [], "r2": []}
    summary = {"fixed_points": [_jsonable(p) for p in points], "sgd": []}
    sgd_starts = [None] if sgd_start == "gaussian" else list(starts)
    for j, start in enumerate(sgd_starts):
        _sgd_curves(ax, model, cfg, (j, start), len(sgd_starts), rows, summary)
    fine = np.linspace(0.0, cfg["t_final"], 1201)
    for j, start in enumerate(list(starts) + list(extra)):
        ode = solve(model, start, fine)
        ax.plot(ode.y[:, 0], ode.y[:, 1], color="tab:blue", lw=1.6 if j < len(starts) else 0.9,
                label="ballistic ODE" if j == 0 else None)
        _append(rows, "ode", j, 0, ode.t, ode.y)
    draw_fixed_points(ax, points)
    ax.set_xlim(*cfg["m_range"])
    ax.set_ylim(*cfg["r2_range"])
    ax.set_xlabel("m = ⟨x, v⟩")
    ax.set_ylabel("r² = |x − m v|²")
    ax.set_title(title, fontsize=9)
    return rows, summary


def _sgd_curves(ax, model, cfg, indexed_start, count, rows, summary):
    """SGD runs from one start (``(index, start)``; start None: Gaussian), drawn and recorded."""
    j, start = indexed_start
    times = np.linspace(0.0, cfg["t_final"], cfg["points"])
    traj = noise_sgd(model, cfg["dimension"], cfg["runs"], times,
                     seed=cfg["seed"] + 1000 * j, start=start)
    u = traj.columns["u_runs"]                                       # (T, runs, 2)
    shade = float(np.clip(8.0 / (cfg["runs"] * count), 0.15, 0.6))
    for r in range(u.shape[1]):
        ax.plot(u[:, r, 0], u[:, r, 1], color="tab:red", lw=0.6, alpha=shade,
                label="SGD runs (noise sampler)" if j == r == 0 else None)
        _append(rows, "sgd", j, r, traj.t, u[:, r])
    summary["sgd"].append({"start": start or "gaussian", "final_m": u[-1, :, 0].tolist(),
                           "final_r2": u[-1, :, 1].tolist(),
                           "mean_m": u[:, :, 0].mean(axis=1).tolist()})
    summary.setdefault("t", traj.t.tolist())
    summary.setdefault("sgd_mean_abs_m", np.mean(np.abs(u[:, :, 0]), axis=1).tolist())


def _jsonable(point):
    """A fixed-point record with complex eigenvalues written as ``[re, im]``."""
    values = [[e.real, e.imag] if isinstance(e, complex) else e for e in point["eigenvalues"]]
    return {**point, "eigenvalues": values}


def _append(rows, source, start, run, t, u):
    n = len(t)
    rows["source"] += [source] * n
    rows["start"] += [start] * n
    rows["run"] += [run] * n
    rows["t"] += list(map(float, t))
    rows["m"] += list(map(float, u[:, 0]))
    rows["r2"] += list(map(float, u[:, 1]))


def merge_rows(parts, **tags):
    """Concatenate CSV column dicts, adding constant columns ``tags[name][i]`` per part.

    The columns come back as arrays (what :func:`figure_common.write_csv` indexes fast).
    """
    out = {name: [] for name in tags}
    for i, part in enumerate(parts):
        length = len(part["t"])
        for name, values in tags.items():
            out[name] += [values[i]] * length
        for name, column in part.items():
            out.setdefault(name, []).extend(column)
    return {name: np.asarray(column) for name, column in out.items()}


# ----------------------------------------------------------------------------- mixtures

def centre_margins(model, u):
    """``(B, C)`` signed margins ``(2y − 1) v·g(W θ)`` at the noise-free cluster centres ``θ``.

    ``u`` is a state array ``(d, B)``; ``W θ`` is read from the statistics ``m`` (the
    ``R_perp`` part does not enter at a centre). A margin is positive where the network
    labels that centre correctly.
    """
    v, m, _, _ = unpack(u, model.width, model.signals)               # m (B, S, K)
    margins = []
    for _, signs, label in model.clusters:
        pre = np.einsum("s,bsk->bk", np.asarray(signs, float), m)
        logit = np.sum(v * np.maximum(pre, 0.0), axis=1)
        margins.append((2.0 * label - 1.0) * logit)
    return np.stack(margins, axis=1)


def reached_optimal(model, u, margin):
    """``(B,)`` bool: every cluster centre is classified correctly with margin ``>= margin``."""
    return np.all(centre_margins(model, u) >= margin, axis=1)


def fraction_curve(model, states, margin):
    """Fraction of runs :func:`reached_optimal` at each time; ``states (T, d, B)``."""
    return np.array([np.mean(reached_optimal(model, u, margin)) for u in states])


def basins(model, u, margin):
    """``(B,)`` integer basin of states ``u (d, B)``.

    Binary: 1 where :func:`reached_optimal` with ``margin``, else 0. XOR: the number of
    classes discerned (:func:`hierarchy.models.gmm.class_counts`).
    """
    if model.kind == "binary":
        return reached_optimal(model, u, margin).astype(int)
    return class_counts(model, u)


def agreement(model, sgd_final, ode_final, margin):
    """Fraction of runs whose SGD and paired ODE endpoints (``(d, B)`` each) share a basin."""
    return float(np.mean(basins(model, sgd_final, margin) == basins(model, ode_final, margin)))


def binomial_se(fraction, count):
    """Standard error ``sqrt(p (1 - p) / n)`` of a fraction ``p`` of ``n`` runs."""
    return math.sqrt(fraction * (1.0 - fraction) / count)


def paired_runs(model, cfg, runs, seed):
    """SGD runs and the finite-``lambda`` ODE integrated from each run's own start.

    Returns
    -------
    dict
        ``t`` (T,), ``sgd`` (T, d, runs) the SGD statistics and ``paired`` (T, d, runs) the
        ballistic ODE of ``model`` (its own ``lambda``; Filippov rule at ``lambda = inf``)
        from ``sgd[0]``, by :func:`hierarchy.models.gmm.ensemble` with steps of at most
        ``cfg["dt"]`` (at ``lambda = inf`` the ensemble's default step, 0.05) that also end
        at every recording time, so a time grid finer than ``dt`` costs more steps.
    """
    times = np.linspace(0.0, cfg["t_final"], cfg["points"])
    traj = run_sgd(model, cfg["dimension"], runs, times, seed=seed)
    sgd = np.transpose(traj.columns["u_runs"], (1, 2, 0))          # (T, d, runs)
    dt = cfg["dt"] if math.isfinite(model.snr) else DT            # Filippov steps stay fine
    paired = ensemble(model, sgd[0], traj.t, dt=dt)
    return {"t": traj.t, "sgd": sgd, "paired": paired}


def mixture_runs(model, cfg):
    """:func:`paired_runs` at ``cfg["runs"]``, plus the ``lambda = inf`` ODE from limit starts.

    The added ``ode`` (T, d, runs) is the ballistic ODE at ``lambda = inf`` from independent
    limit Gaussian starts (``v`` Gaussian, each ``m`` a fair sign times SGD's typical
    initial overlap ``(c N)^{-1/2}``, so that both leave the origin on the same time scale);
    ``limit`` is the ``inf`` model.
    """
    runs = paired_runs(model, cfg, cfg["runs"], cfg["seed"])
    limit = model.replace(snr=math.inf)
    eps = 1.0 / math.sqrt(init_scale(model) * cfg["dimension"])   # SGD's typical |m(0)|
    starts = gaussian_start(limit, cfg["runs"], seed=cfg["seed"] + 1, eps=eps)
    return {**runs, "ode": ensemble(limit, starts, runs["t"]), "limit": limit}


def draw_fraction(ax, model, runs, margin, predicted, what):
    """Fraction of runs :func:`reached_optimal` against time: SGD, both ODEs, ``predicted``.

    The grey band is the sampling spread of a fraction of that many runs around
    ``predicted`` (two binomial standard errors), not a theory error bar.

    Returns the CSV columns ``t, sgd_fraction, ode_paired_fraction, ode_inf_fraction,
    predicted``.
    """
    sgd = fraction_curve(model, runs["sgd"], margin)
    paired = fraction_curve(model, runs["paired"], margin)
    ode = fraction_curve(runs["limit"], runs["ode"], margin)
    ax.plot(runs["t"], sgd, color="tab:red", lw=1.6, label=f"SGD (λ = {model.snr:g})")
    ax.plot(runs["t"], paired, color="tab:blue", lw=1.3,
            label=f"ODE λ = {model.snr:g}, from each run's start")
    ax.plot(runs["t"], ode, color="0.35", lw=1.1, ls="--",
            label="ODE λ = ∞, from limit Gaussian starts")
    ax.axhline(predicted, color="k", ls=":", lw=1.2, label=f"basin law {what} = {predicted:.4g}")
    count = runs["sgd"].shape[2]
    spread = 2.0 * binomial_se(predicted, count)
    ax.axhspan(predicted - spread, predicted + spread, color="0.5", alpha=0.15,
               label=f"± 2 binomial s.e. ({count} runs)")
    ax.set_xlabel(r"$t = {\rm steps} \cdot c_\delta / N$")
    ax.set_ylabel(f"fraction of runs optimal (margin ≥ {margin:.3g})")
    top = max(3 * predicted, float(np.max(sgd)), float(np.max(paired)), float(np.max(ode)))
    ax.set_ylim(-0.02, min(1.02, top + 0.05))
    legend(ax, loc="upper left")
    return {"t": runs["t"], "sgd_fraction": sgd, "ode_paired_fraction": paired,
            "ode_inf_fraction": ode, "predicted": np.full(len(sgd), predicted)}


def lambda_sweep(model, cfg, margin, main, clock=None):
    """Final fraction optimal of SGD and of the paired ODE at each ``lambda`` of ``cfg["sweep"]``.

    ``cfg["sweep"]`` holds ``lambda`` values as text (``"inf"`` allowed); the one equal to
    ``model.snr`` reuses the runs ``main`` (:func:`mixture_runs`), the others run
    ``cfg["sweep_runs"]`` new SGD runs (seed ``cfg["seed"] + 10 + j``) and their paired ODE.

    Returns
    -------
    dict
        CSV columns ``snr, runs, sgd_fraction, sgd_se, ode_fraction, agreement, law``
        (``sgd_se`` the binomial standard error; ``agreement`` as :func:`agreement`).
    """
    rows = []
    for j, text in enumerate(cfg["sweep"]):
        at = model.replace(snr=float(text))
        runs = main if at.snr == model.snr else \
            paired_runs(at, cfg, cfg["sweep_runs"], cfg["seed"] + 10 + j)
        rows.append(_sweep_row(at, runs, margin))
        if clock is not None:
            row = rows[-1]
            print(f"  λ = {text}: SGD {row['sgd_fraction']:.3f} ± {row['sgd_se']:.3f}, ODE "
                  f"{row['ode_fraction']:.3f}, agreement {row['agreement']:.3f} "
                  f"({clock.elapsed():.1f} s)", flush=True)
    table = {name: np.array([row[name] for row in rows]) for name in rows[0]}
    table["law"] = np.full(len(rows), optimal_probability(model))
    return table


def _sweep_row(model, runs, margin):
    """One row of :func:`lambda_sweep` from the final states of ``runs``."""
    sgd_final, ode_final = runs["sgd"][-1], runs["paired"][-1]
    count = sgd_final.shape[1]
    sgd = float(np.mean(reached_optimal(model, sgd_final, margin)))
    return {"snr": model.snr, "runs": count, "sgd_fraction": sgd,
            "sgd_se": binomial_se(sgd, count),
            "ode_fraction": float(np.mean(reached_optimal(model, ode_final, margin))),
            "agreement": agreement(model, sgd_final, ode_final, margin)}


def draw_sweep(ax, table, what):
    """Fraction optimal against ``lambda`` (:func:`lambda_sweep`); ``lambda = inf`` at the right."""
    snr = table["snr"]
    finite = snr[np.isfinite(snr)]
    right = 5.0 * float(np.max(finite)) if finite.size else 1.0
    x = np.where(np.isfinite(snr), snr, right)
    ax.errorbar(x, table["sgd_fraction"], yerr=table["sgd_se"], fmt="o", color="tab:red",
                capsize=3, label="SGD ± 1 binomial s.e.")
    ax.plot(x, table["ode_fraction"], "s", mfc="none", mec="tab:blue", ms=7,
            label="ODE at that λ, from each run's start")
    ax.axhline(table["law"][0], color="k", ls=":", lw=1.2,
               label=f"λ = ∞ basin law {what} = {table['law'][0]:.4g}")
    ax.set_xscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{s:g}" if math.isfinite(s) else "∞" for s in snr])
    ax.minorticks_off()
    ax.set_xlabel("λ (signal-to-noise ratio)")
    ax.set_ylabel("fraction of runs optimal at the end")
    top = max(2 * float(table["law"][0]), float(np.max(table["sgd_fraction"] + table["sgd_se"])),
              float(np.max(table["ode_fraction"])))
    ax.set_ylim(-0.02, min(1.02, top + 0.08))
    legend(ax, loc="upper left")


def sweep_summary(table):
    """The sweep table as JSON-able lists (``lambda = inf`` written ``"inf"``)."""
    out = {name: np.asarray(column).tolist() for name, column in table.items()}
    out["snr"] = [f"{s:g}" for s in table["snr"]]
    return out
