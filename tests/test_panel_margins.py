"""The statistics figure's fixed margins (``core/panel_margins.py``): nothing drawn outside the
figure or on top of another panel, whatever the width of the tick labels and the length of
the title.

Checked on the drawn figure (the boxes matplotlib itself computes, an independent path from
the margins' own estimate): every panel's tight box (tick labels, axis labels, titles, offset
text) inside the figure, no two panels' tight boxes overlapping, the title clear of every
panel.
"""
import warnings

import numpy as np
import pytest

from hierarchy.core.panel_margins import PanelFigure
from hierarchy.core.plotting import make_statistics_figure, save_figure

T = np.linspace(0.0, 300.0, 31)


def drawn_boxes(fig):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    return renderer, [ax.get_tightbbox(renderer) for ax in axes]


def check_laid_out(fig):
    renderer, boxes = drawn_boxes(fig)
    frame = fig.bbox
    for box in boxes:
        assert frame.x0 - 0.5 <= box.x0 and box.x1 <= frame.x1 + 0.5, (box, frame)
        assert frame.y0 - 0.5 <= box.y0 and box.y1 <= frame.y1 + 0.5, (box, frame)
    for i, a in enumerate(boxes):
        assert not any(a.overlaps(b) for b in boxes[i + 1:]), "two panels overlap"
    title = fig._suptitle.get_window_extent(renderer)
    assert frame.y0 <= title.y0 and title.y1 <= frame.y1 + 0.5
    assert not any(title.overlaps(b) for b in boxes), "the title touches a panel"


def statistics(scale, offset=0.0, n=7):
    """``n`` statistics in the groups ``Q (a=b)``, ``Q (a!=b)``, ``R``: curves of size
    ``scale`` about ``offset`` (wide tick labels, or an offset text ``1e-5`` / ``+1e4``)."""
    labels = ["Q1.1", "Q2.2", "Q1.2", "R1.1", "R1.2", "R2.1", "R2.2"][:n]
    y = offset + scale * np.tanh(np.outer(T / 100.0, np.arange(1, n + 1)))
    return y, labels


@pytest.mark.parametrize("scale, offset", [(1.0, 0.0), (123456.7, 0.0), (1e-5, 0.0),
                                           (1e-3, 1e4), (-250.5, -1e3)])
def test_the_panels_fit_whatever_their_tick_labels(scale, offset):
    y, labels = statistics(scale, offset)
    fig = make_statistics_figure(T, y, labels, "network: the ODE to α = 300",
                                 time_label="α", extra_panels=[("eg", {"eg": y[:, 0]})])
    assert isinstance(fig, PanelFigure) and fig.get_layout_engine() is None  # one draw
    check_laid_out(fig)


def test_ticks_the_locator_picks_after_the_resize_are_the_ones_measured():
    # the round's audit: a spiked-PCA figure whose m panel showed "0.0 ... 1.4" at the
    # figure's first size and "0.00 ... 1.25" once its margins were set: the left margin,
    # measured for the narrower labels, cut their first digit off
    t = np.linspace(0.0, 12.0, 31)
    m = np.minimum(1.4142, np.concatenate([[0.0] * 3, [1e-4, 0.0036, 0.0878, 1.1828, 1.4137],
                                           [1.4142] * 23]))
    wobble = [0.0] * 13 + [0.405, -1.25, -1.84, -0.248, 0.514, 2.28, 2.6, 1.91, 0.888,
                           -0.325, -1.52, -2.24, -2.09, -1.36, -0.295, 0.872, 1.87, 0.723]
    r2 = 1.0 + 1e-7 * np.array(wobble)   # an offset text ("1e-7+1") shortens the panels
    fig = make_statistics_figure(t, np.column_stack([m, r2]), ["m", "r2"],
                                 "spiked-pca: the ODE to t = 12", uncertified_from=2.4)
    check_laid_out(fig)


@pytest.fixture(scope="module")
def short_title_heights():
    """The panel heights (inches) of the figure with a short title, itself checked laid out."""
    y, labels = statistics(1.0)
    short = make_statistics_figure(T, y, labels, "network: settings")
    check_laid_out(short)
    return [ax.get_position().height * short.get_figheight() for ax in short.axes]


@pytest.mark.parametrize("words", [1, 12, 40])
def test_a_long_title_gets_room_without_squashing_the_panels(words, short_title_heights):
    y, labels = statistics(1.0)
    fig = make_statistics_figure(T, y, labels, "network: " + "a long title " * words)
    check_laid_out(fig)
    panel = [ax.get_position().height * fig.get_figheight() for ax in fig.axes]
    assert min(panel) == pytest.approx(min(short_title_heights), rel=0.05)


def test_one_panel_and_many_rows(tmp_path):
    for n in (1, 7):
        y, labels = statistics(1.0, n=n)
        extra = [(f"extra {k}", {"curve": y[:, 0]}) for k in range(5)]
        fig = make_statistics_figure(T, y, labels, "network: settings", extra_panels=extra)
        check_laid_out(fig)
        save_figure(fig, tmp_path / f"panels{n}.png")


def pixels(fig, path):
    from PIL import Image

    save_figure(fig, path)
    with Image.open(path) as image:
        return np.asarray(image).astype(int)


@pytest.mark.parametrize("scale, offset", [(1e-5, 0.0)])
def test_fixed_titles_are_where_matplotlib_would_put_them(tmp_path, monkeypatch, scale, offset):
    """``fix_titles`` skips matplotlib's measuring of every y tick label to place each panel's
    title: the same pixels as matplotlib's own placement, with panels whose offset text
    (``1e-5``, ``+1e4``) may lift their titles and panels without."""
    from hierarchy.core import panel_margins

    y, labels = statistics(scale, offset)
    # no offset text whatever the others have; then an offset text under a title long enough
    # to meet it, which matplotlib lifts above it
    panels = [("eg", {"eg": np.tanh(T / 100.0)}),
              ("a title as wide as its panel, over the offset", {"r": 1e4 + 1e-3 * T})]
    fixed = pixels(make_statistics_figure(T, y, labels, "titles", extra_panels=panels),
                   tmp_path / "fixed.png")
    monkeypatch.setattr(panel_margins, "fix_titles", lambda fig: None)
    placed = pixels(make_statistics_figure(T, y, labels, "titles", extra_panels=panels),
                    tmp_path / "placed.png")
    assert fixed.shape == placed.shape and np.array_equal(fixed, placed)
