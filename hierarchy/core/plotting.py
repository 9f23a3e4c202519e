"""The shared plot style: readable labels, degree colours, constant observables, saving.

Every picture the package or the figure scripts write goes through this module, so they
all follow the same rules:

- titles and legends name a state in mathematics, not by its raw label: every figure takes
  a ``math_label`` callable, the family's
  (:meth:`hierarchy.models.base.ModelFamily.math_label`; the attention family's words are
  typeset by :mod:`hierarchy.models.attention.plotting`), and time axes take the family's
  ``time_label``;
- the truncation degree is always called ``M``, and successive degrees get successive
  colours of one sequential colormap (:func:`degree_colors`);
- observables that do not move (a fixed teacher's ``t₂``, ``q₂₂``) are drawn in a panel
  of their own (:func:`split_constant`), so they do not squash the moving ones;
- figures use matplotlib's constrained layout (the suptitle gets its own room), or, for the
  statistics of a run (the picture of every ``hierarchy solve``), the cheaper margins of
  :mod:`hierarchy.core.panel_margins`; they are saved at :data:`MIN_DPI` or more
  (:func:`save_figure`).

Figures are built on the Agg canvas without pyplot, so plotting never touches a global
backend or leaks figures; each ``make_*_figure`` returns the :class:`matplotlib.figure.Figure`
before it is saved, which is what the tests inspect. matplotlib is imported inside the
functions that draw: it is a heavy dependency that only plotting needs.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from hierarchy.core.errors import HierarchyError

MIN_DPI = 150
DEGREE_CMAP = "viridis"
LEGEND_FONTSIZE = 8
_SUB = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")

# matplotlib builds its font cache on first use and logs "generated new fontManager" at INFO;
# the CLI logs at INFO, and that line is not the run's business.
logging.getLogger("matplotlib.font_manager").setLevel(logging.WARNING)


# ----------------------------------------------------------------------------- labels

def subscript(indices):
    """Unicode subscript of 1-based indices: ``(1, 2)`` -> ``₁₂`` (comma-separated if > 9)."""
    parts = [str(int(k)) for k in indices]
    joiner = "," if any(len(p) > 1 for p in parts) else ""
    return joiner.join(parts).translate(_SUB)


def plain_label(label):
    """The default ``math_label``: the label itself."""
    return str(label)


# ----------------------------------------------------------------------------- style

def degree_colors(degrees, cmap=DEGREE_CMAP):
    """One colour per degree, in order along a sequential colormap.

    Parameters
    ----------
    degrees : sequence of int
        The truncation degrees ``M``, in increasing order.
    cmap : str
        A sequential matplotlib colormap (lightness increases along it).

    Returns
    -------
    list of tuple
        RGBA colours; the lowest degree is the darkest.
    """
    from matplotlib import colormaps

    n = len(degrees)
    positions = np.linspace(0.0, 0.85, n) if n > 1 else np.array([0.4])
    return [tuple(colormaps[cmap](float(p))) for p in positions]


def split_constant(series, rtol=1e-9):
    """Separate constant observables from moving ones.

    Parameters
    ----------
    series : dict
        ``{label: 1-d array}`` trajectories (NaNs after a stop are ignored).
    rtol : float
        A trajectory whose range is at most ``rtol · max(1, max |x|)`` is constant.

    Returns
    -------
    (list, list)
        Labels of the moving and of the constant observables, in input order.
    """
    moving, constant = [], []
    for label, values in series.items():
        values = np.asarray(values, dtype=float)
        finite = values[np.isfinite(values)]
        still = finite.size == 0 or np.ptp(finite) <= rtol * max(1.0, np.max(np.abs(finite)))
        (constant if still else moving).append(label)
    return moving, constant


def new_figure(nrows=1, ncols=1, figsize=(6.4, 4.0), layout="constrained", **subplot_kw):
    """A figure on an Agg canvas and its axes array (always 2-d).

    ``layout`` is ``"constrained"`` (matplotlib's constrained layout) or ``"panels"``
    (:class:`hierarchy.core.panel_margins.PanelFigure`: a grid of equal panels with their
    legends inside, at a fraction of the cost).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if layout == "panels":
        from hierarchy.core.panel_margins import PanelFigure

        fig = PanelFigure(figsize=figsize)
    else:
        fig = Figure(figsize=figsize, layout=layout)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, axes


def panel_grid(n, width=3.3, height=3.4, max_columns=4, extra_width=0.4,
               layout="constrained"):
    """``n`` panels in rows of at most ``max_columns``; returns the figure and the ``n`` axes.

    Unused cells of the last row are hidden. ``layout`` as in :func:`new_figure`.
    """
    ncols = max(1, min(n, max_columns))
    nrows = -(-n // ncols)
    figsize = (width * ncols + extra_width, height * nrows + 0.3)
    fig, axes = new_figure(nrows, ncols, figsize=figsize, layout=layout)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def legend(ax, **kwargs):
    """An axes legend at the readable size (:data:`LEGEND_FONTSIZE`)."""
    kwargs.setdefault("fontsize", LEGEND_FONTSIZE)
    return ax.legend(**kwargs)


def figure_legend(fig, axes, loc="outside right upper", **kwargs):
    """One legend for the whole figure: every labelled curve of ``axes``, once, in order.

    A curve drawn in some panels only (e.g. an uncertified stretch) still gets its entry.
    The default place is outside the panels, so it never covers data.
    """
    handles = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(text, handle)
    return fig.legend(list(handles.values()), list(handles), loc=loc, fontsize=LEGEND_FONTSIZE,
                      **kwargs)


def fit_title(fig, text, fontsize=10):
    """Set ``text`` as the figure's title, each of its lines wrapped to the figure's width.

    A long title (a family's settings) would otherwise run past the right edge of the PNG.
    """
    import textwrap

    width = max(20, int(fig.get_figwidth() * 72 / (0.62 * fontsize)))
    lines = [wrapped for line in str(text).split("\n")
             for wrapped in (textwrap.wrap(line, width) or [""])]
    return fig.suptitle("\n".join(lines), fontsize=fontsize)


#: zlib level of the PNGs: 1 writes faster than Pillow's default 6, for somewhat larger
#: files (lossless either way; zlib is part of every figure's save)
PNG_COMPRESS_LEVEL = 1


def save_figure(fig, path, dpi=MIN_DPI):
    """Save a figure as PNG at ``dpi`` (at least :data:`MIN_DPI`) and return the path."""
    if not dpi >= MIN_DPI:
        raise HierarchyError(f"dpi must be at least {MIN_DPI}, got {dpi!r}", field="dpi")
    options = {}
    if str(path).lower().endswith(".png"):
        options["pil_kwargs"] = {"compress_level": PNG_COMPRESS_LEVEL}
    fig.savefig(path, dpi=dpi, **options)
    return path


# ----------------------------------------------------------------------------- extrapolated

EXTRAPOLATED_COLOR = "tab:purple"
EXTRAPOLATED_LABEL = "extrapolated M → ∞"
UNCERTIFIED_LABEL = "extrapolated, not certified"


def plot_extrapolated(ax, t, estimate, error, valid, color=EXTRAPOLATED_COLOR,
                      label=EXTRAPOLATED_LABEL):
    """Draw the degree-extrapolated curve: certified where ``valid``, marked as not elsewhere.

    Certified times get a solid line with its ``± error`` band; the other times a faint
    dotted line labelled :data:`UNCERTIFIED_LABEL`, drawn without rescaling the axes (an
    uncertified estimate can be far off), so it is never shown as if it were valid.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    t : array (T,)
    estimate, error : arrays (T,)
        The extrapolation and its error estimate.
    valid : array of bool (T,)
        Where the error estimate is below the tolerance (``hierarchy.study.analysis.certified``).
    color, label : str

    Returns
    -------
    numpy.ndarray of bool
        ``valid`` as drawn.
    """
    t, estimate = np.asarray(t, float), np.asarray(estimate, float)
    error = np.asarray(error, float)
    valid = np.asarray(valid, bool) & np.isfinite(estimate) & np.isfinite(error)
    if valid.any():
        # broad and translucent: a reference drawn over it stays visible
        ax.plot(t, np.where(valid, estimate, np.nan), "-", marker=".", ms=4, color=color,
                lw=3.0, alpha=0.7, label=label, zorder=4)
        ax.fill_between(t, estimate - error, estimate + error, where=valid, color=color,
                        alpha=0.25, lw=0, zorder=3)
    # the uncertified stretches, joined to their certified neighbours, and only where they
    # stay near the panel's other data (a line's data limits would rescale the panel)
    shown = ~valid
    shown[1:] |= ~valid[:-1]
    shown[:-1] |= ~valid[1:]
    lo, hi = _data_range(ax, estimate[valid])
    with np.errstate(invalid="ignore"):
        shown &= (estimate >= lo) & (estimate <= hi)
    if (shown & ~valid).any():
        ax.plot(t, np.where(shown, estimate, np.nan), ":", color=color, lw=1.0, alpha=0.5,
                label=UNCERTIFIED_LABEL)
    return valid


def _data_range(ax, extra):
    """The y range of the panel's data so far (and ``extra``), widened by its span each side."""
    lo, hi = ax.dataLim.intervaly if ax.has_data() else (np.inf, -np.inf)
    finite = np.asarray(extra, float)
    finite = finite[np.isfinite(finite)]
    if finite.size:
        lo, hi = min(lo, finite.min()), max(hi, finite.max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return -np.inf, np.inf
    span = max(hi - lo, 1e-12 * max(1.0, abs(hi)))
    return lo - span, hi + span


# ----------------------------------------------------------------------------- solve, sgd

def make_observables_figure(t, series, time_name="t", title="", stop_time=None,
                            math_label=plain_label, curves=None, curve_t=None, beyond_from=None,
                            unchecked=False):
    """The trajectories of a solve: moving observables, constants in a narrow panel.

    Parameters
    ----------
    t : array (T,)
    series : dict
        ``{label: array (T,)}``.
    time_name : str
        ``"t"`` or ``"tau"`` (the solver's time variable) or a ready axis label.
    title : str
        Suptitle (the run's model and degree).
    stop_time : float, optional
        Where a stopped run ended (dotted line).
    math_label : callable
        ``label -> str`` of the legend (the family's ``math_label``).
    curves : dict, optional
        ``{name: {label: array (T',)}}`` on the times ``curve_t``: more answers for the same
        observables (the extrapolated one, a continuation), drawn in the observable's colour
        with a dash style per name (named once in the legend).
    curve_t : array (T',), optional
        Times of ``curves`` (default ``t``).
    beyond_from : float or dict, optional
        Shade the region from this time on, labelled "beyond validity horizon"; a dict
        ``{label: time or None}`` gives each observable its own horizon, and each panel is
        shaded from the earliest of its own observables' (a panel of constants valid to the
        end is not shaded).
    unchecked : bool
        Shade the whole run, labelled "unchecked (no error estimate)".

    Returns
    -------
    matplotlib.figure.Figure
    """
    curves, curve_t = curves or {}, t if curve_t is None else curve_t
    moving, constant = split_constant(series)
    panels = [("moving observables", moving)] + ([("constant", constant)] if constant else [])
    fig, axes = new_figure(1, len(panels), figsize=(8.0 if constant else 6.4, 4.2),
                           width_ratios=[3, 1][:len(panels)])
    xlabel = {"t": "t", "tau": "τ"}.get(time_name, time_name)
    for ax, (name, labels) in zip(axes[0], panels):
        horizon = panel_horizon(beyond_from, labels)
        for label in labels:
            line, = ax.plot(t, series[label], lw=1.4, label=math_label(label))
            for k, (curve, values) in enumerate(curves.items()):
                if label in values:
                    ax.plot(curve_t, values[label], color=line.get_color(), lw=1.2,
                            ls=("--", ":", "-.")[k % 3],
                            label=curve if label == labels[0] else None)
        if stop_time is not None:
            ax.axvline(stop_time, color="k", ls=":", lw=1)
        end = max(np.max(t) if np.size(t) else 0.0, np.max(curve_t) if np.size(curve_t) else 0.0)
        if unchecked:
            ax.axvspan(0.0, end, color="0.5", alpha=0.15, lw=0,
                       label="unchecked (no error estimate)")
        elif horizon is not None:
            ax.axvspan(horizon, end, color="0.5", alpha=0.2, lw=0,
                       label="beyond validity horizon")
        if curves and labels:
            _answer_limits(ax, t, series, curve_t, curves, labels, horizon)
        ax.set(xlabel=xlabel, ylabel="moment μ", title=name)
        ax.grid(alpha=0.3)
        if labels and name == "constant":  # a narrow panel: its legend below, off the ticks
            legend(ax, loc="upper center", bbox_to_anchor=(0.5, -0.18))
        elif labels:
            legend(ax, ncol=max(1, (len(labels) + 7) // 8))
    if title:
        fit_title(fig, title)
    return fig


def panel_horizon(beyond_from, labels):
    """Where a panel of ``labels`` is shaded from: ``beyond_from`` itself (one time for every
    panel, or None), or the earliest of its labels' own times (``beyond_from`` a dict
    ``{label: time or None}``; None when every label is valid to the end)."""
    if not isinstance(beyond_from, dict):
        return beyond_from
    times = [beyond_from[label] for label in labels if beyond_from.get(label) is not None]
    return min(times) if times else None


def _answer_limits(ax, t, series, curve_t, curves, labels, beyond_from):
    """y-limits from the answers (``curves``) and the trajectories inside the validity
    horizon: a zero closure that runs away past the radius is clipped instead of flattening
    the answer."""
    inside = np.asarray(t) <= (np.inf if beyond_from is None else beyond_from)
    values = [np.asarray(series[label])[inside] for label in labels]
    values += [np.asarray(curve[label]) for curve in curves.values() for label in labels
               if label in curve]
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.zeros(0)
    if finite.size:
        low, high = float(finite.min()), float(finite.max())
        pad = 0.08 * (high - low) or 0.05 * max(abs(high), 1e-12)
        ax.set_ylim(low - pad, high + pad)


def over_seeds(values, reduce=np.nanmean):
    """``reduce`` over seeds (axis 0) ignoring unfinished seeds' NaNs; NaN where none finished."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN columns give NaN
        return reduce(values, axis=0)


def make_sgd_figure(t, mu_seeds, loss_seeds, labels, math_label=plain_label, time_label="t",
                    max_panels=6, title=""):
    """Online SGD: one panel per moving observable (seed mean, every seed, min–max band) and
    the loss.

    Parameters
    ----------
    t : array (T,)
    mu_seeds : array (S, T, n)
        Moments of the words ``labels`` per seed.
    loss_seeds : array (S, T)
    labels : list of str
    math_label : callable
        ``label -> str`` of the titles (the family's ``math_label``).
    time_label : str
        Label of the time axis.
    max_panels : int
    title : str
        The run's model and settings (the figure's title).

    Returns
    -------
    matplotlib.figure.Figure
        With up to :data:`MAX_CURVES` seeds each seed is drawn as a thin line as well, so
        the spread shows even when the band is narrow (two seeds: the band is the two
        curves).
    """
    mean, loss = over_seeds(mu_seeds), over_seeds(loss_seeds)
    moving, _ = split_constant({label: mean[:, i] for i, label in enumerate(labels)})
    shown = moving[:max_panels]
    seeds = mu_seeds.shape[0]
    # rows of at most four panels: seven in one row made a 3150-pixel-wide strip
    fig, axes = panel_grid(len(shown) + 1, width=3.0, height=3.2, extra_width=0.0)
    xlabel = time_label
    for ax, label in zip(axes, shown):
        i = list(labels).index(label)
        ax.plot(t, mean[:, i], color="C0", lw=1.6, label="seed mean")
        if seeds > 1:
            ax.fill_between(t, over_seeds(mu_seeds[:, :, i], np.nanmin),
                            over_seeds(mu_seeds[:, :, i], np.nanmax),
                            color="C0", alpha=0.3, lw=0, label="seed range (min–max)")
        if 1 < seeds <= MAX_CURVES:
            ax.plot(t, mu_seeds[:, :, i].T, color="C1", lw=0.6, alpha=0.8)
            ax.plot([], [], color="C1", lw=0.6, label=f"each of {seeds} seeds")
        name = math_label(label)
        heading = name
        if seeds > 1:  # a spread too narrow to see is still stated
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                width = np.nanmax(np.nanmax(mu_seeds[:, :, i], 0) - np.nanmin(mu_seeds[:, :, i], 0))
            heading += f"  (seed range ≤ {width:.1e})"
        ax.set(xlabel=xlabel, ylabel=name)
        ax.set_title(heading, fontsize=9)
    ax = axes[-1]
    ax.plot(t, loss, color="C3")
    ax.set(title="loss (minibatch)", xlabel=xlabel, ylabel="loss")
    if shown and seeds > 1:
        figure_legend(fig, list(axes), loc="outside lower center", ncol=3)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


# ----------------------------------------------------------------------------- statistics

#: Most curves a panel of statistics draws one by one (more: thin lines and their envelope)
MAX_CURVES = 8


def plain_log_axis(ax, values, axis="x"):
    """A log axis with ticks at ``values`` and plain labels (``50, 100, 200, 400``).

    matplotlib's default labels the minor ticks of a short log range in scientific form,
    and they run together (``2×10³×10⁴×10²``); ticks at the data's own values do not.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    which = ax.xaxis if axis == "x" else ax.yaxis
    which.set_major_locator(FixedLocator(sorted(float(v) for v in values)))
    which.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    which.set_minor_locator(NullLocator())
    which.set_minor_formatter(NullFormatter())


def plot_statistics_group(ax, t, values, labels, math_label=plain_label, spread=None):
    """One group of statistics against time: each curve labelled if there are few.

    Up to :data:`MAX_CURVES` curves are drawn in colour with their names (and, given
    ``spread = (low, high)`` arrays like ``values``, a band of the same colour); more are
    drawn as thin grey lines with the group's smallest, median and largest value at each
    time.
    """
    values = np.asarray(values, float)
    if len(labels) <= MAX_CURVES:
        for j, label in enumerate(labels):
            line, = ax.plot(t, values[:, j], lw=1.3, label=math_label(label))
            if spread is not None:
                ax.fill_between(t, spread[0][:, j], spread[1][:, j], color=line.get_color(),
                                alpha=0.2, lw=0)
        return
    ax.plot(t, values, color="0.6", lw=0.5, alpha=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for reduce, style, color, name in ((np.nanmax, "-", "k", "largest"),
                                           (np.nanmedian, "--", "C3", "median"),
                                           (np.nanmin, "-", "C0", "smallest")):
            ax.plot(t, reduce(values, axis=1), style, color=color, lw=1.3,
                    label=f"{name} of {len(labels)}")


#: the label of the shaded times a solve could not certify (:func:`make_statistics_figure`)
UNCERTIFIED_SPAN_LABEL = "NOT CERTIFIED"


#: at most this many intervals between the major ticks of a statistics panel (matplotlib's
#: ``MaxNLocator``: 4 to 6 ticks): enough for a 3.6-inch panel, and each tick is three
#: artists drawn, a fifth of the time of drawing a solve's figure at the default (up to 9)
STATISTICS_TICKS = 4


def make_statistics_figure(t, y, labels, title, math_label=plain_label, time_label="t",
                           extra_panels=(), spread=None, spread_name="", uncertified_from=None):
    """A run of many statistics: one panel per group of labels, then the family's panels.

    Parameters
    ----------
    t : array (T,)
    y : array (T, n)
        The statistics ``labels`` at the times ``t``.
    labels : list of str
    title : str
        The run: family and settings (:func:`hierarchy.core.summary_table.settings_title`).
    math_label : callable
    time_label : str
    extra_panels : sequence of (str, dict)
        More panels: a title and ``{curve name: array (T,)}`` on the same times (e.g. the
        fraction of runs serving ``j`` classes).
    spread : (array (T, n), array (T, n)), optional
        A band about each curve of the small groups (e.g. the runs' 10 %–90 % range),
        named ``spread_name`` in the title.
    uncertified_from : float, optional
        The first time a solve could not certify: from there on every panel is shaded and
        labelled :data:`UNCERTIFIED_SPAN_LABEL`, and the title says so.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from hierarchy.core.summary_table import groups  # noqa: PLC0415 (one idea per module)

    y = np.asarray(y, float)
    grouped = groups(labels)
    fig, axes = panel_grid(len(grouped) + len(extra_panels), width=3.6, height=3.2,
                           max_columns=3, layout="panels")
    for ax in axes:
        ax.locator_params(nbins=STATISTICS_TICKS)
    index = {label: j for j, label in enumerate(labels)}
    for ax, (name, members) in zip(axes, grouped.items()):
        columns = [index[m] for m in members]
        band = None if spread is None else (spread[0][:, columns], spread[1][:, columns])
        plot_statistics_group(ax, t, y[:, columns], members, math_label, band)
        ax.set(title=f"{name}: {len(members)} statistic{'s' * (len(members) > 1)}",
               xlabel=time_label)
    for ax, (name, curves) in zip(axes[len(grouped):], extra_panels):
        for curve, values in curves.items():
            ax.plot(t, values, lw=1.4, label=curve)
        ax.set(title=name, xlabel=time_label)
    for ax in axes:
        if uncertified_from is not None:
            ax.axvspan(uncertified_from, np.max(t), color="tab:red", alpha=0.12, lw=0,
                       label=UNCERTIFIED_SPAN_LABEL)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[1]:
            legend(ax)
    if uncertified_from is not None:
        title += (f" -- {UNCERTIFIED_SPAN_LABEL} from {time_label} = "
                  f"{uncertified_from:.6g} (shaded)")
    heading = fit_title(fig, title + (f"\nbands: {spread_name}" if spread is not None and
                                      spread_name else ""))
    # the panels keep their size: the figure grows by the title's lines beyond the first
    extra_lines = heading.get_text().count("\n")
    fig.set_size_inches(fig.get_figwidth(),
                        fig.get_figheight() + extra_lines * heading.get_fontsize() * 1.25 / 72)
    return fig


def make_paired_figure(t, u_runs, ode_paired, ode_mean_start, labels, title,
                       math_label=plain_label, time_label="t", extra_panels=(), note=""):
    """An SGD ensemble beside its ODEs: one panel per statistic, then the family's panels.

    Each panel draws the runs (thin lines), their mean with a band of two standard errors
    of the mean, each run's paired ODE (the ODE from that run's own initial statistics;
    thin dashed lines of another colour) and the ODE from the mean of the runs' starts
    (black). When the runs share one start the paired ODEs are that one ODE: they are not
    drawn, and the black line says so. One legend for the figure.

    Parameters
    ----------
    t : array (T,)
    u_runs, ode_paired : array (runs, T, n)
    ode_mean_start : array (T, n)
    labels : list of str
        The statistics drawn (columns of the arrays).
    title : str
    math_label : callable
    time_label : str
    extra_panels : sequence of (str, dict)
        As in :func:`make_statistics_figure`.
    note : str
        A line added under the title (e.g. how the runs were matched).

    Returns
    -------
    matplotlib.figure.Figure
    """
    u_runs, ode_paired = np.asarray(u_runs, float), np.asarray(ode_paired, float)
    ode_mean_start = np.asarray(ode_mean_start, float)
    fig, axes = panel_grid(len(labels) + len(extra_panels), width=3.4, height=3.0,
                           max_columns=4)
    one_start = bool(np.allclose(ode_paired, ode_mean_start[None], rtol=1e-9, atol=1e-12))
    mean, width = run_mean_band(u_runs)
    for j, (ax, label) in enumerate(zip(axes, labels)):
        for r in range(len(u_runs)):
            first = r == 0
            ax.plot(t, u_runs[r, :, j], "-", color="C0", lw=0.7, alpha=0.45,
                    label="SGD runs" if first else None)
            if not one_start:
                ax.plot(t, ode_paired[r, :, j], "--", color="C1", lw=0.7, alpha=0.7,
                        label="paired ODEs (each run's own start)" if first else None)
        ax.fill_between(t, mean[:, j] - width[:, j], mean[:, j] + width[:, j], color="C3",
                        alpha=0.35, lw=0, label=MEAN_BAND_LABEL, zorder=3)
        ax.plot(t, mean[:, j], "-", color="C3", lw=1.2, zorder=3, label="mean of the runs")
        ax.plot(t, ode_mean_start[:, j], "-", color="k", lw=1.5, zorder=4,
                label="ODE (the runs' common start)" if one_start else "ODE from the mean start")
        ax.set(title=math_label(label), xlabel=time_label, ylabel=math_label(label))
    for ax, (name, curves) in zip(axes[len(labels):], extra_panels):
        for curve, values in curves.items():
            ax.plot(t, values, lw=1.4, label=curve)
        ax.set(title=name, xlabel=time_label)
        legend(ax)
    for ax in axes:
        ax.grid(alpha=0.3)
    figure_legend(fig, axes[:max(len(labels), 1)], loc="outside lower center", ncol=3)
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=10)
    return fig


#: the legend entry of the band about the runs' mean (:func:`make_paired_figure`)
MEAN_BAND_LABEL = "± 2 standard errors of the mean"


def run_mean_band(u_runs):
    """``(mean, 2 se)`` over the runs (axis 0) of ``u_runs`` ``(runs, T, n)``, ignoring runs
    that stopped (NaN); the band is 0 with fewer than two runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # a time no run reached: NaN
        mean = np.nanmean(u_runs, axis=0)
        count = np.sum(np.isfinite(u_runs), axis=0)
        spread = np.nanstd(u_runs, axis=0, ddof=1) if len(u_runs) > 1 else np.zeros_like(mean)
    return mean, np.where(count > 1, 2.0 * spread / np.sqrt(np.maximum(count, 1)), 0.0)


# ----------------------------------------------------------------------------- study

def make_errors_figure(analysis, degrees, labels, math_label=plain_label, extrapolated=None):
    """The study's error against the degree ``M`` (log scale), one panel per observable.

    Parameters
    ----------
    analysis : dict
        :func:`hierarchy.study.analysis.analyse` output (``errors``, ``rate``, ``noise_floor``).
    degrees : list of int
    labels : list of str
    math_label : callable
        ``label -> str`` of the titles (the family's ``math_label``).
    extrapolated : dict, optional
        :func:`hierarchy.study.analysis.analyse_extrapolation`: each reference's error of the
        extrapolated curve, drawn as a horizontal line.

    Returns
    -------
    matplotlib.figure.Figure
    """
    by = {(e["reference"], e["observable"], e["degree"]): e["error"] for e in analysis["errors"]}
    extra = (extrapolated or {}).get("observables", {})
    fig, axes = panel_grid(len(labels))
    references = (("matrix-flow", "o-", "matrix flow"), ("sgd", "s--", "SGD"))
    shorts = {"matrix-flow": "flow", "sgd": "SGD"}
    for ax, label in zip(axes, labels):
        ratios = []
        for ref, style, name in references:
            short = shorts[ref]
            if ref in analysis["rate"]:
                ax.semilogy(degrees, [by[(ref, label, M)] for M in degrees], style,
                            label=f"vs {name}")
                ratios.append(f"{analysis['rate'][ref][label]:.2f} ({short})")
        for ref, style, name in references:
            error = extra.get(label, {}).get(ref, {}).get("error")
            if error is not None and np.isfinite(error) and error > 0:
                ax.axhline(error, color=EXTRAPOLATED_COLOR, lw=1.2, ls=style[1:],
                           label=f"{EXTRAPOLATED_LABEL} vs {name}")
        if label in analysis.get("noise_floor", {}):
            ax.axhline(analysis["noise_floor"][label], color="gray", lw=0.8, ls=":",
                       label="SGD noise floor")
        ax.set(xlabel="degree M", ylabel="max |error| over time")
        ax.set_title(f"{math_label(label)}\nratio per degree: {', '.join(ratios)}", fontsize=9)
        ax.set_xticks(list(degrees))
    # one legend outside the panels: inside, it covered the low-degree points
    figure_legend(fig, axes, loc="outside lower center", ncol=3)
    fig.suptitle("Truncation error against the degree M", fontsize=10)
    return fig


def make_trajectories_figure(t, degrees, labels, hierarchy_mu, flow_mu=None, sgd_mu_seeds=None,
                             math_label=plain_label, time_label="t", extrapolation=None):
    """Each observable: the degree-``M`` truncations against the matrix flow and SGD.

    Parameters
    ----------
    t : array (T,)
    degrees : list of int
    labels : list of str
    hierarchy_mu : array (D, T, n)
    flow_mu : array (T, n), optional
    sgd_mu_seeds : array (S, T, n), optional
    math_label : callable
        ``label -> str`` of the titles (the family's ``math_label``).
    time_label : str
        Label of the time axis.
    extrapolation : (array (T, n), array (T, n)), optional
        The degree-extrapolated estimate and its error (``hierarchy.study.analysis``), drawn by
        :func:`plot_extrapolated` where ``hierarchy.study.analysis.certified``.

    Returns
    -------
    matplotlib.figure.Figure
        One legend for the whole figure (the curves are the same in every panel).
    """
    valid = None
    if extrapolation is not None:
        from hierarchy.study.analysis import certified  # noqa: PLC0415  (deferred: the study
        # imports this module to draw its figures)

        valid = certified(*extrapolation)
    fig, axes = panel_grid(len(labels), extra_width=1.6)
    colors = degree_colors(degrees)
    for i, (ax, label) in enumerate(zip(axes, labels)):
        for color, m, M in zip(colors, range(len(degrees)), degrees):
            ax.plot(t, hierarchy_mu[m, :, i], color=color, lw=1.2, label=f"M = {M}")
        if flow_mu is not None:
            ax.plot(t, flow_mu[:, i], "k--", lw=1.2, label="matrix flow")
        if sgd_mu_seeds is not None:
            ax.plot(t, sgd_mu_seeds[:, :, i].mean(0), "r:", lw=1.5, label="SGD (seed mean)")
            ax.fill_between(t, sgd_mu_seeds[:, :, i].min(0), sgd_mu_seeds[:, :, i].max(0),
                            color="r", alpha=0.2, lw=0)
        if valid is not None:
            plot_extrapolated(ax, t, extrapolation[0][:, i], extrapolation[1][:, i], valid[:, i])
        name = math_label(label)
        ax.set(title=name, xlabel=time_label, ylabel=name)
    figure_legend(fig, axes)
    fig.suptitle("Truncated hierarchies against the references", fontsize=10)
    return fig
