"""``hierarchy fixed-points`` at real sizes (issue 24 items 1 and 5).

The XOR fixed-point sets are enumerated over neuron-type multisets: the counts at small
widths are checked against the labelled enumeration (every ``5^K`` partition, joined by
union-find), a width past the limit is refused in one line before any work, and the
finite-``lambda`` continuation reports every start, found or not, printing zeros as 0.
"""

import itertools
import json
import math
import resource
import time

import numpy as np
import pytest

from hierarchy.cli.main import main
from hierarchy.core.errors import HierarchyError
from hierarchy.models.gmm import fixed_points as gmm_fixed_points  # noqa: F401
from hierarchy.models.gmm.model import Mixture

fp = __import__("hierarchy.models.gmm.fixed_points", fromlist=["partition_sets"])


def labelled_sets(model):
    """The connected sets over every labelled partition (the 5^K reference)."""
    options = [None, 0, 1, 2, 3]
    assignments = list(itertools.product(options, repeat=model.width))
    points = {}
    for assignment in assignments:
        magnitudes = fp._magnitudes(model, list(assignment))
        state = fp._state(model, assignment, magnitudes)
        if fp.residual(model, state) < 1e-7:
            points[assignment] = (state, magnitudes)
    sets = fp._Sets(points)
    for assignment, (_, magnitudes) in points.items():
        for neuron, label in enumerate(assignment):
            if label is None or assignment.count(label) < 2:
                continue
            other = assignment[:neuron] + (None,) + assignment[neuron + 1:]
            if other in points and fp._arc_is_roots(model, list(assignment), neuron,
                                                     magnitudes):
                sets.join(assignment, other)
    groups = {}
    for assignment in points:
        groups.setdefault(sets.find(assignment), []).append(assignment)
    return groups


@pytest.mark.parametrize("width", [1, 2, 3])
def test_symmetry_classes_reproduce_the_labelled_sets(width):
    model = Mixture("xor", snr=math.inf, ridge=0.1, width=width)
    classes = fp.partition_sets(model)
    labelled = labelled_sets(model)
    assert sum(c["multiplicity"] for c in classes) == len(labelled)
    # the same sizes of sets, with the same multiplicities
    sizes = sorted(len(members) for members in labelled.values())
    assert sorted(c["partitions"] for c in classes for _ in range(c["multiplicity"])) == sizes
    assert sum(c["multiplicity"] * c["partitions"] for c in classes) == 5**width


@pytest.mark.parametrize("width, sets, stable", [(2, 17, 12), (3, 35, 24), (4, 39, 24)])
def test_counts_at_small_widths(width, sets, stable):
    classes = fp.partition_sets(Mixture("xor", snr=math.inf, ridge=0.1, width=width))
    assert sum(c["multiplicity"] for c in classes) == sets
    assert sum(c["multiplicity"] for c in classes if c["stable"]) == stable
    # C(K + 4, 4) type multisets, streamed
    assert len(list(fp.type_counts(width))) == math.comb(width + 4, 4)


def test_width_at_the_limit_finishes_in_bounded_memory():
    start, before = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = Mixture("xor", snr=math.inf, ridge=0.1, width=fp.MAX_WIDTH)
    classes = fp.partition_sets(model)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert time.process_time() - start < 30 and grown_mb < 200
    assert sum(c["multiplicity"] * c["partitions"] for c in classes) == 5**fp.MAX_WIDTH
    # 2^4 subsets of served classes, each one connected set once K > 4
    assert len(classes) == 16 and all(c["multiplicity"] == 1 for c in classes)


def test_width_20_is_refused_in_one_line_within_a_second(tmp_path, capsys):
    start = time.process_time()
    code = main(["fixed-points", "tools/configs/spectra_xor.toml", "--out", str(tmp_path)])
    assert time.process_time() - start < 1.0
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "model.width = 20" in err and f"model.width = {fp.MAX_WIDTH}" in err
    with pytest.raises(HierarchyError) as error:
        fp.fixed_points(Mixture("xor", snr=10.0, ridge=0.1, width=fp.MAX_WIDTH + 1))
    assert error.value.field == "model.width"


@pytest.mark.slow
def test_finite_lambda_continues_every_start_and_prints_zeros(tmp_path, capsys):
    config = tmp_path / "xor.toml"
    config.write_text('[model]\nfamily = "gmm-xor"\nsnr = 1000.0\nridge = 0.1\nwidth = 3\n')
    assert main(["fixed-points", str(config), "--out", str(tmp_path / "fp")]) == 0
    out = capsys.readouterr().out
    assert "e-32" not in out and "v1 = 0, v2 = 0, v3 = 0," in out   # the origin, as 0
    points = json.loads((tmp_path / "fp" / "fixed_points.json").read_text())
    starts = fp.partition_sets(Mixture("xor", snr=math.inf, ridge=0.1, width=3))
    texts = {fp.searched_from(None, s) for s in starts}
    assert all(p["searched"] in texts for p in points) and len(points) <= len(starts)
    assert any(line.startswith("not found") for line in out.splitlines()) == \
        any(not p["found"] for p in points)
    for point in points:
        if point["found"]:
            assert point["residual"] < fp.FINITE_RESIDUAL
    # the isolated stable points serving three classes (6 x 4 of them) stay stable;
    # the points with a dead neuron (W_i = 0) are not classified
    # (every start is listed: found, or "not found" with its residual)
    served = [p for p in points if "zero" not in p["searched"]]
    assert len(served) == 4 and sum(p["multiplicity"] for p in served) == 24
    assert sum(p["found"] for p in served) >= 3
    assert all(p["stable"] is True for p in served if p["found"])
    assert all(p["stable"] is None for p in points if p["found"] and "zero" in p["searched"])


def test_multiclass_finite_lambda_point_states_its_symmetry_accuracy(tmp_path, capsys):
    from hierarchy.models.multiclass import fixed_points as multiclass

    assert main(["fixed-points", "tools/configs/gmm_multiclass.toml", "--out",
                 str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (point,) = json.loads((tmp_path / "fixed_points.json").read_text())
    spread = point["symmetry_spread"]
    # the stated accuracy (module docstring, README): 1.6e-3 at 2^11 points, not 0
    assert 1e-4 < spread < 2e-3 and f"class-symmetric to {spread:.1e}" in out
    # an independent measure of the same orbits: the largest |m_ab - m_cd| off the diagonal
    k = 10
    off = [point["u"][f"m{a}.{b}"] for a in range(1, k + 1) for b in range(1, k + 1) if a != b]
    diagonal = [point["u"][f"m{a}.{a}"] for a in range(1, k + 1)]
    assert max(max(off) - min(off), max(diagonal) - min(diagonal)) <= spread
    state = np.array([1.0, 2.0, 3.0, 1.5, 3.0, 0.0, 3.0])   # k = 2: m11 m12 m21 m22 R11 R12 R22
    model = multiclass_model(2)
    assert multiclass.symmetry_spread(model, state) == pytest.approx(1.0)


def multiclass_model(classes):
    from hierarchy.models.multiclass.model import Multiclass
    return Multiclass(classes=classes)
