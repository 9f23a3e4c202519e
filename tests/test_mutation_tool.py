"""tools/mutation_check.py: its list, one caught mutation, and a drifted snippet reported."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "mutation_check.py"
#: the seven mutations of issue 23 that passed the whole suite, and the three narrow ones
ISSUE_MUTATIONS = ("gmm-corrector-halved-both-engines", "gmm-gaussian-start-R-lambda",
                   "gmm-filippov-repelling-leaves-plus", "gmm-kink-jacobian-plus-side",
                   "multiclass-jacobian-doubled", "extrapolation-no-runner-up-check",
                   "continuation-wishart-1-over-d2", "bulk-edge-weight-power",
                   "gmm-corrector-halved-numpy", "gmm-sqrt-psd-not-symmetric")


def _tool():
    spec = importlib.util.spec_from_file_location("mutation_check", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_list_prints_every_mutation_and_touches_nothing():
    done = subprocess.run([sys.executable, str(TOOL), "--list"], capture_output=True,
                          text=True, check=True, cwd=ROOT)
    tool = _tool()
    names = [m.name for m in tool.MUTATIONS]
    assert len(names) == len(set(names)) >= 30
    assert done.stdout.strip().splitlines()[-1] == f"{len(names)} mutations"
    for name in names:
        assert f"\n{name}: " in "\n" + done.stdout
    assert set(ISSUE_MUTATIONS) <= set(names)
    families = ("/gmm/", "/multiclass/", "/summary/", "/attention/", "hierarchy/spectra/",
                "extrapolation.py", "continuation.py")
    paths = [e.path for m in tool.MUTATIONS for e in m.edits]
    assert all(any(f in p for p in paths) for f in families)
    assert tool.check_edits(tool.MUTATIONS, ROOT) == {}    # the list matches the source


def test_a_caught_mutation_and_a_drifted_snippet_are_reported():
    tool = _tool()
    path = "hierarchy/models/attention/continuation.py"
    # one worker (`-n 0`): two xdist workers would import the package twice for one test
    caught = tool.mutation("double-mean", path, "value *= s2 * r", "value *= 2 * s2 * r",
                           ["tests/test_mutation_holes.py::test_wishart_moments_at_d_1_are_"
                            "chi_square_moments", "-n", "0"], "E S = 2 s^2 r I")
    drifted = tool.mutation("gone", path, "this snippet is not in the file", "x",
                            caught.tests, "a snippet that drifted")
    repeated = tool.mutation("twice", path, "import", "x", caught.tests, "ambiguous")
    lines = []
    assert tool.check([caught, drifted, repeated], out=lines.append) == (1, 3)
    assert lines[0].startswith("double-mean: caught by tests/test_mutation_holes.py::"
                               "test_wishart_moments_at_d_1_are_chi_square_moments")
    assert lines[1].startswith("gone: ERROR ") and "snippet not found" in lines[1]
    assert lines[2].startswith("twice: ERROR ") and "found" in lines[2]
    assert lines[-1] == "1 of 3 caught"
    assert "value *= s2 * r" in (ROOT / path).read_text()    # the checkout is untouched


def test_a_selection_that_collects_nothing_is_not_caught(tmp_path):
    """pytest's exit 5 (no test collected, e.g. a selection of ``slow`` tests only) vouches for
    nothing: it must read as not caught, never as a failing test."""
    tool = _tool()
    ok, why = tool.run_tests(ROOT, dict(os.environ), tmp_path,
                             ["tests/test_words.py", "-n", "0", "-k", "no_test_has_this_name"],
                             timeout=300)
    assert ok is None and "no test collected" in why
