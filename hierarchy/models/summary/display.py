"""``show``: the derived drift, corrector, diffusion and ballistic field as text."""

import sympy as sp

from hierarchy.models.summary.engine import derive


def _text(expr):
    return sp.sstr(sp.factor(expr))


def equations(model):
    """``{name: text}`` for ``f[u]``, ``g[u]``, ``Sigma[u,w]``, ``du/dt[u]`` and ``Phi``."""
    d = derive(model)
    out = {"Phi": _text(d.population)}
    for i, label in enumerate(d.labels):
        out[f"f[{label}]"] = _text(d.drift[i])
        out[f"g[{label}]"] = _text(d.corrector[i])
    for i, a in enumerate(d.labels):
        for j, b in enumerate(d.labels[i:], start=i):
            out[f"Sigma[{a},{b}]"] = _text(d.diffusion[i, j])
    for i, label in enumerate(d.labels):
        out[f"d{label}/dt"] = _text(d.field[i])
    return out


def show(model):
    """Multi-line text of :func:`equations` (with ``delta = c_delta/n``, ``n -> oo``)."""
    head = (f"spiked PCA, k = {model.order}, data {model.data}, loss {model.loss}, "
            f"penalty (a/2)|x|^2, delta = c_delta/n; state {', '.join(model.labels)}")
    lines = [head] + [f"  {name} = {text}" for name, text in equations(model).items()]
    return "\n".join(lines)
