"""Re-measure the README's timing and speed-up claims and print them beside the README's values.

Each claim is one command the README names (a benchmark, a figure script in the mode the
README quotes, a ``hierarchy`` run of a shipped config); the command runs in a fresh
process, its own printed figures are read back (``Lanczos snapshot 10.9 s``, ``took 19.0 s``)
or, for the ``hierarchy`` commands, its wall time is taken, and the row shows what the
README says next to what was measured now, with the run's CPU seconds (on a shared machine
the wall time is noisy; the CPU time says what the run costs) and the machine's load
(``os.getloadavg``, 1-minute average) before and after it: quote a timing with its CPU time
and its load, as timings on loaded cores read 3-8x slower.

Usage::

    python tools/readme_numbers.py               # the claims that take under a minute or so
    python tools/readme_numbers.py --all         # also the long ones (bench_spectra, studies)
    python tools/readme_numbers.py --only bench-gmm,main-study
    python tools/readme_numbers.py --list

Nothing here is a test: the numbers are machine-dependent. The README's figures were taken
from this script's output (2 shared cores, see each row's CPU column).
"""
import argparse
import dataclasses
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = REPO / "tools" / "configs"


#: a case's header line in tools/bench_network.py's part 3, its optional lines of the engine's
#: baselines (uniform rules, one thread), then the start of its solve line
SOLVED = r": .*\n(?:  the .*\n)*  solve to"
#: the coarse re-solve's change of the states in ``hierarchy solve``'s certification line
#: (present where rows ran to their highest order short of their target)
COARSE_MOVED = r"one order lower .*?the states moved by ([0-9.e+-]+)"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A README claim: its name, what the README says, how to re-measure it."""

    name: str
    readme: str
    command: tuple
    patterns: tuple = ()   # (label, regex with one group: a number in the command's output)
    slow: bool = False     # takes minutes: only with --all
    wall: bool = False     # report the command's wall time (a ``hierarchy`` run)
    ratios: tuple = ()     # (label, numerator label, denominator label) of measured rows


def hierarchy(*args):
    return (sys.executable, "-m", "hierarchy", *args)


def tool(name, *args):
    return (sys.executable, str(REPO / "tools" / name), *args)


def took(name):
    return ((f"{name} took (s)", r"took ([0-9.]+) s"),
            (f"{name} CPU (s)", r"s \(after imports; ([0-9.]+) s CPU\)"))


#: what ``extrapolation_honesty.py --degree N`` prints of the estimator as it is
SHORT_LADDER = (("vouched certified at 1e-4", r"TOTAL +vouched +([0-9]+)"),
                ("vouched over 10x at 1e-4", r"TOTAL +vouched +[0-9]+ +([0-9]+)"))
WORST_RATIO = ("worst true/claimed", r"claimed error of a certified point.*: vouched ([0-9.e+-]+)")

CLAIMS = (
    Claim("extrapolation-honesty", "at the default tolerance 1e-4: 0 of 1,296 certified points "
          "over 10x their claims, 3 of 1,331 without the check against the estimate without "
          "the two newest degrees, 234 of 1,589 without any rule; over ten times the tolerance "
          "0 against 118; at 1e-3 and 1e-2: 0 of 1,585 and 0 of 1,944; worst true/claimed 2.5 "
          "(137 without the check)",
          tool("extrapolation_honesty.py"),
          (("vouched certified at 1e-4", r"TOTAL +vouched +([0-9]+)"),
           ("no-check certified at 1e-4", r"TOTAL +no-check +([0-9]+)"),
           ("no-check over 10x at 1e-4", r"TOTAL +no-check +[0-9]+ +([0-9]+)"),
           ("worst true/claimed", r"claimed error of a certified point.*: vouched ([0-9.e+-]+)"),
           ("worst true/claimed, no-check", r"claimed error of a certified point.*no-check "
                                            r"([0-9.e+-]+)"),
           ("vouched over 10x at 1e-4", r"TOTAL +vouched +[0-9]+ +([0-9]+)"),
           ("vouched over 10 tol at 1e-4", r"TOTAL +vouched +[0-9]+ +[0-9]+ +[0-9]+ +([0-9]+)"),
           ("unvouched certified at 1e-4", r"TOTAL +unvouched +([0-9]+)"),
           ("unvouched over 10x at 1e-4", r"TOTAL +unvouched +[0-9]+ +([0-9]+)"),
           ("unvouched over 10 tol at 1e-4",
            r"TOTAL +unvouched +[0-9]+ +[0-9]+ +[0-9]+ +([0-9]+)"),
           ("vouched certified at 1e-3", r"TOTAL +vouched +(?:[0-9]+ +){4}\| +([0-9]+)"),
           ("vouched over 10x at 1e-3", r"TOTAL +vouched +(?:[0-9]+ +){4}\| +[0-9]+ +([0-9]+)"),
           ("vouched certified at 1e-2",
            r"TOTAL +vouched +(?:[0-9]+ +){4}\| +(?:[0-9]+ +){4}\| +([0-9]+)"),
           ("vouched over 10x at 1e-2",
            r"TOTAL +vouched +(?:[0-9]+ +){4}\| +(?:[0-9]+ +){4}\| +[0-9]+ +([0-9]+)"))),
    Claim("extrapolation-honesty-degree-8", "degrees 2..8: 0 of 915 certified points over 10x "
          "their claims at 1e-4; worst true/claimed 1.5 (31 before the claims were raised to "
          "the earlier times)", tool("extrapolation_honesty.py", "--degree", "8"),
          SHORT_LADDER + (WORST_RATIO,)),
    Claim("extrapolation-honesty-degree-6", "degrees 2..6: 0 of 478 over 10x at 1e-4; worst 1.1",
          tool("extrapolation_honesty.py", "--degree", "6"),
          SHORT_LADDER + (WORST_RATIO,)),
    Claim("extrapolation-honesty-degree-4", "degrees 2..4: 0 of 113 over 10x at 1e-4 (60 when a "
          "settled word's claim was exactly 0)",
          tool("extrapolation_honesty.py", "--degree", "4"),
          SHORT_LADDER),
    Claim("moments-memo", "8,000 degree-8 untied words at d = 400: 12.8-13.0 s against "
          "26.5-27.7 s with the old memo (ratio 2.04-2.15); the field's RK45 solve 0.20-0.26 s, "
          "158 evaluations",
          tool("bench_moments.py", "--first", "30000", "--solve"),
          (("RK45 solve (s)", r"limit start, RK45: ([0-9.]+) s"),
           ("RK45 evaluations", r"limit start, RK45: [0-9.]+ s, ([0-9]+) evaluations"),
           ("memo as it is (s)", r"memo as it is: +([0-9.]+) s"),
           ("cleared when full (s)", r"memo cleared when full: +([0-9.]+) s"),
           ("ratio", r"ratio old/new ([0-9.]+)"))),
    Claim("as-network", "gmm_binary.toml at snr = 10: hand-built 0.93 s, exit 3; its network "
          "form certified in 1.6 s", tool("bench_as_network.py"),
          (("hand-built (s)", r"hand-built gmm-binary, snr = 10: ([0-9.]+) s"),
           ("hand-built exit", r"hand-built gmm-binary.*exit ([0-9]+)"),
           ("network form (s)", r"its network form: ([0-9.]+) s"),
           ("network form exit", r"its network form: .*exit ([0-9]+)"))),
    Claim("sparse-grid", "the 10-class preset's moments on a level-5 sparse grid (71,785 nodes, "
          "0.5-0.6 s a call): 1.7e-9 at t = 0, 2.1e-8 at t = 10, 6.6e-6 at t = 50; target 1e-9",
          tool("bench_sparse_grid.py"),
          (("level 5 at t = 0", r"t = 0:(?:.*\n)*?  level 5:.*difference ([0-9.e+-]+)"),
           ("level 5 at t = 10", r"t = 10:(?:.*\n)*?  level 5:.*difference ([0-9.e+-]+)"),
           ("level 5 at t = 50", r"t = 50:(?:.*\n)*?  level 5:.*difference ([0-9.e+-]+)"),
           ("level 5 ms a call at t = 50", r"t = 50:(?:.*\n)*?  level 5: +[0-9,]+ nodes, +"
                                            r"([0-9.]+) ms"))),
    Claim("main-study", "about 20 s cold, 8-12 s warm (quiet cores); 27-32 s warm, shared cores",
          hierarchy("--quiet", "study", "--out", "{out}"), wall=True),
    Claim("bench-gmm", "binary SGD 200 runs 43-85 s, 3.8x-5.6x faster than one at a time; "
                       "XOR ODE T=150 7.7-14 s (lambda=inf), 8.9-11.5 s (lambda=1000)",
          tool("bench_gmm.py"),
          (("SGD 200 runs (s)", r"binary SGD 200 runs N=250 T=100: +([0-9.]+) s"),
           ("one at a time (s)", r"one run at a time \(scaled from \d+\) +([0-9.]+) s"),
           ("one at a time / ensemble", r"scaled from \d+\) +[0-9.]+ s, ratio +([0-9.]+)"),
           ("XOR ODE lambda=inf (s)", r"XOR ODE K=4 lambda=inf +T=150: +([0-9.]+) s"),
           ("XOR ODE lambda=1000 (s)", r"XOR ODE K=4 lambda=1000 +T=150: +([0-9.]+) s"))),
    Claim("bench-spectra", "batched Lanczos 8.3 s / 34 s; dense 7.1x / 7.6x slower; "
                           "per-block eigsh 2.4x slower",
          tool("bench_spectra.py", "--eigsh-blocks", "20"),  # every block timed, not scaled
          (("Lanczos snapshot (s)", r"Lanczos snapshot +([0-9.]+) s"),
           ("dense form + eigh (s)", r"dense \(form \+ eigh\) +([0-9.]+) s"),
           ("dense / Lanczos", r"ratio dense / Lanczos +([0-9.]+)"),
           ("per-block eigsh, snapshot (s)", r"([0-9.]+) s per snapshot scaled")),
          slow=True, ratios=(("per-block eigsh / Lanczos", "per-block eigsh, snapshot (s)",
                              "Lanczos snapshot (s)"),)),
    Claim("figure-spectra-kgmm-quick", "--quick: 38-302 s (17-20 s CPU)", tool("figure_spectra_kgmm.py", "--quick",
                                                             "--out", "{out}"),
          took("figure_spectra_kgmm")),
    Claim("figure-spectra-xor-quick", "--quick: 115 s (73 s CPU)", tool("figure_spectra_xor.py", "--quick",
                                                             "--out", "{out}"),
          took("figure_spectra_xor"), slow=True),
    *(Claim(f"figure-bgj-{name}-quick", "quick: 20 s pca, 38 s tensor, 98-190 s binary, "
                                        "115 s xor (14 / 18 / 42-45 / 64 s CPU)",
            tool(f"figure_bgj_{name}.py", "--quick", "--out", "{out}"), took(f"figure_bgj_{name}"))
      for name in ("pca", "tensor", "binary", "xor")),
    Claim("pca-solve", "4.8 s (2.0 s CPU, load 3)", hierarchy("--quiet", "solve", str(CONFIGS / "spiked_tensor.toml"),
                                           "--out", "{out}"), wall=True),
    Claim("pca-sgd", "33 s for 50 runs at n = 2000 (23 s CPU)",
          hierarchy("--quiet", "sgd", str(CONFIGS / "spiked_tensor.toml"), "--out", "{out}"),
          wall=True),
    Claim("multiclass-solve", "solve to t = 50: 8.2 s (3.3 s CPU, load 3.3), exit 3",
          hierarchy("--quiet", "solve", str(CONFIGS / "gmm_multiclass.toml"), "--out", "{out}"),
          wall=True),
    Claim("network-joint-command-time",
          "network_mixture_binary.toml (the joint engine) warm: no sympy imported on the warm "
          "run; the derivation cache (the joint engine's plan) saves 0.32-0.40 s CPU",
          tool("bench_command_time.py", str(CONFIGS / "network_mixture_binary.toml"),
               "--repeat", "3"),
          (("derivation cache saves (s CPU)", r"the cache saves (-?[0-9.]+) s CPU"),
           ("sympy imported on the warm run", r"sympy imported: (yes|no) with the derivation"),
           ("bench's own load, start", r"\Aload average ([0-9.]+)"))),
    Claim("network-command-time",
          "committee_erf.toml warm (this package's bytecode compiled): 0.75-0.82 s against "
          "0.39-0.44 s for import numpy, scipy.integrate (median of the rounds' own wall "
          "ratios 1.87 and 1.95, target 2; 2.13-2.48 with the figure drawn in the command's "
          "own process; 1.98-2.31 compiling this package from source; CPU ratio 2.06-2.09); "
          "parts: imports 0.53, derivation 0.01, integration 0.10, figure 0.44 s CPU; no "
          "sympy imported on the warm run",
          tool("bench_command_time.py", "--repeat", "7"),
          (("bare import numpy, scipy CPU (s)", r"bare python .*\(CPU ([0-9.]+) s\)"),
           ("solve warm CPU (s)", r"\(warm\): .*; CPU ([0-9.]+) s, ratio"),
           ("CPU ratio solve / bare", r"\(warm\): .*; CPU [0-9.]+ s, ratio ([0-9.]+)"),
           ("wall ratio solve / bare", r"\(warm\): [0-9.]+ s, ratio ([0-9.]+)"),
           ("wall ratio, median of the rounds' own",
            r"the command / the baseline of its round, round by round: median ([0-9.]+)"),
           ("wall ratio, figure in the command's process",
            r"own process \(HIERARCHY_FIGURE_PROCESS=0\): [0-9.]+ s, ratio ([0-9.]+)"),
           ("CPU ratio, figure in the command's process",
            r"own process \(HIERARCHY_FIGURE_PROCESS=0\): .*; CPU [0-9.]+ s, ratio ([0-9.]+)"),
           ("wall ratio, this package compiled from source",
            r"compiled from source in every run .*: [0-9.]+ s, ratio ([0-9.]+)"),
           ("part: imports + config CPU (s)", r"imports CPU ([0-9.]+) s"),
           ("part: derivation CPU (s)", r"derivation CPU ([0-9.]+) s"),
           ("part: integration CPU (s)", r"integration CPU ([0-9.]+) s"),
           ("part: figure CPU (s)", r"figure CPU ([0-9.]+) s"),
           ("derivation cache saves (s CPU)", r"the cache saves (-?[0-9.]+) s CPU"),
           ("sympy imported on the warm run", r"sympy imported: (yes|no) with the derivation"),
           ("figure again: constrained (s CPU)", r"constrained layout ([0-9.]+) s CPU"),
           ("figure again: PanelFigure (s CPU)", r"PanelFigure ([0-9.]+) s CPU"),
           ("term table K = M = 8: derived (s CPU)", r"term table erf K = M = 8 .*derived "
                                                     r"([0-9.]+) s CPU"),
           ("term table K = M = 8: read (s CPU)", r"term table erf K = M = 8 .*cache "
                                                  r"([0-9.]+) s CPU"),
           ("bench's own load, start", r"\Aload average ([0-9.]+)"))),
    Claim("network-solve", "committee_erf.toml (K = M = 3, alpha to 300), warm: the wall and "
                           "CPU time of the plain command (bench_command_time gives the parts)",
          hierarchy("--quiet", "solve", str(CONFIGS / "committee_erf.toml"), "--out", "{out}"),
          wall=True),
    Claim("figure-network-relu", "the relu ODE solve takes 0.44 s (0.9-1.2 s earlier)",
          tool("figure_network_relu.py", "--quick", "--out", "{out}"),
          (("relu ODE solve (s)", r"ODE solve: ([0-9.]+) s"),)),
    Claim("figure-network-plateau", "907 s on the shared cores (full mode)",
          tool("figure_network_plateau.py", "--out", "{out}"),
          (("figure_network_plateau (s)", r"wrote .* \(([0-9]+) s\)"),), slow=True),
    Claim("bench-network", "field 16.7x at K = M = 8 (0.433 ms against 7.218 ms); SGD ensemble "
                           "24,842 against 3,298 samples/s, 7.5x (14.3-16.8x, 4.2-7.5x); relu/erf "
                           "K = M = 3 10.6 ms per field call against 529 ms (3.9-4.3 ms in the --only relu "
                           "runs), solve to alpha = 300 8.0 s CPU (7.9-10.3 s with the coarse "
                           "re-solve, moved 1.4e-9), certified; tanh K = M = 3 80 ms per field call, 4.3x "
                           "faster than the uniform rules, 1.25x than one thread, 1.65x than "
                           "without the mirror, at the steep state 0.90 s split at the turns, "
                           "stated 3.9e-13, the trapezoid alone 1.8e-7 (ratio 0.82); tanh "
                           "K = M = 1 stated error 1.2e-13, solve 2.6 s CPU, certified; relu/erf "
                           "K = M = 2 solve 4.4 s CPU, certified (coarse re-solve moved 1.2e-9); logistic K = 2 42 ms per field "
                           "call, 1.99x faster than one thread, 1.76x than without the mirror, "
                           "solve 101 s wall, not certified (the coarse re-solve)",
          tool("bench_network.py"),
          (("field K = M = 8 compiled (ms)", r"field K = M = 8 .*compiled ([0-9.]+) ms"),
           ("field K = M = 8 numpy (ms)", r"field K = M = 8 .*numpy closed forms ([0-9.]+) ms"),
           ("field K = M = 8 compiled / numpy", r"field K = M = 8 .* ratio ([0-9.]+)"),
           ("SGD ensemble (samples/s)", r"SGD K = M = 2.* runs ([0-9,]+) samples/s"),
           ("SGD per-run loop (samples/s)", r"per-run numpy loop ([0-9,]+) samples/s"),
           ("SGD ensemble / per-run loop", r"SGD K = M = 2.* ratio ([0-9.]+)"),
           ("relu/erf K = M = 3 field call (ms)", r"relu/erf K = M = 3 mse: field call new "
                                                  r"([0-9.]+) ms"),
           ("relu/erf K = M = 3 old field call (ms)", r"relu/erf K = M = 3 mse: .*old "
                                                      r"([0-9.]+) ms"),
           ("relu/erf K = M = 3 solve CPU (s)", r"relu/erf K = M = 3 mse" + SOLVED + r" alpha "
                                                r"= 300 \(eta = [^)]*\): [0-9.]+ s wall, "
                                                r"([0-9.]+) s CPU"),
           ("relu/erf K = M = 3 solve wall (s)", r"relu/erf K = M = 3 mse" + SOLVED + r" "
                                                 r"alpha = 300 \(eta = [^)]*\): ([0-9.]+) s "
                                                 r"wall"),
           ("relu/erf K = M = 3 certified", r"relu/erf K = M = 3 mse" + SOLVED + r" alpha "
                                            r"= 300 .*certified (\w+)"),
           ("relu/erf K = M = 3 coarse re-solve moved", r"relu/erf K = M = 3 mse" + SOLVED
            + r" alpha = 300 .*coarse re-solve moved the states by ([0-9.e+-]+)"),
           ("tanh K = M = 3 field call (ms)", r"tanh/tanh K = M = 3 mse: field call new "
                                             r"([0-9.]+) ms"),
           ("tanh K = M = 3 uniform rules / per-level rules",
            r"tanh/tanh K = M = 3 mse: .*\n  the engine's uniform rules .*ratio uniform/new "
            r"([0-9.]+)"),
           ("tanh K = M = 3 one thread / every CPU",
            r"tanh/tanh K = M = 3 mse: .*\n(?:  .*\n)*?  the same engine on one thread: "
            r".*threads ([0-9.]+)"),
           ("tanh K = M = 3 without the mirror / with",
            r"tanh/tanh K = M = 3 mse: .*\n(?:  .*\n)*?  the engine without the mirror "
            r".*ratio without/with ([0-9.]+)"),
           ("tanh K = M = 3 steep state, split at the turns (ms)",
            r"tanh/tanh K = M = 3 mse: .*\n(?:  .*\n)*?  the engine at a steep state .*: split "
            r"at the turns ([0-9.]+) ms"),
           ("tanh K = M = 3 steep state, split: stated error",
            r"tanh/tanh K = M = 3 mse: .*\n(?:  .*\n)*?  the engine at a steep state .*: split "
            r"at the turns [0-9.]+ ms, stated error ([0-9.e+-]+)"),
           ("tanh K = M = 3 steep state, trapezoid alone: stated error",
            r"tanh/tanh K = M = 3 mse: .*\n(?:  .*\n)*?  the engine at a steep state .*the "
            r"trapezoid alone [0-9.]+ ms, stated error ([0-9.e+-]+)"),
           ("tanh K = M = 3 steep state, trapezoid / split",
            r"tanh/tanh K = M = 3 mse: .*\n(?:  .*\n)*?  the engine at a steep state .*ratio "
            r"trapezoid/split ([0-9.]+)"),
           ("logistic K = 2 field call (ms)", r"erf/erf K = M = 2 logistic: field call new "
                                              r"([0-9.]+) ms"),
           ("logistic K = 2 one thread / every CPU",
            r"erf/erf K = M = 2 logistic: .*\n(?:  .*\n)*?  the same engine on one thread: "
            r".*threads ([0-9.]+)"),
           ("logistic K = 2 without the mirror / with",
            r"erf/erf K = M = 2 logistic: .*\n(?:  .*\n)*?  the engine without the mirror "
            r".*ratio without/with ([0-9.]+)"),
           ("logistic K = 2 solve wall (s)", r"erf/erf K = M = 2 logistic" + SOLVED + r" alpha "
                                             r"= 300 \(eta = [^)]*\): ([0-9.]+) s wall"),
           ("logistic K = 2 certified", r"erf/erf K = M = 2 logistic" + SOLVED + r" alpha = "
                                        r"300 .*certified (\w+)"),
           ("tanh K = M = 1 stated field error", r"tanh/tanh K = M = 1 mse: field call new "
                                                 r"[0-9.]+ ms \(compiled, stated error "
                                                 r"([0-9.e+-]+)\)"),
           ("tanh K = M = 1 solve CPU (s)", r"tanh/tanh K = M = 1 mse" + SOLVED + r" alpha = "
                                           r"300 \(eta = [^)]*\): [0-9.]+ s wall, ([0-9.]+) s CPU"),
           ("tanh K = M = 1 certified", r"tanh/tanh K = M = 1 mse" + SOLVED + r" alpha = 300 "
                                        r".*certified (\w+)"),
           ("relu/erf K = M = 2 solve CPU (s)", r"relu/erf K = M = 2 mse" + SOLVED + r" alpha "
                                                r"= 300 \(eta = [^)]*\): [0-9.]+ s wall, "
                                                r"([0-9.]+) s CPU"),
           ("relu/erf K = M = 2 certified", r"relu/erf K = M = 2 mse" + SOLVED + r" alpha = "
                                            r"300 .*certified (\w+)"),
           ("relu/erf K = M = 2 coarse re-solve moved", r"relu/erf K = M = 2 mse" + SOLVED
            + r" alpha = 300 .*coarse re-solve moved the states by ([0-9.e+-]+)")),
          slow=True),
    Claim("network-tanh-solve", "committee_tanh.toml (tanh K = M = 3, default tolerances): "
                                "certified in 40 min (48 min at load 2-3), integration 702 "
                                "s, re-solve moved the states by 3.4e-12, field error "
                                "8.8e-13, no coarse re-solve",
          hierarchy("solve", str(CONFIGS / "committee_tanh.toml"), "--out", "{out}"),
          (("field error", r"largest quadrature error of the field ([0-9.e+-]+)"),
           ("re-solve moved the states by", r"moved the states by ([0-9.e+-]+)"),
           ("coarse re-solve moved the states by", COARSE_MOVED),
           ("certified", r"\((certified) at every output time")),
          slow=True, wall=True),
    Claim("bench-engine-turns", "docs/network.md: tanh K = M = 3 at Q_kk = 9.8, split 1.33 s "
                                "stated 2.4e-11, trapezoid 0.89 s stated 5.5e-7; honesty rows "
                                "missed: trapezoid 4, width 0.7 none",
          tool("bench_engine_turns.py", "--widths", "0.7"),
          (("Q_kk 9.8: split (s)", r"Q_kk up to 9\.\d+: split at the turns ([0-9.]+) s"),
           ("Q_kk 9.8: split stated error", r"Q_kk up to 9\.\d+: .*?stated error ([0-9.e+-]+)"),
           ("Q_kk 9.8: trapezoid stated error", r"Q_kk up to 9\.\d+: .*trapezoid alone "
                                                r"[0-9.]+ s \(stated error ([0-9.e+-]+)"),
           ("honesty rows missed, trapezoid", r"the trapezoid alone: ([0-9]+) of"),
           ("honesty rows missed, width 0.7", r"GAUSS_TURN_WIDTH 0\.7: ([0-9]+) of")),
          slow=True),
    Claim("bench-merge-check", "the merge check (merged_fields) costs 0.1% of a tanh "
                               "K = M = 3 call",
          tool("bench_merge_check.py"),
          (("with the check (ms)", r"with the check: ([0-9.]+) ms"),
           ("without (ms)", r"without: ([0-9.]+) ms"),
           ("the check itself (ms)", r"the check itself: ([0-9.]+) ms"),
           ("the check, % of the call", r"ms a call, ([0-9.]+)% of the call"))),
    Claim("network-structured-logistic", "structured_logistic.toml (logistic on a power law, "
                                         "joint engine): certified, field error 7.5e-11, "
                                         "154 s wall at load 3 with the coarse re-solve",
          hierarchy("solve", str(CONFIGS / "structured_logistic.toml"), "--out", "{out}"),
          (("largest stated field error", r"largest quadrature error of the field ([0-9.e+-]+)"),
           ("coarse re-solve moved the states by", COARSE_MOVED),
           ("certified", r"(certified at every output time|NOT CERTIFIED)"),),
          wall=True, slow=True),
    Claim("network-structured-qmc", "structured_logistic_qmc.toml (the same on randomised "
                                    "QMC): 3.8 s wall, 4.4 s CPU (load 2.5), stated field "
                                    "error 1.47, NOT CERTIFIED, exit 3",
          hierarchy("solve", str(CONFIGS / "structured_logistic_qmc.toml"), "--out", "{out}"),
          (("largest stated field error", r"largest quadrature error of the field ([0-9.e+-]+)"),
           ("certified", r"(certified at every output time|NOT CERTIFIED)"),),
          wall=True),
    Claim("network-xor-preset", "the XOR preset (lambda = 1000) solved to t = 150: wall time, "
                                "certified or not",
          hierarchy("solve", str(CONFIGS / "network_mixture_xor.toml"), "--out", "{out}"),
          (("largest stated field error", r"largest quadrature error of the field ([0-9.e+-]+)"),
           ("coarse re-solve moved the states by", COARSE_MOVED),
           ("certified", r"(certified at every output time|NOT CERTIFIED)"),),
          wall=True, slow=True),
    Claim("bench-network-presets", "generic field slower per call than the hand-built one: "
                                   "XOR K = 4 at lambda = 10 2506x, at lambda = inf 13x; "
                                   "k = 4 at lambda = 10 193x; 10-class at lambda = inf 9x",
          tool("bench_network_presets.py"),
          (("XOR K=4 snr=10 generic / hand", r"xor K=4 snr=10(?:\.0)?: .*\(x([0-9]+)\)"),
           ("XOR K=4 snr=inf generic / hand", r"xor K=4 snr=inf: .*\(x([0-9]+)\)"),
           ("k=4 snr=10 generic / hand", r"gmm-multiclass k=4 snr=10(?:\.0)?: .*\(x([0-9]+)\)"),
           ("10-class snr=inf generic / hand", r"gmm-multiclass k=10 snr=inf: .*\(x([0-9]+)\)")),
          slow=True),
    Claim("network-spectra", "16 of 20 compared; within 15 % (largest 0.149)",
          tool("network_spectra_table.py", "--out", "{out}/network_spectra.png"),
          (("largest |measured/predicted - 1|", r"largest \|measured/predicted - 1\| = "
            r"([0-9.]+)"),)),
    Claim("network-study", "5 of 8 within, 7 of 8 within 2 se, 8 noise-limited; 18 min",
          hierarchy("study", str(CONFIGS / "committee_study.toml"), "--out", "{out}"),
          (("slopes within the target", r"\(error O\(n\^-1/2\)\): ([0-9]+) of"),
           ("within 2 standard errors", r"within 2 standard errors of it: ([0-9]+) of")),
          wall=True, slow=True),
    Claim("gmm-binary-study", "41 s; 53 s on shared cores (34 s CPU)",
          hierarchy("--quiet", "study", str(CONFIGS / "gmm_binary.toml"), "--out", "{out}"),
          wall=True, slow=True),
    Claim("gmm-xor-study", "22 min wall, 14.5 min CPU (load 4-6); 6.2 min quieter",
          hierarchy("--quiet", "study", str(CONFIGS / "gmm_xor.toml"), "--out", "{out}"),
          wall=True, slow=True),
)


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(claim, scratch):
    """Run ``claim``'s command; returns ``[(label, value text)]`` and the output."""
    out = scratch / claim.name
    shutil.rmtree(out, ignore_errors=True)
    command = [part.replace("{out}", str(out)) for part in claim.command]
    load = os.getloadavg()[0]
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    text = done.stdout + done.stderr
    rows = []
    if done.returncode not in (0, 3):
        rows.append(("exit status", f"{done.returncode} (failed: see the output below)"))
    for label, pattern in claim.patterns:
        found = re.search(pattern, text, re.MULTILINE)
        rows.append((label, found.group(1) if found else "not printed"))
    values = dict(rows)
    for label, top, bottom in claim.ratios:
        try:
            rows.append((label, f"{float(values[top]) / float(values[bottom]):.2f}"))
        except (KeyError, ValueError, ZeroDivisionError):
            rows.append((label, "not measured"))
    if claim.wall:
        rows.append(("wall (s)", f"{wall:.1f}"))
    rows.append(("process CPU (s)", f"{cpu:.1f}"))
    rows.append(("load (1-min average) before, after", f"{load:.1f}, {os.getloadavg()[0]:.1f} "
                                                      f"on {os.cpu_count()} cores"))
    return rows, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="also the claims that take minutes")
    parser.add_argument("--only", default="", help="comma-separated claim names")
    parser.add_argument("--list", action="store_true", help="list the claims and exit")
    parser.add_argument("--verbose", action="store_true", help="print each command's output")
    args = parser.parse_args()
    if args.list:
        for claim in CLAIMS:
            print(f"{claim.name:<28} {'slow  ' if claim.slow else '      '}README: {claim.readme}")
        return 0
    wanted = {name for name in args.only.split(",") if name}
    unknown = wanted - {claim.name for claim in CLAIMS}
    if unknown:
        parser.error(f"--only: unknown claim {sorted(unknown)[0]!r} (see --list)")
    chosen = [claim for claim in CLAIMS
              if (claim.name in wanted if wanted else args.all or not claim.slow)]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="readme-numbers-") as scratch:
        for claim in chosen:
            rows, text = measure(claim, pathlib.Path(scratch))
            print(f"\n{claim.name}\n  README: {claim.readme}", flush=True)
            for label, value in rows:
                print(f"  {label:<32} {value}", flush=True)
            if args.verbose:
                print("  | " + "\n  | ".join(text.strip().splitlines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
