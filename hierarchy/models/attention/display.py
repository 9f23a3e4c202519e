"""Readable renderings of a field: text, LaTeX and JSON (``hierarchy show``).

The equations are read off the sparse operators, so what is printed is exactly what the
compiled kernels evaluate. The per-letter substitution rules are printed as sympy derived
them (:mod:`hierarchy.models.attention.rules`); LaTeX goes through ``sympy.latex``.
"""

import json
from fractions import Fraction

import sympy as sp

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.rules import letter_derivatives, rules_table
from hierarchy.models.attention.variants import TIME_VARIABLE, VARIANTS
from hierarchy.models.attention.words import parse_label, word_label

#: what the hierarchy time of a parameterization describes, beyond the time map itself
TIME_NOTE = {"untied": " (slow phase)"}


def time_map(variant):
    """The time map of a variant as text, e.g. ``"t = 4 n alpha / d"`` (``n`` SGD steps).

    Parameters
    ----------
    variant : hierarchy.models.attention.variants.Variant

    Returns
    -------
    str
    """
    factor = "" if variant.time_factor == 1 else f"{variant.time_factor:g} "
    return (f"{variant.time_variable} = {factor}n alpha / d"
            f"{TIME_NOTE.get(variant.name, '')}")


#: ``[model] parameterization`` -> its time map as text (``hierarchy show``)
TIME_MAP = {name: time_map(variant) for name, variant in VARIANTS.items()}
FORMATS = ("text", "latex", "json")


def equation_terms(field, row):
    """``[(factor, coefficient name, label)]`` of one word's right-hand side."""
    terms = []
    for name in field.coefficient_names:
        A = field.operators[name]
        start, stop = A.indptr[row], A.indptr[row + 1]
        for col, value in zip(A.indices[start:stop], A.data[start:stop]):
            terms.append((Fraction(float(value)).limit_denominator(64), name, field.labels[col]))
    return terms


def equation_text(field, row):
    """Right-hand side of one word as plain text, e.g. ``-2*Gamma[1,1]*mu[1.1.2]``."""
    parts = []
    for factor, name, label in equation_terms(field, row):
        size = abs(factor)
        body = f"{name}*mu[{label}]" if size == 1 else f"{size}*{name}*mu[{label}]"
        parts.append(("- " if factor < 0 else "+ ") + body)
    if not parts:
        return "0"
    text = " ".join(parts)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def render(field, format="text", why=None):
    """Render a field.

    Parameters
    ----------
    field : hierarchy.models.attention.operators.Field
    format : {"text", "latex", "json"}
    why : str, optional
        A word label: instead of the equations, explain why the word is in the system.
    """
    if format not in FORMATS:
        raise HierarchyError(f"format must be one of {', '.join(FORMATS)}, got {format!r}",
                             field="format")
    if why is not None:
        return explain(field, why)
    if format == "json":
        return json.dumps(_as_dict(field), indent=1)
    if format == "latex":
        return _latex(field)
    return _text(field)


def config_lines(config):
    """What a config adds to its field's equations: the loss behind the coefficients."""
    loss, model = config["loss"], config["model"]
    what = (f"expression {loss['expression']}" if loss["name"] == "expression"
            else f"{loss['name']} (student {loss['student']}, teacher {loss['teacher']})")
    return [f"# loss: {what}, L = {model['tokens']} tokens; the coefficients are "
            f"kappa(mu) of this loss (docs/math.md); gamma = {model['weight_decay']:g}"]


def render_config(field, config, format="text"):
    """:func:`render` of a config's field, with the config's loss in front (``hierarchy show
    --config``); ``json`` gains a ``config`` object (``loss``, ``tokens``, ``weight_decay``)."""
    body = render(field, format)
    if format == "json":
        record = json.loads(body)
        record["config"] = {"loss": dict(config["loss"]), "tokens": config["model"]["tokens"],
                            "weight_decay": config["model"]["weight_decay"]}
        return json.dumps(record, indent=1)
    marker = "% " if format == "latex" else ""
    extra = [marker + line[2:] if marker else line for line in config_lines(config)]
    return "\n".join(extra + [body])


def _header(field):
    how = "all canonical words" if field.all_words else "words reachable from the observables"
    trainable = ",".join(map(str, field.trainable))
    return [
        f"# {field.parameterization} hierarchy: K={field.K}, trainable {{{trainable}}}, "
        f"degree {field.degree}, {len(field)} words ({how})",
        f"# time: {TIME_MAP[field.parameterization]}; mu[w] = Tr(product of the letters of w)/d",
        "# substitution rules (derived with sympy from the matrix flow):",
        *[f"#   {line}" for line in rules_table(field.parameterization, field.K,
                                                field.trainable)],
        f"# coefficients: {', '.join(field.coefficient_names)}",
    ]


def _text(field):
    tv = TIME_VARIABLE[field.parameterization]
    lines = _header(field)
    lines += [f"d mu[{label}]/d{tv} = {equation_text(field, i)}"
              for i, label in enumerate(field.labels)]
    return "\n".join(lines)


def _as_dict(field):
    return {
        "parameterization": field.parameterization,
        "K": field.K,
        "trainable": list(field.trainable),
        "degree": field.degree,
        "time": TIME_MAP[field.parameterization],
        "labels": list(field.labels),
        "coefficients": list(field.coefficient_names),
        "observables": list(field.observables),
        "rules": rules_table(field.parameterization, field.K, field.trainable),
        "equations": {label: equation_text(field, i) for i, label in enumerate(field.labels)},
    }


def latex_name(coefficient):
    """LaTeX of a coefficient name: ``Gamma[1,2]`` -> ``\\Gamma_{12}``, ``a1[1,2]`` -> ``a^{(1)}_{12}``."""
    if coefficient == "gamma":
        return r"\gamma"
    head, _, rest = coefficient.partition("[")
    sub = rest.rstrip("]").replace(",", "")
    head = {"Gamma": r"\Gamma", "beta": r"\beta", "a1": "a^{(1)}", "a2": "a^{(2)}"}.get(head, head)
    return f"{head}_{{{sub}}}"


def sympy_equations(field):
    """The field as sympy ``Eq(mu_w', rhs)`` pairs, symbols named in LaTeX (small systems)."""
    mu = {label: sp.Symbol(rf"\mu_{{{label}}}") for label in field.labels}
    coefs = {name: sp.Symbol(latex_name(name)) for name in field.coefficient_names}
    eqs = []
    for i, label in enumerate(field.labels):
        rhs = sum((sp.Rational(f.numerator, f.denominator) * coefs[name] * mu[lab]
                   for f, name, lab in equation_terms(field, i)), sp.Integer(0))
        eqs.append((mu[label], rhs))
    return eqs


def _latex(field):
    tv = TIME_VARIABLE[field.parameterization].replace("tau", r"\tau")
    lines = [f"% {line[2:]}" for line in _header(field)[:2]]
    for x, (sym, expr) in letter_derivatives(field.parameterization, field.K,
                                             field.trainable).items():
        names = {sp.Symbol(n, real=True): sp.Symbol(latex_name(n)) for n in field.coefficient_names}
        lines.append(f"\\dot{{{sp.latex(sym)}}} = {sp.latex(expr.subs(names))} \\\\")
    lines += [rf"\frac{{d{sp.latex(lhs)}}}{{d{tv}}} = {sp.latex(rhs)} \\"
              for lhs, rhs in sympy_equations(field)]
    return "\n".join(lines)


def explain(field, label):
    """Why a word is in the system: the chain of substitutions from an observable."""
    alph = field.alphabet
    canonical = word_label(parse_label(label, alph), alph)
    field.index(canonical)  # raises a clear error when the word is absent
    if field.all_words:
        return f"{canonical} is kept because all_words=True keeps every canonical word"
    chain = []
    current = canonical
    while current in field.parents:
        parent, position, coefficient = field.parents[current]
        chain.append((parent, position, coefficient, current))
        current = parent
    lines = [f"{canonical} is in the system because:",
             f"  {current}  is an observable"]
    for parent, position, coefficient, child in reversed(chain):
        letter = alph.names[parse_label(parent, alph)[position - 1]]
        lines.append(f"  -> {child}  substituting position {position} (letter {letter}) of {parent} "
                     f"by its {coefficient} term")
    return "\n".join(lines)
