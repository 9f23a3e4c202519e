"""A cheap layout for a grid of panels: margins measured from the few texts that decide them.

matplotlib's constrained layout measures the tight box of every artist of the figure, in two
passes, before the figure is drawn: for the six panels of a ``network`` solve that was about
half the time of writing ``observables.png``. A grid of equal panels needs less. Its margins
are decided by

- the widest y tick label of any panel (the left margin and the gap between columns), the
  only text measured (its width depends on the data);
- the heights of one line of tick labels, of the x and y axis labels and of the panel titles
  (their line counts times their font sizes), and of the y axis's offset text (``1e-5``,
  ``+1``) where a panel has one;
- the lines of the figure's title.

:class:`PanelMargins` is a matplotlib layout engine that sets these margins at each draw
(``subplots_adjust`` in figure fractions), so a panel whose range changes after the figure is
made (a marked fixed point) is measured as drawn. It lays out one grid of equal panels with
legends inside them; a figure with a legend outside its panels keeps constrained layout.
"""

from matplotlib.layout_engine import LayoutEngine

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


def _tick_room(axis):
    """Points between the spine and its tick labels: tick length and label padding."""
    tick = axis.majorTicks[0]
    return max(tick.get_tick_padding(), 0.0) + tick.get_pad()


class PanelMargins(LayoutEngine):
    """Margins of a grid of equal panels, measured at draw time (see the module docstring)."""

    _adjust_compatible = True
    _colorbar_gridspec = True

    def set(self, **kwargs):  # no parameters
        if kwargs:
            raise TypeError(f"PanelMargins takes no parameters, got {sorted(kwargs)}")

    def execute(self, fig):
        axes = [ax for ax in fig.axes if ax.get_visible()]
        if not axes:
            return
        renderer = fig._get_renderer()
        points = 72.0 / fig.dpi  # points per pixel
        left = bottom = top = 0.0
        for ax in axes:
            labels = [label for label in ax.yaxis.get_ticklabels() if label.get_text()]
            widest = max((label.get_window_extent(renderer).width * points for label in labels),
                         default=0.0)
            ylabel = _line_height(ax.yaxis.label)
            left = max(left, widest + _tick_room(ax.yaxis) + ylabel
                       + (ax.yaxis.labelpad if ylabel else 0.0))
            ticks = [label for label in ax.xaxis.get_ticklabels() if label.get_text()]
            xticks = max((label.get_fontsize() * LINE for label in ticks), default=0.0)
            xlabel = _line_height(ax.xaxis.label)
            bottom = max(bottom, xticks + _tick_room(ax.xaxis) + xlabel
                         + (ax.xaxis.labelpad if xlabel else 0.0))
            offset = ax.yaxis.get_major_formatter().get_offset()
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
            return  # texts larger than the figure: leave matplotlib's default margins
        fig.subplots_adjust(left=left / width, right=1.0 - right / width,
                            bottom=bottom / height, top=1.0 - (title + top) / height,
                            wspace=(left + SPARE) / panel_w, hspace=(bottom + top) / panel_h)
