"""``hierarchy show --config`` for the ``network`` family: the derived equations, text or latex.

Printed: the model; sympy's derivatives ``dl/dlambda_k`` and ``dl/dv_k`` in atoms
(:mod:`.gradients`); the ODE of every order parameter as expectations over the local fields;
and, when the term table applies, each statistic's expansion into coefficients times
single-field expectations with the closed form (or quadrature) that evaluates each.
"""

import sympy

from hierarchy.models.network import closed_forms
from hierarchy.models.network.derivation import needs_full_quadrature, term_table
from hierarchy.models.network.gradients import symbolic_derivatives

FORMATS = ("text", "latex")
#: terms printed per statistic (the rest are counted)
MAX_TERMS = 12


def render(net, format="text"):
    """The equations of ``net`` as ``format`` (``text`` or ``latex``)."""
    latex = format == "latex"
    show = sympy.latex if latex else sympy.sstr
    d = symbolic_derivatives(net)
    lines = [_model_line(net), ""]
    lines += _section("per-sample derivatives (sympy; G_k = g(lambda_k), D_k = g'(lambda_k), "
                      "H_n = g*(nu_n), xi the label noise)", latex)
    lines.append(_equation("yhat", show(d["yhat"]), latex))
    lines.append(_equation("y", show(d["label"]), latex))
    lines.append(_equation("l", show(d["loss"]), latex))
    for k in range(net.K):
        lines.append(_equation(f"dl/dlambda_{k + 1}", show(sympy.factor(d["dl_dlambda"][k])), latex))
    if net.trained_second_layer:
        for k in range(net.K):
            lines.append(_equation(f"dl/dv_{k + 1}", show(sympy.factor(d["dl_dv"][k])), latex))
    lines += [""] + _section("the ODE per unit of alpha = steps/N, z = (lambda, nu) ~ "
                             "N(0, [[Q, R], [R^T, T]])", latex)
    lines += _generic(net, latex)
    if not needs_full_quadrature(net):
        lines += [""] + _expansion(net, latex)
    else:
        lines += ["", "expectations: by randomised QMC over the Gaussian law of the local fields "
                  "(the loss or the data does not expand into a term table)"]
    return "\n".join(lines)


def _model_line(net):
    layer = "trained" if net.trained_second_layer else f"fixed {list(net.second_layer)}"
    teacher = (f"teacher M = {net.M} ({net.teacher_activation_name}, v* = "
               f"{list(net.teacher_second_layer)}, sigma = {net.noise:g})"
               if net.target is None else
               f"teacher M = {net.M} (target f* = {net.target_name}, sigma = {net.noise:g})")
    data = teacher if net.data == "teacher" else f"mixture with S = {net.M} signal directions"
    sgd = "".join([f"; mini-batches of B = {net.batch}" if net.batch > 1 else "",
                   "; SGD on the sphere |w_k|^2 = N" if net.constraint == "sphere" else ""])
    return (f"network: student K = {net.K} ({net.student_activation_name}, second layer "
            f"{layer}); data: {data}; loss {net.loss_name}; ridge {net.ridge:g}; eta = "
            f"{net.step:g}, eta_v = {net.step_second_layer:g}{sgd}")


def _section(title, latex):
    return [f"% {title}" if latex else f"{title}:"]


def _equation(left, right, latex):
    return f"{_latex_name(left)} = {right} \\\\" if latex else f"  {left} = {right}"


def _latex_name(name):
    return (name.replace("dl/dlambda_", r"\partial_{\lambda_").replace("dl/dv_", r"\partial_{v_")
            + ("}\\ell" if name.startswith("dl/") else ""))


def _generic(net, latex):
    ridge = net.ridge
    square = "eta^2" if net.batch == 1 else f"(eta^2/{net.batch})"  # a batch's mean gradient
    free = "F" if net.constraint == "sphere" else "d"
    lines = []
    for label in net.labels:
        if label.startswith("Q"):
            i, k = label[1:].split(".")
            text = (f"{free}{label} = -eta E[dl/dlambda_{i} lambda_{k} + dl/dlambda_{k} "
                    f"lambda_{i}]{f' - 2 eta {ridge:g} {label}' if ridge else ''}"
                    f" + {square} E[dl/dlambda_{i} dl/dlambda_{k}]")
        elif label.startswith("R"):
            i, n = label[1:].split(".")
            text = (f"{free}{label} = -eta E[dl/dlambda_{i} nu_{n}]"
                    f"{f' - eta {ridge:g} {label}' if ridge else ''}")
        else:
            text = (f"d{label} = -eta_v E[dl/dv_{label[1:]}]"
                    f"{f' - eta_v {ridge:g} {label}' if ridge else ''}")
        lines.append(f"{_latex_text(text)} \\\\" if latex else f"  {text}")
    if net.constraint == "sphere":
        lines += _sphere(latex)
    return lines


def _sphere(latex):
    """The sphere's projection of the free field ``F`` (:mod:`.sphere`)."""
    texts = ("on the sphere, the free field F above projected (Q_kk = 1):",
             "dQk.k = 0", "dQi.k = FQi.k - (Qi.k/2)(FQi.i + FQk.k)  (i != k)",
             "dRi.n = FRi.n - (Ri.n/2) FQi.i")
    if latex:
        return [f"% {texts[0]}"] + [f"{_latex_text(text)} \\\\" for text in texts[1:]]
    return [f"  {texts[0]}"] + [f"    {text}" for text in texts[1:]]


def _latex_text(text):
    return (text.replace("eta_v", r"\eta_v").replace("eta", r"\eta").replace("E[", r"\mathbb{E}[")
            .replace("dl/dlambda_", r"\partial_{\lambda}\ell_").replace("lambda_", r"\lambda_")
            .replace("nu_", r"\nu_").replace("^2", "^{2}"))


def _atom_text(net, field, entry, latex):
    teacher, a, b, c = entry
    if teacher:
        index, g, var = field - net.K + 1, "g*", "nu"
    else:
        index, g, var = field + 1, "g", "lambda"
    if latex:
        g, var = ("g^*" if teacher else "g"), ("\\nu" if teacher else "\\lambda")
    z = f"{var}_{index}"
    parts = [f"{g}({z})" + (f"^{a}" if a > 1 else "")] if a else []
    parts += [f"{g}'({z})" + (f"^{b}" if b > 1 else "")] if b else []
    parts += [z + (f"^{c}" if c > 1 else "")] if c else []
    return " ".join(parts)


def _expansion(net, latex):
    table = term_table(net)
    n = table.size
    names = list(net.labels) + [f"corrector {label}" for label in net.labels] + ["eg"]
    by_target = {}
    counts = {}
    for group in table.groups:
        how = closed_forms.plan(net, group.pattern)
        form = how[0] if how else "gauss-hermite"
        counts[form] = counts.get(form, 0) + group.rows
        for r in range(group.rows):
            atoms = " ".join(_atom_text(net, f, e, latex)
                             for f, e in zip(group.fields[r], group.pattern))
            vs = "".join(f" v{j + 1}" for j in group.v_index[r] if j >= 0)
            by_target.setdefault(int(group.target[r]), []).append(
                f"{group.coefficient[r]:+.6g}{vs} E[{atoms}]  ({form})")
    summary = ", ".join(f"{form} {count}" for form, count in sorted(counts.items()))
    lines = _section(f"term table: {table.rows} rows ({summary})", latex)
    for target in sorted(by_target):
        terms = by_target[target]
        shown = terms[:MAX_TERMS] + ([f"... {len(terms) - MAX_TERMS} more"]
                                     if len(terms) > MAX_TERMS else [])
        head = names[target] if target < 2 * n else "eg"
        prefix = "% " if latex else "  "
        lines.append(f"{prefix}{head} ({len(terms)} terms):")
        lines += [f"{prefix}    {term}" for term in shown]
    return lines
