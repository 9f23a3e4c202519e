"""The kernel templates: ``templates/*.j2``, read and rendered with jinja2.

The templates live in the top-level ``templates/`` folder of the checkout and ship as the
package data ``hierarchy.templates``. :func:`environment` is the one jinja2 environment:
strict (an undefined name is an error), with ``trim_blocks``/``lstrip_blocks`` so that block
tags leave no blank lines in the generated Cython. It reads every template through
:func:`template_text` at render time and caches nothing, so the text rendered is always the
text whose hash enters the build keys. jinja2 is imported on the first render: a command
whose kernels are all in the cache renders nothing (:func:`template_key` names a rendered
module without rendering it).
"""

import functools
import hashlib
import importlib.resources
import json
from pathlib import Path

from hierarchy.core.errors import HierarchyError

#: The checkout's template folder, used when the package data is not installed.
REPO_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def template_text(name):
    """Text of ``templates/<name>``: the installed package data, else the checkout's folder.

    Parameters
    ----------
    name : str
        File name, e.g. ``"rhs_table.pyx.j2"``.

    Returns
    -------
    str

    Raises
    ------
    HierarchyError
        The template is missing from the installation.
    """
    try:
        resource = importlib.resources.files("hierarchy.templates") / name
        if resource.is_file():
            return resource.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    path = REPO_TEMPLATES / name
    if not path.is_file():
        raise HierarchyError(f"kernel template {name} is missing from the installation",
                             field="templates")
    return path.read_text(encoding="utf-8")


def _current_template_text(name):
    # Looked up at call time, so that a replaced ``template_text`` (tests) is the one read.
    return template_text(name)


@functools.cache
def environment():
    """The jinja2 environment of every template (made on first use)."""
    import jinja2  # noqa: PLC0415  (only a render needs it)

    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_current_template_text), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, cache_size=0)


def render_template(template_name, **context):
    """Render ``templates/<template_name>`` with :func:`environment`.

    Parameters
    ----------
    template_name : str
    **context
        The template's variables (an unknown one is an error).

    Returns
    -------
    str
        The generated source.
    """
    return environment().get_template(template_name).render(**context)


def template_names():
    """The names of every template (``*.j2``) shipped, sorted."""
    try:
        folder = importlib.resources.files("hierarchy.templates")
        names = [entry.name for entry in folder.iterdir() if entry.name.endswith(".j2")]
        if names:
            return sorted(names)
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    return sorted(path.name for path in REPO_TEMPLATES.glob("*.j2"))


def template_key(template_name, context, toolchain):
    """sha256 hex digest of everything that decides the module of a render: every
    template's text (a template includes others), the template's name, its ``context``
    (JSON data) and ``toolchain`` (:func:`hierarchy.jit.compiler.toolchain_description`).

    The same key means the same rendered source built by the same compiler, so the cache's
    index (:meth:`hierarchy.jit.cache.Cache.index_lookup`) finds the module without jinja2.

    Raises
    ------
    TypeError
        ``context`` is not JSON data.
    """
    digest = hashlib.sha256()
    digest.update(json.dumps([template_name, context, toolchain], sort_keys=True).encode())
    for name in template_names():
        digest.update(b"\0" + name.encode() + b"\0" + template_text(name).encode())
    return digest.hexdigest()
