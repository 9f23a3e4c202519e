"""k-GMM multiclass logistic regression: Hessian and G outliers along SGD (seed 003).

docs/spectra.md (the outlier spectra; Figs. 3.1-3.3, F.2 of the third seed paper). One SGD run of the
classifier ``x = (x^1..x^k)``; at each snapshot time ``hierarchy sgd`` (``[spectra]`` of
``gmm-multiclass``) records the top ``k`` eigenpairs of the empirical test Hessian and G
class blocks ``x1..xk`` (``d x d``), their Silverstein-Choi bulk edge, and the population
values along the ballistic ODE from run 0's own start. Measured values are drawn solid,
predictions dashed, on the same axes.

- Fig. 3.1 (``figure_spectra_kgmm_alignment.png``): ``rho(x^c, E_k(∇²_cc R̂))`` and
  ``rho(x^c, E_k(Ĝ_cc))`` per class against ``t``; dashed: the contract's (D.2.2)
  ``rho_pred = sqrt(sum_b m_cb^2 / (sum_b m_cb^2 + R_cc_perp))`` on the ODE; dotted:
  ``rho(x^c, E_k)`` of the population block along the ODE (``spectra.npz``).
- Fig. 3.2 (``figure_spectra_kgmm_vectors.png``): the entries of ``x^1`` at the end and the
  ``k`` leading eigenvectors of ``∇²_11 R̂`` and ``Ĝ_11`` against the coordinate index.
  ``x^1`` is not stored by ``hierarchy sgd``: it is recomputed by the same SGD (same seed,
  same recording times, so the same random stream) and checked against the recorded final
  statistics (:func:`final_parameters`). Eigenvector signs: each vector is oriented along
  ``+mu_b`` of the mean ``b`` it overlaps most (the top one along ``+mu_1``).
- Fig. 3.3 / F.2 (``figure_spectra_kgmm_outliers.png``): the top ``k`` eigenvalues of
  ``∇²_11 R̂`` and its bulk edge against the ODE's population outliers and bulk level
  ``(1/lambda) E[w]``; and ``m_1b = <x^1, mu_b>`` of run 0 (``result.npz``) against the ODE.

Targets (:func:`targets`; printed, in ``result.json``, checked by the slow tests):
``rho(x^c, E_k(∇²_cc R̂)) > 0.9`` for every class at ``t = 30``; ``|rho_pred - rho| < 0.05``
for ``t >= 10``; at the end, every measured top-``k`` Hessian eigenvalue within 10% of the
population prediction (worst ratio per block reported; G reported too). Measured at the
full settings (seed 0): rho at ``t = 30`` min 0.876 (0.9 first reached at ``t = 40``), max
gap 0.065 (0.048 against the population eigenspace), worst Hessian ratio 1.110 (the
``mu_c`` outlier 1.036): all three miss narrowly, each in the finite-``M~`` direction; with
``M~ = 100 d`` (6 snapshots) they pass: 0.901, 0.042, 1.053. For G the ``k - 1`` small
population outliers lie below the G bulk edge, so its measured 2nd..k-th are bulk values.

Settings: full = ``tools/configs/spectra_kgmm.toml`` (``k = 10``, ``lambda = 10``,
``beta = 0.01``, ``delta = 1/d``, ``d = 500``, ``T = 50``, ``M~ = 40 d``, 17 snapshots);
measured 77 s wall with ``nice`` on 2 shared cores (139 s when they were busier:
:data:`FULL_SECONDS`). ``--quick``: ``d = 300``, ``M~ = 20 d``, 7 snapshots (measured
19 s); ``--tiny``: ``k = 3``, ``d = 60``, ``T = 5``, 3 snapshots (seconds; the tests).

Writes the three PNGs, ``figure_spectra_kgmm_alignment.csv``, ``_vectors.csv``,
``_outliers.csv``, ``_overlaps.csv``, the run's own outputs (``run/``) and ``result.json``
into ``--out DIR``.
"""

from __future__ import annotations

import pathlib

import numpy as np
from figure_bgj_common import Clock, legend, parse_args, save_png, settings, write_csv
from figure_common import ROOT, figure, write_summary

from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError
from hierarchy.core.progress import Progress
from hierarchy.core.registry import family_of
from hierarchy.models.multiclass import sgd
from hierarchy.models.multiclass.field import integrate_field
from hierarchy.models.multiclass.layout import unpack
from hierarchy.spectra.job import recording_times

CONFIG = ROOT / "tools" / "configs" / "spectra_kgmm.toml"
NAME = "figure_spectra_kgmm"
FULL = {"classes": None, "dimension": None, "t_final": None, "times": None, "ratio": None}
QUICK = {"dimension": 300, "ratio": 20.0, "times": [0.0, 2.0, 5.0, 10.0, 20.0, 30.0, 50.0]}
TINY = {"classes": 3, "dimension": 60, "t_final": 5.0, "ratio": 10.0,
        "times": [0.0, 2.0, 5.0]}
#: wall time of the full mode, measured on 2 shared cores (nice)
FULL_SECONDS = 140
#: the targets: rho level reached by ALIGN_BY, rho tolerance from ALIGN_FROM, outlier tolerance
ALIGN_LEVEL, ALIGN_BY, ALIGN_TOL, ALIGN_FROM, OUTLIER_TOL = 0.9, 30.0, 0.05, 10.0, 0.10
MATRICES = (("hessian", "∇²R̂"), ("G", "Ĝ"))


def block_tex(matrix, block):
    """Mathtext of a matrix's block: ``\\nabla^2_{cc}\\hat R``, ``\\hat G_{cc}``."""
    return rf"\nabla^2_{{{block}}}\hat R" if matrix == "hessian" else rf"\hat G_{{{block}}}"


# ----------------------------------------------------------------------------- the run

def overrides(cfg):
    """Config overrides of this mode over ``spectra_kgmm.toml`` (None values: the file's)."""
    out = {"model": {}, "sgd": {}, "solve": {}, "spectra": {}}
    if cfg["classes"]:
        out["model"]["classes"] = cfg["classes"]
    if cfg["dimension"]:
        out["sgd"]["dimension"] = cfg["dimension"]
    if cfg["t_final"]:
        out["solve"].update(t_final=cfg["t_final"], points=int(cfg["t_final"]) + 1)
    if cfg["times"]:
        out["spectra"]["times"] = cfg["times"]
    if cfg["ratio"]:
        out["spectra"]["test_ratio"] = cfg["ratio"]
    return out


def run(cfg, out_dir, progress=None):
    """``hierarchy sgd`` of the mode's config, the ODE from run 0's start, and ``x^1``.

    Returns
    -------
    dict
        ``config``, ``model``, ``spectra`` (``spectra.npz``), ``t`` and ``u`` (run 0's
        statistics at the ``[solve]`` times, ``(T, n)``), ``ode`` (the ballistic ODE from
        ``u[0]`` at ``t``), ``ode_snap`` (the ODE at the snapshot times) and ``x1`` (``(d,)``).
    """
    config = load_config(CONFIG, overrides(cfg))
    family = family_of(config)
    model = family.multiclass(config)
    family.run_sgd(config, out_dir, progress=progress or Progress.quiet())
    with np.load(pathlib.Path(out_dir) / "spectra.npz") as data:
        spectra = {key: data[key] for key in data.files}
    with np.load(pathlib.Path(out_dir) / "result.npz") as data:
        t, u = data["t"], data["u_runs"][0]
    grid = np.union1d(t, spectra["t"])
    solve = config["solve"]
    ode = integrate_field(model, u[0], grid, rtol=float(solve["rtol"]),
                          atol=float(solve["atol"])).y
    x = final_parameters(model, config, t, spectra["t"], u[-1])
    return {"config": config, "model": model, "spectra": spectra, "t": t, "u": u,
            "ode": ode[np.searchsorted(grid, t)],
            "ode_snap": ode[np.searchsorted(grid, spectra["t"])], "x1": x[0]}


def final_parameters(model, config, output_times, spectra_times, recorded):
    """Run 0's final ``x (k, d)``, recomputed by the same SGD and checked.

    ``hierarchy sgd`` stores statistics, not parameters; the same seed and the same
    recording times (:func:`hierarchy.spectra.job.recording_times`) replay the same random
    stream. The final statistics must equal ``recorded`` (run 0's last row), else the
    replay is not the recorded run and a :class:`HierarchyError` is raised.
    """
    union, _, _ = recording_times(output_times, spectra_times)
    table = config["sgd"]
    captured = {}

    def keep(index, t, x, recent):
        captured["x"] = np.array(x[0], copy=True)

    trajectory = sgd.run_sgd(model, table["dimension"], table["runs"], union,
                             seed=table["seed"], observer=keep)
    replayed = np.asarray(trajectory.u_runs)[0, -1]
    if not np.allclose(replayed, recorded, rtol=1e-9, atol=1e-12):
        raise HierarchyError("sgd.seed: the replayed SGD does not reproduce run 0's final "
                             "statistics", field="sgd.seed")
    return captured["x"]


# ----------------------------------------------------------------------------- predictions

def rho_pred(model, u_rows):
    """Contract D.2.2: ``sqrt(sum_b m_cb^2 / (sum_b m_cb^2 + R_cc_perp))``, ``(T, k)``.

    The fraction of ``|x^c|`` in ``span(mu)`` for orthonormal means; ``u_rows (T, n)``.
    """
    m, r, _ = unpack(np.asarray(u_rows, float).T, model.classes)
    signal = np.sum(m**2, axis=2)
    return np.sqrt(signal / (signal + np.einsum("tcc->tc", r)))


def measured_rho(spectra, matrix, classes):
    """``rho(x^c, E_k)`` of the empirical blocks, ``(T, k)``."""
    return np.stack([spectra[f"{matrix}_x{c + 1}_alignment"] for c in range(classes)], axis=1)


def population_rho(spectra, matrix, classes):
    """``rho(x^c, E_k)`` of the population blocks along the ODE, ``(T, k)``."""
    return np.stack([spectra[f"{matrix}_x{c + 1}_alignment_predicted"]
                     for c in range(classes)], axis=1)


def oriented(vectors, model, dimension):
    """Eigenvectors ``(d, r)`` with signs along ``+mu_b`` of their largest overlap ``b``."""
    overlaps = model.means(dimension) @ vectors                      # (k, r)
    best = overlaps[np.argmax(np.abs(overlaps), axis=0), np.arange(vectors.shape[1])]
    return vectors * np.where(best < 0, -1.0, 1.0)


def targets(result):
    """The contract's targets of this figure, measured (module docstring).

    Returns
    -------
    dict
        ``rho_at``: per class ``rho(x^c, E_k(∇²_cc R̂))`` at the snapshot nearest
        ``ALIGN_BY``; ``rho_ok``; per matrix the worst ``|rho_pred - rho|`` for ``t >=
        ALIGN_FROM`` (contract formula and population eigenspace); per matrix and block the
        final ratios measured / predicted of the top ``k`` eigenvalues and the worst one.
    """
    spectra, model = result["spectra"], result["model"]
    k, t = model.classes, spectra["t"]
    at = int(np.argmin(np.abs(t - ALIGN_BY)))
    late = t >= ALIGN_FROM
    contract = rho_pred(model, result["ode_snap"])
    out = {"rho_time": float(t[at]),
           "rho_at": measured_rho(spectra, "hessian", k)[at].tolist()}
    out["rho_ok"] = bool(min(out["rho_at"]) > ALIGN_LEVEL)
    for matrix, _ in MATRICES:
        rho = measured_rho(spectra, matrix, k)
        gap = np.abs(contract - rho)[late]
        pop = np.abs(population_rho(spectra, matrix, k) - rho)[late]
        ratios = final_ratios(spectra, matrix, k)
        worst = {b: float(np.max(np.abs(r - 1.0))) for b, r in ratios.items()}
        out[matrix] = {"rho_gap": float(gap.max()) if gap.size else float("nan"),
                       "rho_gap_population": float(pop.max()) if pop.size else float("nan"),
                       "ratios": {b: r.tolist() for b, r in ratios.items()},
                       "worst_deviation": worst,
                       "outliers_ok": bool(max(worst.values()) < OUTLIER_TOL)}
    out["rho_gap_ok"] = bool(out["hessian"]["rho_gap"] < ALIGN_TOL)
    return out


def final_ratios(spectra, matrix, classes):
    """``{block: measured / predicted}`` of the top eigenvalues at the last snapshot."""
    return {f"x{c + 1}": spectra[f"{matrix}_x{c + 1}_eigenvalues"][-1]
            / spectra[f"{matrix}_x{c + 1}_outliers_predicted"][-1] for c in range(classes)}


# ----------------------------------------------------------------------------- drawing

def class_colours(classes):
    """One colour per class."""
    import matplotlib  # deferred: only drawing needs it

    cmap = matplotlib.colormaps["tab10"]
    return [cmap(c % 10) for c in range(classes)]


def draw_alignment(axes, result):
    """Fig. 3.1: measured ``rho(x^c, E_k)`` per class; contract and population predictions."""
    spectra, model = result["spectra"], result["model"]
    k, t, colours = model.classes, spectra["t"], class_colours(model.classes)
    contract = rho_pred(model, result["ode"])
    for ax, (matrix, text) in zip(axes, MATRICES):
        rho, pop = measured_rho(spectra, matrix, k), population_rho(spectra, matrix, k)
        for c in range(k):
            ax.plot(t, rho[:, c], "o-", color=colours[c], ms=2.5, lw=1.0,
                    label=f"$c = {c + 1}$")
            ax.plot(result["t"], contract[:, c], "--", color=colours[c], lw=0.8)
            ax.plot(t, pop[:, c], ":", color=colours[c], lw=0.8)
        ax.plot([], [], "ko-", ms=2.5, label="measured (SGD run 0)")
        ax.plot([], [], "k--",
                label=r"$\rho_{\rm pred}$ closed form, exact at $\lambda = \infty$ only (ODE)")
        ax.plot([], [], "k:", label=r"$\rho(x^c, E_k)$ of the population block (ODE)")
        ax.axhline(ALIGN_LEVEL, color="0.45", lw=0.8, ls="-.",
                   label=f"target {ALIGN_LEVEL:g} (at $t = {ALIGN_BY:g}$, Hessian)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(r"$t = \ell\delta$")
        ax.set_title(rf"$\rho(x^c, E_{{{k}}}({block_tex(matrix, 'cc')}))$, $c = 1..{k}$",
                     fontsize=9)
        legend(ax, loc="lower right", fontsize=6, ncol=2)


def draw_vectors(axes, result):
    """Fig. 3.2: ``x^1`` at the end and the ``k`` leading eigenvectors of the 11 blocks."""
    spectra, model = result["spectra"], result["model"]
    dimension = int(result["config"]["sgd"]["dimension"])
    index = np.arange(1, dimension + 1)
    centres = np.argmax(model.means(dimension), axis=1) + 1
    axes[0].plot(index, result["x1"], color="k", lw=0.8)
    axes[0].set_title(r"$x^1$ at the end of training", fontsize=9)
    for ax, (matrix, text) in zip(axes[1:], MATRICES):
        vectors = oriented(spectra[f"{matrix}_x1_eigenvectors_last"], model, dimension)
        for j in range(vectors.shape[1]):
            ax.plot(index, vectors[:, j], lw=0.7, color=f"C{j % 10}",
                    label=f"v{j + 1}" if j < 10 else None)
        ax.set_title(f"top {vectors.shape[1]} eigenvectors of ${block_tex(matrix, '11')}$ (end)",
                     fontsize=9)
        legend(ax, loc="lower right", fontsize=6, ncol=5)
    for ax in axes:
        for c in centres:
            ax.axvline(c, color="0.85", lw=0.5, zorder=0)
        ax.set_xlabel("coordinate index")


def draw_outliers(axes, result):
    """Fig. 3.3 / F.2: ``∇²_11 R̂`` eigenvalues and ``m_1b`` over training, against the ODE."""
    spectra, model = result["spectra"], result["model"]
    t = spectra["t"]
    measured = spectra["hessian_x1_eigenvalues"]
    predicted = spectra["hessian_x1_outliers_predicted"]
    names = ("top eigenvalue (along $\\mu_1$)", "2nd..k-th (along $\\mu_b$, $b \\neq 1$)")
    for j in range(measured.shape[1]):
        colour = "tab:red" if j == 0 else "tab:blue"
        axes[0].plot(t, measured[:, j], "o-", color=colour, ms=2.5, lw=0.8,
                     label=f"measured {names[min(j, 1)]}" if j <= 1 else None)
        axes[0].plot(t, predicted[:, j], "--", color=colour, lw=0.8,
                     label=f"population, ODE: {names[min(j, 1)]}" if j <= 1 else None)
    axes[0].plot(t, spectra["hessian_x1_bulk_edge"], "s-", color="0.4", ms=2.5,
                 label="bulk edge (Silverstein–Choi)")
    axes[0].plot(t, spectra["hessian_x1_bulk_predicted"], ":", color="0.4",
                 label=r"population bulk $\lambda^{-1} E[w]$ (ODE)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel(rf"eigenvalue of ${block_tex('hessian', '11')}$")
    axes[0].set_title(rf"eigenvalues of ${block_tex('hessian', '11')}$ over training", fontsize=9)
    m_sgd, _, _ = unpack(result["u"].T, model.classes)
    m_ode, _, _ = unpack(result["ode"].T, model.classes)
    for b in range(model.classes):
        colour = "tab:red" if b == 0 else "tab:blue"
        axes[1].plot(result["t"], m_sgd[:, 0, b], "-", color=colour, lw=1.0)
        axes[1].plot(result["t"], m_ode[:, 0, b], "--", color="k", lw=0.7)
    axes[1].plot([], [], "-", color="tab:red", label="SGD run 0, b = 1")
    axes[1].plot([], [], "-", color="tab:blue", label="SGD run 0, b = 2..k")
    axes[1].plot([], [], "k--", label="ballistic ODE")
    axes[1].set_title(r"$m_{1b} = \langle x^1, \mu_b\rangle$, $b = 1..k$", fontsize=9)
    for ax in axes:
        ax.set_xlabel(r"$t = \ell\delta$")
        legend(ax, loc="best", fontsize=7)


# ----------------------------------------------------------------------------- tables

def alignment_columns(result):
    """CSV: ``t`` and per matrix and class the measured, contract and population rho."""
    spectra, model = result["spectra"], result["model"]
    k = model.classes
    contract = rho_pred(model, result["ode_snap"])
    columns = {"t": spectra["t"]}
    for matrix, _ in MATRICES:
        rho, pop = measured_rho(spectra, matrix, k), population_rho(spectra, matrix, k)
        for c in range(k):
            columns[f"{matrix}_x{c + 1}_rho"] = rho[:, c]
            columns[f"{matrix}_x{c + 1}_rho_pred"] = contract[:, c]
            columns[f"{matrix}_x{c + 1}_rho_population"] = pop[:, c]
    return columns


def vector_columns(result):
    """CSV: ``index``, ``x1`` and the oriented eigenvectors of the 11 blocks."""
    spectra, model = result["spectra"], result["model"]
    dimension = int(result["config"]["sgd"]["dimension"])
    columns = {"index": np.arange(1, dimension + 1), "x1": result["x1"]}
    for matrix, _ in MATRICES:
        vectors = oriented(spectra[f"{matrix}_x1_eigenvectors_last"], model, dimension)
        for j in range(vectors.shape[1]):
            columns[f"{matrix}_v{j + 1}"] = vectors[:, j]
    return columns


def outlier_columns(result):
    """CSV: ``t``, the 11 blocks' measured and predicted eigenvalues and bulk, H and G."""
    spectra = result["spectra"]
    columns = {"t": spectra["t"]}
    for matrix, _ in MATRICES:
        name = f"{matrix}_x1"
        measured, predicted = spectra[name + "_eigenvalues"], spectra[name + "_outliers_predicted"]
        for j in range(measured.shape[1]):
            columns[f"{matrix}_{j + 1}"] = measured[:, j]
            columns[f"{matrix}_{j + 1}_predicted"] = predicted[:, j]
        columns[f"{matrix}_bulk_edge"] = spectra[name + "_bulk_edge"]
        columns[f"{matrix}_bulk_predicted"] = spectra[name + "_bulk_predicted"]
    return columns


def overlap_columns(result):
    """CSV: ``t`` and ``m_1b`` of SGD run 0 and of the ODE."""
    k = result["model"].classes
    m_sgd, _, _ = unpack(result["u"].T, k)
    m_ode, _, _ = unpack(result["ode"].T, k)
    columns = {"t": result["t"]}
    for b in range(k):
        columns[f"m1.{b + 1}"] = m_sgd[:, 0, b]
        columns[f"m1.{b + 1}_ode"] = m_ode[:, 0, b]
    return columns


def print_targets(found):
    """One line per target, with the numbers."""
    print(f"  rho(x^c, E_k(H_cc)) at t = {found['rho_time']:g}: min "
          f"{min(found['rho_at']):.4f} (> {ALIGN_LEVEL}: {found['rho_ok']})", flush=True)
    for matrix, _ in MATRICES:
        entry = found[matrix]
        worst = max(entry["worst_deviation"].items(), key=lambda kv: kv[1])
        print(f"  {matrix}: max |rho_pred - rho| (t >= {ALIGN_FROM:g}) {entry['rho_gap']:.4f}"
              f" (population E_k: {entry['rho_gap_population']:.4f}); worst final outlier "
              f"|ratio - 1| {worst[1]:.4f} in {worst[0]} (< {OUTLIER_TOL}: "
              f"{entry['outliers_ok']})", flush=True)


# ----------------------------------------------------------------------------- main

def main(argv=None):
    """Run SGD with spectra, draw Figs. 3.1-3.3, write CSVs and ``result.json``.

    ``argv``: the command line without the program name (default: ``sys.argv[1:]``).
    """
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_spectra_kgmm", argv)
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    out = pathlib.Path(args.out)
    progress = Progress(interval=30.0)
    result = run(cfg, out / "run", progress)
    progress.close()
    config, spectra = result["config"], result["spectra"]
    print(f"  {len(spectra['t'])} snapshots ({clock.elapsed():.1f} s)", flush=True)
    found = targets(result)
    print_targets(found)
    title = (f"k-GMM, k = {result['model'].classes}: d = {config['sgd']['dimension']}, "
             f"λ = {config['model']['snr']:g}, β = {config['model']['ridge']:g}, δ = 1/d, "
             f"M̃ = {int(spectra['samples_used'][0])} test samples ({cfg['mode']} mode)")
    for suffix, (rows, cols, size), draw, what in (
            ("alignment", (1, 2, (11, 4.2)), draw_alignment, "Fig. 3.1"),
            ("vectors", (1, 3, (15, 4.0)), draw_vectors, "Fig. 3.2"),
            ("outliers", (1, 2, (11, 4.2)), draw_outliers, "Fig. 3.3 / F.2")):
        fig, axes = figure(rows, cols, figsize=size)
        draw(axes[0], result)
        fig.suptitle(f"{what} — {title}", fontsize=10)
        save_png(fig, out / f"{NAME}_{suffix}.png")
    tables = {"alignment": alignment_columns(result), "vectors": vector_columns(result),
              "outliers": outlier_columns(result), "overlaps": overlap_columns(result)}
    for suffix, columns in tables.items():
        write_csv(out / f"{NAME}_{suffix}.csv", columns)
    summary = {"targets": found, "t": spectra["t"].tolist(),
               "samples": int(spectra["samples_used"][0])}
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    summary["cpu_seconds"] = clock.cpu()
    outliers = tables["outliers"]
    write_summary(out, cfg, summary, spectra["t"],
                  np.stack([outliers[k] for k in outliers if k != "t"], axis=1),
                  [k for k in outliers if k != "t"])


if __name__ == "__main__":
    main()
