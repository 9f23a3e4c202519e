"""A cheap layout for a grid of panels: margins measured from the few texts that decide them.

matplotlib's constrained layout measures the tight box of every artist of the figure, in two
passes, and with any layout engine ``savefig`` draws the figure twice (a dry run first): for
the six panels of a ``network`` solve that was a third of the time of writing
``observables.png`` (``tools/bench_command_time.py``). A grid of equal panels needs less. Its
margins are decided by

- the widest y tick label of any panel (the left margin and the gap between columns), the
  only text measured (its width depends on the data);
- the heights of one line of tick labels, of the x and y axis labels and of the panel titles
  (their line counts times their font sizes), and of the y axis's offset text (``1e-5``,
  ``+1``) where a panel has one;
- the lines of the figure's title.

:class:`PanelFigure` sets these margins each time it is drawn (:func:`place_panels`:
``subplots_adjust`` in figure fractions), so a panel whose range changes after the figure is
made (a marked fixed point) is measured as drawn. It lays out one grid of equal panels with
legends inside them; a figure with a legend outside its panels keeps constrained layout.
"""

from matplotlib import cbook
from matplotlib.figure import Figure

#: Spare room about every text, in points
SPARE = 5.0
#: Line height of a text, in units of its font size
LINE = 1.25


def _line_height(text):
    """Points taken by a text object's lines (0 when empty or hidden)."""
    words = text.get_text()
    if not words or not text.get_visible():
        return 0.0
    return (words.count("\n") + 1) * text.get_fontsize() * LINE


def _tick_labels(axis):
    """The major tick labels ``axis`` will draw, from its locator and formatter (no tick
    objects updated: the draw does that once)."""
    low, high = sorted(axis.get_view_interval())
    locations = [x for x in axis.get_major_locator()() if low <= x <= high]
    return [label for label in axis.get_major_formatter().format_ticks(locations) if label]


def _widest(axis, renderer):
    """Points of the widest major tick label of ``axis``."""
    prototype = axis.majorTicks[0].label1
    properties = prototype.get_fontproperties()
    widths = [renderer.get_text_width_height_descent(label, properties,
                                                     ismath=cbook.is_math_text(label))[0]
              for label in _tick_labels(axis)]
    return max(widths, default=0.0) * 72.0 / renderer.dpi


def _tick_room(axis):
    """Points between the spine and its tick labels: tick length and label padding."""
    tick = axis.majorTicks[0]
    return max(tick.get_tick_padding(), 0.0) + tick.get_pad()


class PanelFigure(Figure):
    """A figure of one grid of equal panels that sets its margins (:func:`place_panels`) each
    time it is drawn, and its panels' titles on their top edges (:func:`fix_titles`).

    Not a matplotlib layout engine: a figure with one is drawn twice by ``savefig`` (a dry
    run first, for the engine), and that second draw cost as much as the margins saved.
    """

    def draw(self, renderer):
        place_panels(self, renderer)
        fix_titles(self)
        super().draw(renderer)


def fix_titles(fig):
    """Put each panel's titles on its top edge, where matplotlib would, without measuring.

    matplotlib places a title above whatever the panel draws over its top edge: x tick labels
    on top, or the y axis's offset text (``1e-5``), found by measuring every y tick label of
    the panel (a sixth of the time of drawing a solve's figure). These panels have their x
    ticks below, so only a panel with an offset text keeps matplotlib's placement; the others'
    titles are fixed at the top edge (``y = 1``), the same pixels.
    """
    for ax in fig.axes:
        if not ax.get_visible() or ax.yaxis.get_major_formatter().get_offset() or \
                ax.xaxis.get_ticks_position() != "bottom":
            continue
        ax._autotitlepos = False  # what set_title(..., y=1) sets, without re-setting the text
        for title in (ax.title, ax._left_title, ax._right_title):
            title.set_y(1.0)


#: the most times :func:`place_panels` measures again after resizing the panels
PASSES = 3


def place_panels(fig, renderer):
    """Set the margins of ``fig``'s grid of panels for ``renderer`` (``subplots_adjust``).

    The tick locator picks its ticks by the panel's size, so resizing a panel can change
    its labels ("0.0 … 1.4" became "0.00 … 1.25", wider, and the left margin clipped them):
    the margins are measured again after each resize, until the widest label stops changing
    (at most :data:`PASSES` times)."""
    widest = None
    for _ in range(PASSES):
        measured = _place_once(fig, renderer)
        if measured is None or measured == widest:
            return
        widest = measured


def _place_once(fig, renderer):
    """One measurement and ``subplots_adjust`` of :func:`place_panels`; returns the left
    margin measured (None when nothing was placed)."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if not axes:
        return None
    left = bottom = top = 0.0
    for ax in axes:
        ylabel = _line_height(ax.yaxis.label)
        left = max(left, _widest(ax.yaxis, renderer) + _tick_room(ax.yaxis) + ylabel
                   + (ax.yaxis.labelpad if ylabel else 0.0))
        xticks = ax.xaxis.majorTicks[0].label1.get_fontsize() * LINE
        xlabel = _line_height(ax.xaxis.label)
        bottom = max(bottom, xticks + _tick_room(ax.xaxis) + xlabel
                     + (ax.xaxis.labelpad if xlabel else 0.0))
        offset = ax.yaxis.get_major_formatter().get_offset()  # set by _widest
        heading = max(_line_height(ax.title), _line_height(ax._left_title),
                      _line_height(ax._right_title))
        top = max(top, heading + (ax.yaxis.offsetText.get_fontsize() * LINE if offset
                                  else 0.0) + (6.0 if heading or offset else 0.0))
    left, bottom, top = left + SPARE, bottom + SPARE, top + SPARE
    suptitle = fig._suptitle
    title = _line_height(suptitle) + SPARE if suptitle is not None else 0.0
    if suptitle is not None and title:
        title += (1.0 - suptitle.get_position()[1]) * fig.get_figheight() * 72.0
    nrows, ncols = axes[0].get_subplotspec().get_gridspec().get_geometry()
    width, height = fig.get_figwidth() * 72.0, fig.get_figheight() * 72.0
    right = 3.0 * SPARE  # the last x tick label reaches past the panel's edge
    panel_w = (width - left - right - (ncols - 1) * (left + SPARE)) / ncols
    panel_h = (height - title - top - bottom - (nrows - 1) * (bottom + top)) / nrows
    if panel_w <= 0 or panel_h <= 0:
        return None  # texts larger than the figure: leave matplotlib's default margins
    fig.subplots_adjust(left=left / width, right=1.0 - right / width,
                        bottom=bottom / height, top=1.0 - (title + top) / height,
                        wspace=(left + SPARE) / panel_w, hspace=(bottom + top) / panel_h)
    return left
