"""Every plot is made for a reader: render each from small synthetic data and inspect it.

Checked on the Figure objects: axis labels on every panel with data, a legend where several
curves share a panel (at 7 pt or more), math titles instead of raw word labels, degree colours
ordered along a sequential colormap, constant observables kept off the moving ones' axes, no
layout warning and no suptitle touching a panel; and on the PNG: 150 dpi or more (pHYs).
"""
import importlib
import pathlib
import struct
import sys
import warnings
import zlib

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from hierarchy.core import plotting
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention import plotting as attention_plotting
from hierarchy.models.attention.solve_job import plot_observables
from hierarchy.core.trajectory import Trajectory
from hierarchy.study.analysis import analyse
from hierarchy.models.attention.family import ATTENTION
from hierarchy.study.report import plot_errors, plot_trajectories

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "tools"
RAW_LABELS = {"1", "2", "1.1", "1.2", "2.2", "M1.Mt2", "M1.M2", "Psi1.2", "Omega1.2"}
T = np.linspace(0.0, 0.5, 11)


# ----------------------------------------------------------------------------- inspection

def draw_strictly(fig):
    """Draw the figure with every UserWarning (layout, missing glyph) turned into an error."""
    if not hasattr(fig.canvas, "get_renderer"):      # a pyplot figure after plt.close
        FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fig.canvas.draw()
    return fig.canvas.get_renderer()


def has_data(ax):
    return bool(ax.lines or ax.collections or ax.patches)


def legend_texts(fig):
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    return legends, [t.get_text() for lg in legends for t in lg.get_texts()]


def suptitle_text(fig):
    wanted = fig.get_suptitle()
    found = [t for t in fig.findobj(Text) if t.get_text() == wanted and t.get_figure() is fig
             and t not in [ax.title for ax in fig.axes]]
    assert found or not wanted, "suptitle text not found among the figure's texts"
    return found[0] if wanted else None


def check_reader_figure(fig):
    """The properties every figure must have; returns the axes that hold data."""
    renderer = draw_strictly(fig)
    data_axes = [ax for ax in fig.axes if has_data(ax)]
    assert data_axes
    for ax in data_axes:
        assert ax.get_xlabel().strip(), f"panel {ax.get_title()!r} has no x label"
        assert ax.get_ylabel().strip(), f"panel {ax.get_title()!r} has no y label"
        assert ax.get_title().strip(), "every panel has a title"
        assert ax.get_title() not in RAW_LABELS, f"raw label {ax.get_title()!r} as a title"
    legends, texts = legend_texts(fig)
    if any(len([ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]) > 1
           for ax in data_axes):
        assert legends, "several curves in a panel but no legend"
    for lg in legends:
        assert all(t.get_fontsize() >= 7 for t in lg.get_texts())
    assert not set(texts) & RAW_LABELS, f"raw labels in a legend: {set(texts) & RAW_LABELS}"
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    sup = suptitle_text(fig)
    if sup is not None:
        box = sup.get_window_extent(renderer)
        assert not any(box.overlaps(b) for b in boxes), "the suptitle touches a panel"
    titles = [ax.title.get_window_extent(renderer) for ax in data_axes if ax.get_title()]
    for i, a in enumerate(titles):
        assert not any(a.overlaps(b) for b in titles[i + 1:]), "two panel titles overlap"
    for lg in fig.legends:
        box = lg.get_window_extent(renderer)
        assert not any(box.overlaps(b) for b in boxes), "the figure legend covers a panel"
    return data_axes


def png_dpi(path):
    """``(dpi_x, dpi_y, width, height)`` read back from a PNG's pHYs and IHDR chunks."""
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        chunks.setdefault(kind, body)
        pos += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    ppm_x, ppm_y, unit = struct.unpack(">IIB", chunks[b"pHYs"])
    assert unit == 1, "pHYs in pixels per metre"
    return ppm_x * 0.0254, ppm_y * 0.0254, width, height


def png_shape(path):
    """``(height, width)`` of a PNG from its IHDR chunk (the first, right after the signature)."""
    with open(path, "rb") as fh:
        head = fh.read(33)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", path
    assert zlib.crc32(head[12:29]) == struct.unpack(">I", head[29:33])[0], path
    width, height = struct.unpack(">II", head[16:24])
    return height, width


def check_png(fig, path):
    dpi_x, dpi_y, width, height = png_dpi(path)
    assert dpi_x >= 149.9 and dpi_y >= 149.9
    w_in, h_in = fig.get_size_inches()
    assert width == pytest.approx(w_in * dpi_x, abs=2) and height == pytest.approx(h_in * dpi_y, abs=2)


def luminance(rgba):
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def check_degree_lines(ax, degrees):
    """The ``M = k`` curves exist for every degree, in distinct colours of rising lightness."""
    by = {ln.get_label(): ln.get_color() for ln in ax.get_lines()}
    colors = [by[f"M = {M}"] for M in degrees]
    lum = [luminance(c) for c in colors]
    assert all(a < b for a, b in zip(lum, lum[1:])), "degree colours not monotone"


# ----------------------------------------------------------------------------- labels, style

@pytest.mark.parametrize("label, parameterization, expected", [
    ("1", "tied", "t₁"), ("2", "tied", "t₂"), ("1.1", "tied", "q₁₁"), ("1.2", "tied", "q₁₂"),
    ("1.1.2", "tied", "μ(1.1.2)"), ("3.12", "tied", "q₃,₁₂"),
    ("M1.Mt2", "untied", "q⁽¹⁾₁₂"), ("M1.M2", "untied", "q⁽²⁾₁₂"), ("A1", "untied", "tᴬ₁"),
    ("B2", "untied", "tᴮ₂"), ("M1", "untied", "μ(M₁)"), ("M1.B1.Mt2", "untied", "μ(M₁B₁M₂ᵀ)"),
    ("t1", "direct", "t₁"), ("Psi1.2", "direct", "Ψ₁₂"), ("Omega1.2", "direct", "Ω₁₂"),
    ("S1.St2.S1", "direct", "μ(S₁S₂ᵀS₁)"),
])
def test_math_label_names_each_word_in_mathematics(label, parameterization, expected):
    assert attention_plotting.math_label(label, parameterization) == expected
    assert attention_plotting.math_label(label) == expected          # inferred from the label itself


@pytest.mark.parametrize("label, parameterization", [("M1.Mt2", "tied"), ("1.2", "direct"),
                                                      ("x1", None), ("1.", None)])
def test_math_label_refuses_foreign_or_bad_labels(label, parameterization):
    with pytest.raises(HierarchyError) as err:
        attention_plotting.math_label(label, parameterization)
    assert err.value.field == "label" and "\n" not in str(err.value)


def test_degree_colors_are_distinct_and_monotone_in_a_sequential_map():
    colors = plotting.degree_colors([2, 3, 4, 5, 6, 7, 8])
    assert len(set(colors)) == 7
    lum = [luminance(c) for c in colors]
    assert all(a < b for a, b in zip(lum, lum[1:]))
    assert len(plotting.degree_colors([4])) == 1


def test_split_constant_keeps_a_fixed_teacher_apart():
    series = {"1": T, "2": np.full_like(T, 2.0), "1.2": 0.1 * T**2,
              "2.2": np.r_[np.full(9, 2.2), np.nan, np.nan]}
    assert plotting.split_constant(series) == (["1", "1.2"], ["2", "2.2"])
    assert plotting.split_constant({"1": 1.0 + 1e-6 * T}) == (["1"], [])


def test_save_figure_refuses_low_dpi_and_writes_150(tmp_path):
    fig, axes = plotting.new_figure()
    axes[0][0].plot(T, T)
    with pytest.raises(HierarchyError) as err:
        plotting.save_figure(fig, tmp_path / "low.png", dpi=90)
    assert err.value.field == "dpi" and not (tmp_path / "low.png").exists()
    plotting.save_figure(fig, tmp_path / "ok.png")
    check_png(fig, tmp_path / "ok.png")


def test_time_label_refuses_an_unknown_parameterization():
    assert attention_plotting.time_label("untied") == "τ = nα/d"
    with pytest.raises(HierarchyError) as err:
        attention_plotting.time_label("flat")
    assert err.value.field == "parameterization"


# ----------------------------------------------------------------------------- solve, sgd

def _solve_result(status=0):
    labels = ["1", "2", "1.1", "1.2", "2.2", "1.1.2"]
    mu = np.column_stack([T, np.full_like(T, 2.0), 1 + T, 0.3 * T, np.full_like(T, 2.2), T**2])
    return Trajectory(t=T, y=mu, labels=labels, status=status, message="")


@pytest.mark.parametrize("status", [0, 1])
def test_solve_plot_puts_the_fixed_teacher_in_its_own_panel(tmp_path, status):
    # regression: the teacher's constant t₂ = 2, q₂₂ = 2.2 shared the axes with q₁₂ (and the
    # PNG was saved at 120 dpi with raw labels as legend entries)
    result = _solve_result(status)
    labels = ["1", "2", "1.1", "1.2", "2.2"]
    fig = plot_observables(tmp_path / "observables.png", result, labels, time_name="t",
                           title="tied K=2 trainable=[1] degree M = 3")
    axes = check_reader_figure(fig)
    assert len(axes) == 2
    moving, constant = ({t.get_text() for t in ax.get_legend().get_texts()} for ax in axes)
    assert moving == {"t₁", "q₁₁", "q₁₂"} and constant == {"t₂", "q₂₂"}
    assert len(axes[0].lines) == 3 + (status != 0)      # a stopped run adds the stop line
    check_png(fig, tmp_path / "observables.png")


def test_solve_plot_of_untied_words_uses_tau_and_math_labels(tmp_path):
    labels = ["M1", "M1.Mt2", "M1.M2", "A1"]
    mu = np.column_stack([T, 0.1 * T, 0.2 * T, 1 + T])
    result = Trajectory(t=T, y=mu, labels=labels, status=0, message="")
    fig = plot_observables(tmp_path / "o.png", result, labels, time_name="tau", title="untied")
    (ax,) = check_reader_figure(fig)
    assert ax.get_xlabel() == "τ"
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {
        "μ(M₁)", "q⁽¹⁾₁₂", "q⁽²⁾₁₂", "tᴬ₁"}


def test_sgd_figure_has_math_titles_and_a_loss_panel(tmp_path):
    labels = ["1", "2", "1.2"]
    rng = np.random.default_rng(0)
    mu = np.stack([np.column_stack([T, np.full_like(T, 2.0), 0.3 * T]) + 0.01 * rng.normal(
        size=(T.size, 3)) * [1, 0, 1] for _ in range(3)])
    fig = attention_plotting.make_sgd_figure(T, mu, 1 - T[None, :] + 0 * mu[:, :, 0], labels)
    axes = check_reader_figure(fig)
    titles = [ax.get_title() for ax in axes]
    assert [title.split("  ")[0] for title in titles] == ["t₁", "q₁₂", "loss (minibatch)"]
    # the seeds' spread is stated, and each of the 3 seeds is drawn, so a narrow band shows
    spread = np.max(mu.max(0) - mu.min(0), axis=0)
    assert titles[0] == f"t₁  (seed range ≤ {spread[0]:.1e})"
    assert len([ln for ln in axes[0].get_lines() if ln.get_color() == "C1"]) == 3 + 1
    plotting.save_figure(fig, tmp_path / "sgd.png")
    check_png(fig, tmp_path / "sgd.png")


def test_sgd_figure_of_many_observables_wraps_into_rows_of_four():
    # the audit's untied sgd.png: six observables and the loss in one row, 3150 x 510 px
    labels = ["M1", "A1", "B1", "M1.M2", "M1.Mt1", "M1.A1"]
    rng = np.random.default_rng(1)
    mu = np.stack([np.outer(T, np.arange(1, 7)) + 0.01 * rng.normal(size=(T.size, 6))
                   for _ in range(2)])
    fig = attention_plotting.make_sgd_figure(T, mu, np.ones((2, T.size)), labels)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 7
    columns = {round(ax.get_position().x0, 3) for ax in axes}
    rows = {round(ax.get_position().y0, 3) for ax in axes}
    assert len(columns) == 4 and len(rows) == 2
    width, height = fig.get_size_inches()
    assert width / height < 2.5


def test_sgd_figure_of_an_interrupted_run_draws_without_warnings():
    # the last seed never started and the others stopped half-way: NaN rows, no RuntimeWarning
    mu = np.full((3, T.size, 2), np.nan)
    mu[:2, :6] = np.column_stack([T[:6], 0.3 * T[:6]])
    loss = np.full((3, T.size), np.nan)
    loss[:2, :6] = 1 - T[:6]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = attention_plotting.make_sgd_figure(T, mu, loss, ["1", "1.2"])
    check_reader_figure(fig)


# ----------------------------------------------------------------------------- study

DEGREES = [2, 3, 4, 5]
STUDY_LABELS = ["1", "1.1", "1.2"]


def _study_data():
    rng = np.random.default_rng(1)
    flow = np.column_stack([T, 1 + T, 0.3 * T])
    hier = np.stack([flow + 0.3 ** M * T[:, None] for M in DEGREES])
    seeds = np.stack([flow + 1e-3 * rng.normal(size=flow.shape) for _ in range(3)])
    return hier, flow, seeds, analyse(DEGREES, STUDY_LABELS, hier, flow, seeds)


def test_study_errors_plot(tmp_path):
    _, _, _, analysis = _study_data()
    fig = plot_errors(tmp_path / "study_errors.png", analysis, DEGREES, STUDY_LABELS)
    axes = check_reader_figure(fig)
    assert [ax.get_title().split("\n")[0] for ax in axes] == ["t₁", "q₁₁", "q₁₂"]
    assert all(ax.get_xlabel() == "degree M" for ax in axes)
    # one legend, outside the panels (check_reader_figure: it covers none of them)
    assert fig.legends and not any(ax.get_legend() for ax in axes)
    assert "vs matrix flow" in legend_texts(fig)[1]
    assert f"{analysis['rate']['matrix-flow']['1']:.2f} (flow)" in axes[0].get_title()
    check_png(fig, tmp_path / "study_errors.png")


def test_study_trajectories_plot(tmp_path):
    hier, flow, seeds, _ = _study_data()
    fig = plot_trajectories(tmp_path / "study_trajectories.png", T, DEGREES, STUDY_LABELS, hier,
                            flow, seeds)
    axes = check_reader_figure(fig)
    assert [ax.get_ylabel() for ax in axes] == ["t₁", "q₁₁", "q₁₂"]
    assert fig.legends and "matrix flow" in legend_texts(fig)[1]
    for ax in axes:
        check_degree_lines(ax, DEGREES)
    check_png(fig, tmp_path / "study_trajectories.png")


def _extrapolation(flow):
    """An extrapolated estimate: tiny error up to t = 0.3, then uncertified, wild from 0.4."""
    error = np.where(T[:, None] <= 0.3, 1e-6, 5.0) + 0 * flow
    estimate = flow + np.select([T[:, None] <= 0.3, T[:, None] <= 0.4], [1e-7, 0.05], 40.0)
    return estimate, error


def test_study_trajectories_plot_shows_the_extrapolated_curve(tmp_path):
    hier, flow, seeds, _ = _study_data()
    extrapolation = _extrapolation(flow)
    fig = plot_trajectories(tmp_path / "t.png", T, DEGREES, STUDY_LABELS, hier, flow, seeds,
                            extrapolation)
    axes = check_reader_figure(fig)
    texts = legend_texts(fig)[1]
    assert plotting.EXTRAPOLATED_LABEL in texts and plotting.UNCERTIFIED_LABEL in texts
    for i, ax in enumerate(axes):
        by = {ln.get_label(): ln for ln in ax.get_lines()}
        certified = np.asarray(by[plotting.EXTRAPOLATED_LABEL].get_ydata(), float)
        # drawn as valid exactly where the error estimate is below the tolerance
        assert np.array_equal(np.isfinite(certified), T <= 0.3)
        # the wild uncertified stretch does not rescale the panel
        assert ax.get_ylim()[1] < 10
        check_degree_lines(ax, DEGREES)
    check_png(fig, tmp_path / "t.png")


def test_study_errors_plot_draws_the_extrapolated_errors(tmp_path):
    hier, flow, seeds, analysis = _study_data()
    from hierarchy.study.analysis import analyse_extrapolation

    extrapolated = analyse_extrapolation(T, DEGREES, STUDY_LABELS, hier, *_extrapolation(flow),
                                         {"matrix-flow": flow, "sgd": seeds.mean(0)})
    fig = plot_errors(tmp_path / "e.png", analysis, DEGREES, STUDY_LABELS, extrapolated)
    axes = check_reader_figure(fig)
    texts = legend_texts(fig)[1]
    assert f"{plotting.EXTRAPOLATED_LABEL} vs matrix flow" in texts
    assert fig.legends and not any(ax.get_legend() for ax in axes)  # outside: covers no data


def test_study_plots_of_many_untied_observables_wrap_into_rows(tmp_path):
    labels = ["M1", "M1.M1", "M1.Mt1", "A1", "B1", "M1.M2", "M1.Mt2"]
    flow = np.column_stack([(k + 1) * T for k in range(len(labels))])
    hier = np.stack([flow + 0.3 ** M * T[:, None] for M in DEGREES])
    analysis = analyse(DEGREES, labels, hier, flow)
    untied = {"model": {"parameterization": "untied"}}
    fig = plot_trajectories(tmp_path / "t.png", T, DEGREES, labels, hier, flow,
                            time_label=ATTENTION.time_label(untied))
    axes = check_reader_figure(fig)
    assert len(axes) == len(labels) and axes[0].get_xlabel() == "τ = nα/d"
    assert {round(ax.get_position().y0, 3) for ax in axes} == {round(axes[0].get_position().y0, 3),
                                                              round(axes[-1].get_position().y0, 3)}
    assert axes[0].get_position().y0 > axes[-1].get_position().y0     # two rows, not seven columns
    fig = plot_errors(tmp_path / "e.png", analysis, DEGREES, labels)
    titles = [ax.get_title().split("\n")[0] for ax in check_reader_figure(fig)]
    assert titles == ["μ(M₁)", "q⁽²⁾₁₁", "q⁽¹⁾₁₁", "tᴬ₁", "tᴮ₁", "q⁽²⁾₁₂", "q⁽¹⁾₁₂"]
    check_png(fig, tmp_path / "e.png")


# ----------------------------------------------------------------------------- figure scripts

@pytest.fixture(scope="module")
def figures():
    sys.path.insert(0, str(TOOLS))
    try:
        yield {n: importlib.import_module(f"figure{n}") for n in (1, 2, 3, 4)}
    finally:
        sys.path.remove(str(TOOLS))


CFG = {"d": 100, "learning_rate": 0.01, "batch": 128, "mode": "quick"}


def _tied_curves(degrees):
    base = np.column_stack([T, 1 + T, 0.3 * T])
    return {M: base + 0.5 ** M * T[:, None] ** 2 for M in degrees}, base


def test_figure1_draw(figures, tmp_path):
    curves, base = _tied_curves([2, 3, 4, 6, 8])
    fig = figures[1].draw(T, curves, T, base, 0.01 + 0 * base, CFG)
    axes = check_reader_figure(fig)
    assert [ax.get_title() for ax in axes] == ["t₁", "q₁₁", "q₁₂"]
    for ax in axes:
        check_degree_lines(ax, list(curves))
    figures[1].save_png(fig, tmp_path / "figure1.png")
    check_png(fig, tmp_path / "figure1.png")


def _figure_extrapolation(base):
    error = np.where(T[:, None] <= 0.3, 1e-6, 1.0) + 0 * base
    return {"estimate": base + 1e-7, "error": error, "valid": error < 1e-3,
            "degrees": list(range(2, 17)), "tolerance": 1e-3}


def test_figure1_draw_shows_the_flow_and_the_extrapolated_curve(figures, tmp_path):
    curves, base = _tied_curves([2, 3, 4, 6, 8])
    fig = figures[1].draw(T, curves, T, base, 0.01 + 0 * base, CFG, base,
                          _figure_extrapolation(base))
    axes = check_reader_figure(fig)
    texts = legend_texts(fig)[1]
    assert "exact matrix flow (finite d)" in texts
    assert plotting.EXTRAPOLATED_LABEL in texts and plotting.UNCERTIFIED_LABEL in texts
    for ax in axes:
        check_degree_lines(ax, list(curves))
    figures[1].save_png(fig, tmp_path / "figure1.png")
    check_png(fig, tmp_path / "figure1.png")


def test_figure4_draw_shows_the_extrapolated_curve(figures, tmp_path):
    curves, exact = _tied_curves([2, 3, 4, 6, 8])
    fig = figures[4].draw(T, exact, curves, T, np.stack([exact, exact + 0.002]), CFG,
                          _figure_extrapolation(exact))
    check_reader_figure(fig)
    assert plotting.EXTRAPOLATED_LABEL in legend_texts(fig)[1]
    figures[4].save_png(fig, tmp_path / "figure4.png")
    check_png(fig, tmp_path / "figure4.png")


def test_figure2_draw(figures, tmp_path):
    cfg = dict(CFG, activations=["h1", "h2", "h3"])
    samples = np.linspace(0, 1e6, 11)
    curves = {(m, a): (samples, np.array([0.05 * T, 0.1 * T]), samples, 0.06 * T)
              for m in ("tied", "direct") for a in cfg["activations"]}
    fig = figures[2].draw(curves, cfg)
    axes = check_reader_figure(fig)
    assert len(axes) == 2 and all(ax.get_legend() for ax in axes)
    figures[2].save_png(fig, tmp_path / "figure2.png")
    check_png(fig, tmp_path / "figure2.png")


def test_figure3_draw(figures, tmp_path):
    from types import SimpleNamespace

    cfg = dict(CFG, learning_rate=0.02, batch=256, seeds=[0, 1], tau_final=0.6, tau_short=0.1)
    tau = np.linspace(0.0, 0.6, 13)
    fast_t = np.linspace(0.0, 5.0, 11)
    results = {}
    for k, act in enumerate(("h1", "h2", "h3")):
        fast = SimpleNamespace(t=fast_t, m=np.exp(-fast_t)[:, None] * 0.1, m_star=np.array([0.0]))
        traj = SimpleNamespace(fast=fast, tau=tau)
        cmp = {"fast": {"m_sgd": np.stack([fast.m, fast.m])}}
        flow = (k + 1) * 0.5 * tau
        results[act] = {"traj": traj, "cmp": cmp, "flow": flow,
                        "sgd": np.stack([flow, flow + 0.01]), "velocity": (k + 1) * 0.5}
    short = np.linspace(0.0, 0.2, 9)
    degrees = [3, 4, 5, 6]
    study = {"act": "h1", "tau": short, "flow": 0.5 * short, "rho": 0.17,
             "curves": {M: 0.5 * short + short ** M for M in degrees},
             "errors": {M: short ** M + 1e-9 for M in degrees}}
    fig = figures[3].draw(results, study, cfg)
    axes = check_reader_figure(fig)
    assert len(axes) == 4
    # the extrapolated series over the whole horizon, certified up to τ = 0.1
    valid = (short <= 0.1)[:, None]
    study["extrapolated"] = {"estimate": 0.5 * short[:, None], "degrees": [2, 3, 4, 5, 6],
                             "error": np.where(valid, 1e-6, 1.0), "valid": valid}
    fig = figures[3].draw(results, study, cfg)
    axes = check_reader_figure(fig)
    assert plotting.EXTRAPOLATED_LABEL in legend_texts(fig)[1]
    assert "certified until τ = 0.1" in fig.get_suptitle()
    err_ax = axes[3]
    lum = [luminance(ln.get_color()) for ln in err_ax.get_lines() if ln.get_label().startswith("M")]
    assert len(lum) == 4 and all(a < b for a, b in zip(lum, lum[1:]))
    figures[3].save_png(fig, tmp_path / "figure3.png")
    check_png(fig, tmp_path / "figure3.png")


def test_figure4_draw_calls_the_degree_M(figures, tmp_path):
    # regression: figure 4 called the degree N while every other picture calls it M
    curves, exact = _tied_curves([2, 3, 4, 6, 8])
    mu_sgd = np.stack([exact, exact + 0.002])
    fig = figures[4].draw(T, exact, curves, T, mu_sgd, CFG)
    axes = check_reader_figure(fig)
    texts = legend_texts(fig)[1] + [fig.get_suptitle()] + [ax.get_title() for ax in axes]
    assert not any("N =" in t or "order N" in t for t in texts)
    assert "degree M" in fig.get_suptitle()
    for ax in axes:
        check_degree_lines(ax, list(curves))
    figures[4].save_png(fig, tmp_path / "figure4.png")
    check_png(fig, tmp_path / "figure4.png")


def test_figure_common_suptitle_gets_its_own_room(figures):
    common = importlib.import_module("figure_common")
    fig, axes = common.figure(1, 3, figsize=(6, 3))
    for ax in axes[0]:
        ax.plot(T, T, label="a")
        ax.plot(T, 2 * T, label="b")
        ax.set(title="a long panel title", xlabel="t", ylabel="y")
        ax.legend(fontsize=8)
    common.suptitle(fig, "A fairly long suptitle that sits above the panels", CFG)
    check_reader_figure(fig)


def test_no_committed_figure_is_over_6000_pixels_on_a_side():
    """Issue 24: the multiclass study figure was 2040 x 19935 px; a referee's limit.

    The size is read from each PNG's header (IHDR, checked by its CRC), not by decoding it.
    """
    sizes = {path.name: png_shape(path) for path in sorted((TOOLS / "figures").glob("*.png"))}
    assert sizes and all(max(shape) <= 6000 for shape in sizes.values()), sizes


# ----------------------------------------------------------------------------- paired sgd.png

def _paired_arrays(shared_start):
    rng = np.random.default_rng(2)
    runs, labels = 6, ["m", "r2"]
    starts = np.full((runs, 2), 0.5) if shared_start else 0.5 + 0.05 * rng.normal(size=(runs, 2))
    ode_paired = starts[:, None, :] * (1 + T[None, :, None])
    ode_mean = starts.mean(axis=0)[None, :] * (1 + T[:, None])
    u_runs = ode_paired + 0.02 * rng.normal(size=ode_paired.shape)
    return u_runs, ode_paired, ode_mean, labels


@pytest.mark.parametrize("shared_start", [True, False])
def test_paired_sgd_figure_draws_the_run_mean_with_its_band(shared_start):
    # the audit: with the paired comparison on, sgd.png drew no run mean and no band, and a
    # statistics start's "paired ODEs" were listed in the legend, hidden under the black line
    u_runs, ode_paired, ode_mean, labels = _paired_arrays(shared_start)
    fig = plotting.make_paired_figure(T, u_runs, ode_paired, ode_mean, labels, "spiked-pca")
    entries = {text.get_text() for legend in fig.legends for text in legend.get_texts()}
    assert {"mean of the runs", plotting.MEAN_BAND_LABEL} <= entries
    assert ("paired ODEs (each run's own start)" in entries) is not shared_start
    assert ("ODE (the runs' common start)" in entries) is shared_start
    ax = fig.axes[0]
    band, = [c for c in ax.collections if c.get_label() == plotting.MEAN_BAND_LABEL]
    vertices = band.get_paths()[0].vertices
    j = 3  # a time inside the band: its vertical extent there is mean ± 2 se of the six runs
    column = u_runs[:, j, 0]
    half = 2 * column.std(ddof=1) / np.sqrt(column.size)
    at = vertices[np.isclose(vertices[:, 0], T[j]), 1]
    assert at.min() == pytest.approx(column.mean() - half) and \
        at.max() == pytest.approx(column.mean() + half)
    assert ax.get_ylabel() == "m"
