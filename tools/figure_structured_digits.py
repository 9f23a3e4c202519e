"""Real data: the covariance of scikit-learn's ``load_digits`` (8 x 8 images, N = 64), a
teacher on it, the ODE learning curve, SGD on Gaussian inputs with that covariance, and SGD on
the real images (Gaussian equivalence).

The images are standardised as ``docs/network.md`` says for ``covariance = "file"``: the mean
image is subtracted and every entry divided by one number, so that ``tr Sigma/N = 1``. The
ODE reads the standardised images through ``[model.inputs] covariance = "file"``,
``blocks = "all"`` (one block per distinct eigenvalue: 62 here, 61 non-zero ones and one
block of ``rho = 0`` holding the 3 zero eigenvalues of the constant pixels).

The network: an erf student ``K = 2`` (``v = 1``) learning an erf teacher ``M = 1`` whose
vector has the same component, 1, on every eigenvector of ``Sigma`` (so ``t_b = 1`` in every
block: a teacher isotropic in the eigenbasis), ``eta = 0.5``, no label noise, from a small
random student (entries ``N(0, 0.1^2)`` in the eigenbasis, the same for every run and for the
ODE's per-block start). SGD runs in the eigenbasis (rotation invariant): Gaussian inputs
``x = Sigma^{1/2} g``, and real inputs drawn uniformly, with replacement, from the 1797
standardised images (online SGD on the empirical law). Risks: the population risk of each
run's per-block statistics under the Gaussian law (the field's ``eg``), and for the real-data
runs also the risk on the 1797 images themselves.

scikit-learn is an optional dependency of this script only (``pip install scikit-learn``).
Writes ``structured_digits.png`` into ``--out``. Usage:
``python tools/figure_structured_digits.py [--runs 40]``
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from hierarchy.core.plotting import new_figure, save_figure
from hierarchy.models.network.gradients import SampleGradients
from hierarchy.models.network.model import network_from_config
from hierarchy.models.network.structured import StructuredSystem

STEP = 0.5
SCALE = 0.1
T_FINAL = 100.0


def standardised_digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit("this figure needs scikit-learn (pip install scikit-learn): "
                         "it reads load_digits") from None
    data = load_digits().data.astype(float)
    centred = data - data.mean(axis=0)
    sigma = centred.T @ centred / (len(data) - 1)
    return data, centred / np.sqrt(np.trace(sigma) / data.shape[1])


def network(path):
    unit = {"activation": "erf", "second_layer_values": []}
    return network_from_config({
        "model": {"data": "teacher", "loss": "mse", "ridge": 0.0,
                  "inputs": {"covariance": "file", "path": str(path), "blocks": "all"},
                  "student": {**unit, "width": 2, "second_layer": "fixed"},
                  "teacher": {**unit, "width": 1, "noise": 0.0, "overlaps": []}},
        "sgd": {"step": STEP, "step_second_layer": "step"}})


def eigenbasis(x, net):
    """Eigenvalues (descending), eigenvectors, and each eigenvalue's block of ``net``."""
    sigma = x.T @ x / (len(x) - 1)
    values, vectors = np.linalg.eigh(sigma)
    values, vectors = values[::-1], vectors[:, ::-1]
    values = np.where(values < 1e-10 * values[0], 0.0, values)
    rho = net.inputs.eigenvalues
    block = np.argmin(np.abs(values[:, None] - rho[None]), axis=1)
    if not np.allclose(values, rho[block], rtol=1e-8, atol=1e-12):
        raise RuntimeError("the eigenvalues do not match the file's blocks")
    return values, vectors, block


def block_stats(net, block, w, teacher):
    """Per-block ``q_b``, ``r_b`` (eigen coordinates ``w (runs, K, N)``), ordered like labels."""
    N = w.shape[-1]
    L = net.inputs.blocks
    counts = np.bincount(block, minlength=L).astype(float)
    out = []
    for b in range(L):
        cols = block == b
        q = np.einsum("rin,rkn->rik", w[..., cols], w[..., cols]) / counts[b]
        r = np.einsum("rin,n->ri", w[..., cols], teacher[cols]) / counts[b]
        out.append(np.concatenate([q[:, [0, 0, 1], [0, 1, 1]], r], axis=1))
    del N
    return np.stack(out, axis=1).reshape(len(w), -1)


def run_sgd(net, sampler, w0, teacher, times, rng, runs):
    """Online SGD in the eigenbasis; the per-block statistics at ``times``."""
    grads = SampleGradients(net)
    N = w0.shape[-1]
    w = np.repeat(w0[None], runs, axis=0)
    v = np.ones(2)
    steps = np.round(np.asarray(times) * N).astype(int)
    recorded, done = [], 0
    for target in steps:
        while done < target:
            x = sampler(runs, rng)
            lam = np.einsum("rkn,rn->rk", w, x) / np.sqrt(N)
            y = grads.teacher_labels((x @ teacher / np.sqrt(N))[:, None], np.zeros(runs))
            d = grads.dl_dlambda(lam, np.broadcast_to(v, (runs, 2)), y)
            w -= STEP / np.sqrt(N) * d[:, :, None] * x[:, None, :]
            done += 1
        recorded.append(w.copy())
    return recorded


def data_risk(net, w, x, teacher):
    """``(runs,)``: the risk on the images themselves (eigen coordinates ``x``)."""
    grads = SampleGradients(net)
    N = x.shape[1]
    y = grads.teacher_labels((x @ teacher / np.sqrt(N))[:, None], 0.0)
    risks = []
    for run in w:
        lam = x @ run.T / np.sqrt(N)
        risks.append(float(np.mean(grads.loss(lam[None], np.ones(2), y[None]))))
    return np.array(risks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--out", default=str(Path(__file__).parent / "figures"))
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    _, x = standardised_digits()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "digits.npy"
        np.save(path, x)
        net = network(path)
    values, vectors, block = eigenbasis(x, net)
    N = x.shape[1]
    print(f"digits: {len(x)} images, N = {N}; {net.inputs.blocks} blocks; rho from "
          f"{values[0]:.3f} to {values[values > 0][-1]:.2e} (and {np.sum(values == 0)} zero)")
    system = StructuredSystem(net)
    rng = np.random.default_rng(0)
    teacher = np.ones(N)                                   # 1 on every eigenvector: t_b = 1
    w0 = SCALE * rng.standard_normal((2, N))
    start = block_stats(net, block, w0[None], teacher)[0]
    times = np.linspace(0, T_FINAL, 41)
    clock = time.perf_counter()
    ode = solve_ivp(lambda t, u: system.rhs(u), (0, T_FINAL), start, t_eval=times,
                    rtol=1e-8, atol=1e-10)
    ode_eg = np.array([system.eg(u) for u in ode.y.T])
    print(f"ODE: {time.perf_counter() - clock:.1f} s; eg(0) = {ode_eg[0]:.4f}, "
          f"eg(20) = {np.interp(20, times, ode_eg):.4f}, eg({T_FINAL:g}) = {ode_eg[-1]:.4f}")
    eigen_x = x @ vectors                                  # real images, eigen coordinates
    root = np.sqrt(values)
    samplers = {
        "gaussian": lambda runs, r: root * r.standard_normal((runs, N)),
        "digits": lambda runs, r: eigen_x[r.integers(len(eigen_x), size=runs)],
    }
    fig, axes = new_figure(figsize=(6.6, 4.2))
    ax = axes[0, 0]
    ax.plot(times, ode_eg, color="black", lw=1.8, label=r"ODE ($N \to \infty$), digits covariance")
    for name, color in (("gaussian", "tab:blue"), ("digits", "tab:red")):
        clock = time.perf_counter()
        weights = run_sgd(net, samplers[name], w0, teacher, times, np.random.default_rng(1),
                          args.runs)
        risk = np.array([[system.eg(u) for u in block_stats(net, block, w, teacher)]
                         for w in weights])                                # (T, runs)
        mean, se = risk.mean(axis=1), risk.std(axis=1, ddof=1) / np.sqrt(args.runs)
        label = ("SGD, Gaussian inputs with that covariance" if name == "gaussian"
                 else "SGD, the standardised images")
        ax.errorbar(times, mean, yerr=se, fmt="o", ms=3, color=color,
                    label=f"{label} (N = {N}, {args.runs} runs)")
        gap = np.abs(mean[1:] - ode_eg[1:]) / ode_eg[1:]
        line = (f"SGD {name}: {time.perf_counter() - clock:.0f} s; Gaussian-law risk "
                f"eg(20) = {np.interp(20, times, mean):.4f} +- {np.interp(20, times, se):.4f}, "
                f"eg({T_FINAL:g}) = {mean[-1]:.4f} +- {se[-1]:.4f}; |SGD - ODE|/ODE median "
                f"{np.median(gap):.3f}, max {gap.max():.3f}")
        if name == "digits":
            own = data_risk(net, weights[-1], eigen_x, teacher)
            line += (f"; risk on the images at alpha = {T_FINAL:g}: {own.mean():.4f} +- "
                     f"{own.std(ddof=1) / np.sqrt(args.runs):.4f}")
            ax.plot([T_FINAL], [own.mean()], marker="s", color=color, ls="none",
                    label="SGD on the images: risk on the images")
        print(line)
    ax.set_yscale("log")
    ax.set_xlabel(r"$\alpha$")
    ax.set_ylabel(r"$\epsilon_g$")
    ax.set_title("load_digits covariance: erf K = 2, M = 1, eta = 0.5")
    ax.legend(fontsize=7)
    path = Path(args.out) / "structured_digits.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
