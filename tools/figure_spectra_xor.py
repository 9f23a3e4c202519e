"""XOR Gaussian mixture, width-K ReLU network: Hessian and G outliers along SGD (seed 003).

docs/spectra.md (the outlier spectra; Figs. 4.1-4.3 of the third seed paper). One SGD run of the
network on the XOR mixture; at each snapshot time ``hierarchy sgd`` (``[spectra]`` of
``gmm-xor``) records the top eigenpairs of the empirical test Hessian and G blocks ``W_i``
(``d x d``, top 2) and ``v`` (``K x K``, top 4, the 5th as its bulk), and predicts them from
the population blocks along the ballistic ODE started at the run's own statistics. Measured
values are drawn solid, predictions dashed, on the same axes.

- Fig. 4.1 (``figure_spectra_xor_alignment.png``): ``rho(W_i, E_2)`` for every neuron and
  ``rho(v, E_4)``, Hessian and G.
- Fig. 4.2 (``figure_spectra_xor_vv.png``): the ``vv`` eigenvalues of the Hessian and of G:
  one outlier at the start (ReLU positivity), then four (one per discerned class).
- Fig. 4.3 (``figure_spectra_xor_planted.png``): the eigenvalues of ``Ĝ_vv`` for four planted
  starts discerning 1, 2, 3 and 4 classes (:func:`planted_start`).

Planted starts (contract C.5 suggestion, one change): for ``c`` classes, neuron ``i``
serves class ``i mod c`` of ``(+mu, +nu, -mu, -nu)``: ``v_i = +|a_i|`` for ``mu`` and
``-|a_i|`` for ``nu`` (``a ~ N(0, I_K)``, seed :data:`MAGNITUDE_SEED`), ``m_i^mu`` or
``m_i^nu = +-`` :data:`PLANT_M` (the other 0), ``R_ii = 1``. The contract's ``0.05`` is an
orthant label for ``lambda = inf``; at ``lambda = 10`` the soft indicator
``Phi(m sqrt(lambda / R_ii)) = Phi(0.16) = 0.56`` barely favours it, and measured SGD
(``d = 200``, 4 runs, ``T = 100``) from the 1-class start ended discerning 2 classes in 3
of 4 runs (also with ``0.2``); with ``0.5`` (``Phi(1.58) = 0.94``) every run kept the
planted 1, 2, 3, 4 classes. Classes discerned at the end are counted on the SGD
statistics by :func:`hierarchy.models.gmm.class_counts`.

Outlier count (:func:`outlier_count`, used for the rank target): the eigenvalues of
``Ĝ_vv`` (top :data:`PLANTED_TOP`, decreasing) are split at their largest ratio gap,
``n = argmax_j lambda_j / lambda_{j+1}`` over ``j = 1 .. top - 1``; the count is ``n``. The
same rule is applied to the predicted population eigenvalues. It uses no knowledge of the
number of planted classes.

Settings: full = ``tools/configs/spectra_xor.toml`` (``d = 1000``, ``lambda = 10``,
``K = 20``, ``alpha = 0.1``, ``delta = 1/d``, ``T = 100``, ``M~ = 10 d``, 18 snapshots) plus
the four planted runs (same model, 11 snapshots of the ``v`` block): measured 575 s wall,
210 s CPU, on 2 cores shared with other jobs (load 4-9). ``--quick``: ``d = 400``, 10 and 6
snapshots (measured 120 s wall, 71 s CPU); ``--tiny``: ``d = 60``, ``K = 6``, ``T = 5``
(about 8 s of CPU; the tests).

Measured (full mode, seed 0): final ``rho(W_i, E_2)`` median 0.954 (predicted 0.976) for
Hessian and G; two neurons whose ``v_i`` dies before ``W_i`` aligns end at 0.06 and 0.08
(predicted 0.07 and 0.15), a late one at 0.87 (0.96); ``rho(v, E_4)`` 1.000;
``vv`` Hessian top 4 at ``t = 0`` 0.061, 0.0075, 0.0074, 0.0070 (predicted 0.0605, 0.0074,
0.0072, 0.0070: one outlier), at ``t = 100`` 0.0036, 0.0027, 0.0023, 0.0014 (predicted 0.0040,
0.0029, 0.0022, 0.0011) over a 5th eigenvalue of 2e-8. The planted starts discern 1, 2, 3, 4
classes and ``Ĝ_vv`` has 1, 2, 3, 4 outliers (measured and predicted).

Writes the three PNGs, ``figure_spectra_xor_alignment.csv``, ``figure_spectra_xor_vv.csv``,
``figure_spectra_xor_planted.csv``, the runs' own outputs (``gaussian/``, ``planted_c/``)
and ``result.json`` into ``--out DIR``.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
from figure_bgj_common import Clock, legend, parse_args, save_png, settings, write_csv
from figure_common import ROOT, figure, write_summary

from hierarchy.config.loader import load_config
from hierarchy.core.progress import Progress
from hierarchy.core.registry import family_of
from hierarchy.models.gmm import class_counts, from_config

CONFIG = ROOT / "tools" / "configs" / "spectra_xor.toml"
NAME = "figure_spectra_xor"
#: the four classes in planting order: (signal, sign)
CLASSES = (("mu", 1.0), ("nu", 1.0), ("mu", -1.0), ("nu", -1.0))
#: planted orthant label |m(0)| (module docstring) and the seed of the magnitudes |v_i(0)|
PLANT_M, MAGNITUDE_SEED = 0.5, 7
#: eigenvalues of Ĝ_vv recorded for the planted runs
PLANTED_TOP = 8
FULL = {"dimension": None, "width": None, "t_final": None, "times": None,
        "planted_times": [0.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0, 70.0, 85.0, 100.0]}
QUICK = {"dimension": 400, "times": [0.0, 1.0, 3.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0],
         "planted_times": [0.0, 5.0, 15.0, 30.0, 60.0, 100.0]}
TINY = {"dimension": 60, "width": 6, "t_final": 5.0, "times": [0.0, 5.0],
        "planted_times": [0.0, 5.0]}
#: wall seconds of the full mode, measured on 2 shared cores (module docstring)
FULL_SECONDS = 575


# ----------------------------------------------------------------------------- the runs

def planted_start(width, classes, seed=MAGNITUDE_SEED):
    """``[init.statistics]`` of a start whose neurons serve ``classes`` classes (docstring)."""
    magnitudes = np.abs(np.random.default_rng(seed).standard_normal(width))
    table = {}
    for i in range(width):
        signal, sign = CLASSES[i % classes]
        table[f"v{i + 1}"] = float(magnitudes[i] if signal == "mu" else -magnitudes[i])
        table[f"m{i + 1}_{signal}"] = PLANT_M * sign
        table[f"R{i + 1}{i + 1}"] = 1.0
    return table


def base_overrides(cfg):
    """Config overrides of this mode over ``spectra_xor.toml`` (None values: the file's)."""
    model = {"width": cfg["width"]} if cfg["width"] else {}
    sgd = {"dimension": cfg["dimension"]} if cfg["dimension"] else {}
    solve = {"t_final": cfg["t_final"]} if cfg["t_final"] else {}
    spectra = {"times": cfg["times"]} if cfg["times"] else {}
    return {"model": model, "sgd": sgd, "solve": solve, "spectra": spectra}


def run(overrides, out_dir, progress=None):
    """``hierarchy sgd`` of the config with ``overrides``; ``(config, spectra, final state)``."""
    config = load_config(CONFIG, overrides)
    family_of(config).run_sgd(config, out_dir, progress=progress or Progress.quiet())
    with np.load(pathlib.Path(out_dir) / "spectra.npz") as data:
        spectra = {key: data[key] for key in data.files}
    with np.load(pathlib.Path(out_dir) / "result.npz") as data:
        final = data["u_runs"][0, -1]
    return config, spectra, final


def planted_run(cfg, classes, out_dir, progress=None):
    """The planted start with ``classes`` classes: only the ``v`` block, top :data:`PLANTED_TOP`."""
    overrides = base_overrides(cfg)
    probe = load_config(CONFIG, overrides)
    width = int(probe["model"]["width"])
    overrides["init"] = {"source": "statistics", "statistics": planted_start(width, classes)}
    overrides["spectra"] = {"times": cfg["planted_times"], "blocks": ["v"],
                            "top": min(PLANTED_TOP, width)}
    config, spectra, final = run(overrides, out_dir, progress)
    served = int(class_counts(from_config(config), final[:, None])[0])
    return {"classes": classes, "served": served, "spectra": spectra}


def outlier_count(eigenvalues):
    """Outliers of a decreasing spectrum: the index of its largest ratio gap (docstring).

    Parameters
    ----------
    eigenvalues : array_like, shape (r,), r >= 2
        Positive eigenvalues, decreasing.

    Returns
    -------
    int
        ``argmax_j lambda_j / lambda_{j+1}`` (1-based), in ``1 .. r - 1``.
    """
    values = np.maximum(np.asarray(eigenvalues, float), 1e-300)
    return int(np.argmax(values[:-1] / values[1:])) + 1


# ----------------------------------------------------------------------------- drawing

def neuron_colours(width):
    """One colour per neuron."""
    import matplotlib  # deferred: only drawing needs it

    cmap = matplotlib.colormaps["tab20"]
    return [cmap(i % 20) for i in range(width)]


def block_tex(matrix, block):
    """Mathtext of a matrix's block: ``\\nabla^2_{vv}\\hat R``, ``\\hat G_{vv}``."""
    return rf"\nabla^2_{{{block}}}\hat R" if matrix == "hessian" else rf"\hat G_{{{block}}}"


def draw_alignment(axes, spectra, width):
    """Fig. 4.1: ``rho(W_i, E_2)`` per neuron and ``rho(v, E_4)``; Hessian and G."""
    t, colours = spectra["t"], neuron_colours(width)
    for col, matrix in enumerate(("hessian", "G")):
        top, bottom = axes[0][col], axes[1][col]
        for i in range(width):
            name = f"{matrix}_W{i + 1}"
            top.plot(t, spectra[name + "_alignment"], "-", color=colours[i], lw=1.0)
            top.plot(t, spectra[name + "_alignment_predicted"], "--", color=colours[i], lw=0.8)
        top.plot([], [], "k-", label="measured (solid)")
        top.plot([], [], "k--", label="predicted (dashed)")
        for i in (0, 1):
            top.plot([], [], "-", color=colours[i], label=f"neuron $i = {i + 1}$")
        top.plot([], [], " ", label=f"... one colour per neuron, $i \\leq {width}$")
        top.set_title(rf"$\rho(W_i, E_2({block_tex(matrix, 'W_iW_i')}))$, $i = 1..{width}$",
                      fontsize=9)
        bottom.plot(t, spectra[f"{matrix}_v_alignment"], "o-", color="tab:red", ms=3,
                    label="measured")
        bottom.plot(t, spectra[f"{matrix}_v_alignment_predicted"], "--", color="k",
                    label="predicted")
        bottom.set_title(rf"$\rho(v, E_4({block_tex(matrix, 'vv')}))$", fontsize=9)
        for ax in (top, bottom):
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel(r"$t = \ell\delta$")
            legend(ax, loc="lower right")


def draw_vv(axes, spectra, references):
    """Fig. 4.2: measured top-4 and 5th (bulk) ``vv`` eigenvalues against the predicted."""
    t = spectra["t"]
    for ax, matrix in zip(axes, ("hessian", "G")):
        measured = spectra[f"{matrix}_v_eigenvalues"]
        predicted = spectra[f"{matrix}_v_outliers_predicted"]
        for j in range(measured.shape[1]):
            ax.plot(t, measured[:, j], "o-", color=f"C{j}", ms=3,
                    label=f"eigenvalue {j + 1}")
            ax.plot(t, predicted[:, j], "--", color=f"C{j}", lw=1.0)
        ax.plot([], [], "ko-", ms=3, label="measured (solid)")
        ax.plot([], [], "k--", label="predicted: population, ODE (dashed)")
        ax.plot(t, spectra[f"{matrix}_v_bulk_edge"], "s-", color="0.5", ms=3,
                label="measured 5th (bulk)")
        ax.axhline(references[matrix], color="k", ls=":", lw=1.0,
                   label=rf"$\lambda = \infty$ per-class value {references[matrix]:.4g}")
        ax.set_yscale("log")
        ax.set_xlabel(r"$t = \ell\delta$")
        ax.set_ylabel("eigenvalue")
        ax.set_title(rf"eigenvalues of ${block_tex(matrix, 'vv')}$", fontsize=9)
        # outside the panel: inside, it covered the smaller eigenvalues
        legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)


def draw_planted(axes, planted, reference):
    """Fig. 4.3: ``Ĝ_vv`` eigenvalues of the planted runs, measured against predicted."""
    for ax, case in zip(axes, planted):
        spectra = case["spectra"]
        t, measured = spectra["t"], spectra["G_v_eigenvalues"]
        predicted = spectra["G_v_outliers_predicted"]
        for j in range(measured.shape[1]):
            ax.plot(t, measured[:, j], "o-", color=f"C{j}" if j < 4 else "0.55", ms=3,
                    lw=1.0, label=(f"eigenvalue {j + 1}" if j < 4 else
                                   ("eigenvalue 5.. (bulk)" if j == 4 else None)))
            ax.plot(t, predicted[:, j], "--", color=f"C{j}" if j < 4 else "0.55", lw=0.8)
        ax.plot([], [], "ko-", ms=3, label="measured (solid)")
        ax.plot([], [], "k--", label="predicted (dashed)")
        ax.axhline(reference, color="k", ls=":", lw=1.0, label=r"$\lambda = \infty$ per-class value")
        ax.set_yscale("log")
        ax.set_xlabel(r"$t = \ell\delta$")
        ax.set_title(f"planted {case['classes']}: discerned {case['served']}, "
                     f"outliers {case['count']} (pred. {case['count_predicted']})", fontsize=8)
        legend(ax, loc="lower right", fontsize=7)
    axes[0].set_ylabel(rf"eigenvalues of ${block_tex('G', 'vv')}$")


# ----------------------------------------------------------------------------- tables

def alignment_columns(spectra, width):
    """CSV: ``t`` and, per matrix, every neuron's and ``v``'s measured and predicted rho."""
    columns = {"t": spectra["t"]}
    for matrix in ("hessian", "G"):
        for block in [f"W{i + 1}" for i in range(width)] + ["v"]:
            name = f"{matrix}_{block}"
            columns[name + "_rho"] = spectra[name + "_alignment"]
            columns[name + "_rho_predicted"] = spectra[name + "_alignment_predicted"]
    return columns


def vv_columns(spectra):
    """CSV: ``t`` and the measured, bulk and predicted ``vv`` eigenvalues of H and G."""
    columns = {"t": spectra["t"]}
    for matrix in ("hessian", "G"):
        measured = spectra[f"{matrix}_v_eigenvalues"]
        predicted = spectra[f"{matrix}_v_outliers_predicted"]
        for j in range(measured.shape[1]):
            columns[f"{matrix}_{j + 1}"] = measured[:, j]
            columns[f"{matrix}_{j + 1}_predicted"] = predicted[:, j]
        columns[f"{matrix}_bulk"] = spectra[f"{matrix}_v_bulk_edge"]
    return columns


def planted_columns(planted):
    """CSV (long): ``classes, served, t, rank, measured, predicted`` of every planted run."""
    rows = {"classes": [], "served": [], "t": [], "rank": [], "measured": [], "predicted": []}
    for case in planted:
        spectra = case["spectra"]
        measured, predicted = spectra["G_v_eigenvalues"], spectra["G_v_outliers_predicted"]
        for k, t in enumerate(spectra["t"]):
            for j in range(measured.shape[1]):
                for key, value in (("classes", case["classes"]), ("served", case["served"]),
                                   ("t", t), ("rank", j + 1), ("measured", measured[k, j]),
                                   ("predicted", predicted[k, j])):
                    rows[key].append(value)
    return {key: np.asarray(value) for key, value in rows.items()}


def per_class_values(ridge):
    """The ``lambda = inf`` per-class ``vv`` outliers (C.3): ``{"hessian", "G"}``."""
    c_alpha = math.log(1 - 4 * ridge) - math.log(4 * ridge)
    return {"hessian": ridge * (1 - 4 * ridge) * c_alpha, "G": 4 * ridge**2 * c_alpha}


def gaussian_summary(spectra, width):
    """Final alignments and first/last ``vv`` eigenvalues, measured and predicted."""
    out = {"t": spectra["t"].tolist()}
    for matrix in ("hessian", "G"):
        neurons = [f"{matrix}_W{i + 1}" for i in range(width)]
        out[matrix] = {
            "final_rho_W": [float(spectra[n + "_alignment"][-1]) for n in neurons],
            "final_rho_W_predicted": [float(spectra[n + "_alignment_predicted"][-1])
                                      for n in neurons],
            "final_rho_v": float(spectra[f"{matrix}_v_alignment"][-1]),
            "final_rho_v_predicted": float(spectra[f"{matrix}_v_alignment_predicted"][-1]),
            "vv_first": spectra[f"{matrix}_v_eigenvalues"][0].tolist(),
            "vv_first_predicted": spectra[f"{matrix}_v_outliers_predicted"][0].tolist(),
            "vv_last": spectra[f"{matrix}_v_eigenvalues"][-1].tolist(),
            "vv_last_predicted": spectra[f"{matrix}_v_outliers_predicted"][-1].tolist(),
            "vv_bulk_first": float(spectra[f"{matrix}_v_bulk_edge"][0]),
            "vv_bulk_last": float(spectra[f"{matrix}_v_bulk_edge"][-1])}
    return out


def planted_summary(case):
    """One planted run: classes planted and discerned, outlier counts, final eigenvalues."""
    spectra = case["spectra"]
    return {"classes": case["classes"], "served": case["served"], "count": case["count"],
            "count_predicted": case["count_predicted"],
            "final": spectra["G_v_eigenvalues"][-1].tolist(),
            "final_predicted": spectra["G_v_outliers_predicted"][-1].tolist()}


# ----------------------------------------------------------------------------- main

def main(argv=None):
    """Run the Gaussian start and the four planted starts; draw, write CSVs and result.json.

    ``argv``: the command line without the program name (default: ``sys.argv[1:]``).
    """
    clock = Clock()
    args = parse_args(__doc__.splitlines()[0], "out/figure_spectra_xor", argv)
    cfg = settings(args, FULL, QUICK, TINY, FULL_SECONDS)
    out = pathlib.Path(args.out)
    progress = Progress(interval=30.0)
    config, spectra, _ = run(base_overrides(cfg), out / "gaussian", progress)
    width = int(config["model"]["width"])
    progress.close()
    print(f"  Gaussian start: {len(spectra['t'])} snapshots ({clock.elapsed():.1f} s)",
          flush=True)
    planted = []
    for classes in range(1, 5):
        case = planted_run(cfg, classes, out / f"planted_{classes}", progress)
        case["count"] = outlier_count(case["spectra"]["G_v_eigenvalues"][-1])
        case["count_predicted"] = outlier_count(case["spectra"]["G_v_outliers_predicted"][-1])
        planted.append(case)
        progress.close()
        print(f"  planted {classes}: discerned {case['served']}, Ĝ_vv outliers "
              f"{case['count']} (predicted {case['count_predicted']}) "
              f"({clock.elapsed():.1f} s)", flush=True)
    references = per_class_values(float(config["model"]["ridge"]))
    title = (f"XOR GMM, K = {width}: d = {config['sgd']['dimension']}, "
             f"λ = {config['model']['snr']:g}, α = {config['model']['ridge']:g}, δ = 1/d, "
             f"M̃ = {int(spectra['samples_used'][0])} test samples ({cfg['mode']} mode)")
    fig, axes = figure(2, 2, figsize=(11, 8))
    draw_alignment(axes, spectra, width)
    fig.suptitle("Fig. 4.1 — " + title, fontsize=10)
    save_png(fig, out / f"{NAME}_alignment.png")
    fig, axes = figure(1, 2, figsize=(14, 4.2))
    draw_vv(axes[0], spectra, references)
    fig.suptitle("Fig. 4.2 — " + title, fontsize=10)
    save_png(fig, out / f"{NAME}_vv.png")
    fig, axes = figure(1, 4, figsize=(16, 4.2), sharey=True)
    draw_planted(axes[0], planted, references["G"])
    fig.suptitle("Fig. 4.3 — planted starts, " + title, fontsize=10)
    save_png(fig, out / f"{NAME}_planted.png")
    write_csv(out / f"{NAME}_alignment.csv", alignment_columns(spectra, width))
    write_csv(out / f"{NAME}_vv.csv", vv_columns(spectra))
    write_csv(out / f"{NAME}_planted.csv", planted_columns(planted))
    summary = {"gaussian": gaussian_summary(spectra, width),
               "planted": [planted_summary(case) for case in planted],
               "per_class_lambda_inf": references, "count_rule": "largest ratio gap"}
    summary["seconds"] = clock.report(NAME, cfg["mode"])
    summary["cpu_seconds"] = clock.cpu()
    vv = vv_columns(spectra)
    write_summary(out, cfg, summary, spectra["t"],
                  np.stack([vv[k] for k in vv if k != "t"], axis=1), [k for k in vv if k != "t"])


if __name__ == "__main__":
    main()
