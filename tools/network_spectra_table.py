"""The soft committee machine's Hessian and G outliers along SGD, measured against predicted.

Runs ``hierarchy sgd tools/configs/committee_spectra.toml`` (erf, ``K = M = 2``, a trained
second layer, ``N = 200``, ``M~ = 40 N`` test samples; about 20 s) unless ``--from DIR``
names a finished run, then prints, per block and snapshot time, run 0's top eigenvalue, the
population prediction along the ODE with its quadrature standard error, and the measured and
predicted bulk edges; and draws ``tools/figures/network_spectra.png`` (measured solid,
predicted dashed). A block whose predicted outlier lies below the measured bulk edge is
marked ``(in bulk)``: at this ``M~`` its measured top eigenvalue is a bulk value, and the
comparison says nothing. The prediction is the ``M~ -> infinity`` value (no finite-sample
outlier shift), so at ``t = 0``, where run 0 realises the ODE's start exactly, the gap is the
test set's sampling.

Usage::

    python tools/network_spectra_table.py [--from DIR] [--out FIGURE.png]
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIG = REPO / "tools" / "configs" / "committee_spectra.toml"
FIGURE = REPO / "tools" / "figures" / "network_spectra.png"
BLOCKS = (("G", "W1"), ("G", "W2"), ("hessian", "W1"), ("hessian", "v"), ("G", "v"))


def run(out_dir):
    """``hierarchy sgd`` of the config into ``out_dir``."""
    subprocess.run([sys.executable, "-m", "hierarchy", "--quiet", "sgd", str(CONFIG), "--out",
                    str(out_dir)], check=True)


def rows(spectra):
    """``(matrix, block, t, measured, predicted, error, edge, predicted bulk)`` per snapshot."""
    out = []
    for matrix, block in BLOCKS:
        name = f"{matrix}_{block}"
        for j, t in enumerate(spectra["t"]):
            out.append((matrix, block, float(t), spectra[name + "_eigenvalues"][j, 0],
                        spectra[name + "_outliers_predicted"][j, 0],
                        spectra[name + "_outliers_predicted_error"][j, 0],
                        spectra[name + "_bulk_edge"][j], spectra[name + "_bulk_predicted"][j]))
    return out


def print_table(table):
    print(f"{'matrix':>8} {'block':>5} {'t':>5} {'measured':>10} {'predicted':>10} "
          f"{'pred. se':>9} {'rel. diff':>9} {'edge':>8} {'bulk pred.':>10}")
    for matrix, block, t, measured, predicted, error, edge, bulk in table:
        inside = block != "v" and predicted < edge
        note = " (in bulk)" if inside else ""
        print(f"{matrix:>8} {block:>5} {t:>5g} {measured:>10.4f} {predicted:>10.4f} "
              f"{error:>9.1e} {measured / predicted - 1:>+9.3f} {edge:>8.4f} {bulk:>10.4f}"
              f"{note}")
    compared = [r for r in table if r[1] == "v" or r[4] >= r[6]]
    worst = max(abs(r[3] / r[4] - 1) for r in compared)
    print(f"outliers compared (predicted above the measured bulk edge): {len(compared)} of "
          f"{len(table)}; largest |measured/predicted - 1| = {worst:.3f}")


def draw(spectra, path):
    from hierarchy.core.plotting import new_figure, save_figure
    fig, axes = new_figure(1, len(BLOCKS), figsize=(3.0 * len(BLOCKS), 3.2))
    t = spectra["t"]
    for ax, (matrix, block) in zip(np.ravel(axes), BLOCKS):
        name = f"{matrix}_{block}"
        ax.plot(t, spectra[name + "_eigenvalues"][:, 0], "o-", color="C0", label="run 0")
        ax.plot(t, spectra[name + "_outliers_predicted"][:, 0], "s--", color="C1",
                label="predicted from the ODE")
        if block != "v":
            ax.plot(t, spectra[name + "_bulk_edge"], ":", color="0.4", label="bulk edge")
        inside = block != "v" and np.all(spectra[name + "_outliers_predicted"][:, 0]
                                         < spectra[name + "_bulk_edge"])
        ax.set(title=f"{'Hessian' if matrix == 'hessian' else 'G'}, block {block}"
               + ("\n(predicted outlier inside the bulk)" if inside else ""),
               xlabel=r"$\alpha$")
        ax.grid(alpha=0.3)
    np.ravel(axes)[0].legend(fontsize=7)
    fig.suptitle("erf committee K = M = 2, N = 200, 40 N test samples: top eigenvalue",
                 fontsize=10)
    save_figure(fig, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", help="a finished run's folder")
    parser.add_argument("--out", default=str(FIGURE), help="the figure's path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = pathlib.Path(args.source or scratch)
        if args.source is None:
            run(folder)
        with np.load(folder / "spectra.npz") as data:
            spectra = {key: data[key] for key in data.files}
    print_table(rows(spectra))
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    draw(spectra, args.out)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
