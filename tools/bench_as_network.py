"""A finite-snr Gaussian mixture solved by its hand-built family and by its network form.

``tools/configs/gmm_binary.toml`` at ``snr = 10`` (the ODE to ``t = 100``): ``hierarchy solve``
of the hand-built config (a QMC field: never certified, exit 3), then of the network config
that ``hierarchy show --config CONFIG --as-network`` prints (the joint engine: certified where
a cluster has at most four student fields). Each command runs in a fresh process, warm (a
first run of each fills the caches); printed: wall time, exit status, the certification, the
machine's load.

    python tools/bench_as_network.py
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HAND = ROOT / "tools" / "configs" / "gmm_binary.toml"
SNR = 10.0


def hierarchy(*args):
    return subprocess.run([sys.executable, "-m", "hierarchy", "--quiet", *args], cwd=ROOT,
                          capture_output=True, text=True)


def timed_solve(config, out):
    """``(wall seconds, exit status, summary)`` of a warm ``hierarchy solve``."""
    hierarchy("solve", str(config), "--out", str(out), "--overwrite")   # fills the caches
    start = time.perf_counter()
    done = hierarchy("solve", str(config), "--out", str(out), "--overwrite")
    wall = time.perf_counter() - start
    summary = json.loads((out / "result.json").read_text())["summary"]
    return wall, done.returncode, summary


def main():
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        hand = folder / "hand.toml"
        hand.write_text(HAND.read_text().replace('snr = "inf"', f"snr = {SNR!r}"))
        shown = hierarchy("show", "--config", str(hand), "--as-network")
        if shown.returncode != 0:
            raise SystemExit(shown.stderr.strip())
        network = folder / "network.toml"
        network.write_text(shown.stdout)
        wall, code, summary = timed_solve(hand, folder / "hand")
        print(f"hand-built gmm-binary, snr = {SNR:g}: {wall:.2f} s, exit {code}, certified "
              f"{summary['certified']}")
        wall, code, summary = timed_solve(network, folder / "network")
        error = summary["quadrature_error"]
        print(f"its network form: {wall:.2f} s, exit {code}, certified {summary['certified']} "
              f"(stated field error {error['field']:.1e}, the tighter re-solve moved the "
              f"states by {error['trajectory']:.1e})")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
