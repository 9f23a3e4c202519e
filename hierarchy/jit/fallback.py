"""Compiled modules built once per process, and a loud fallback when one cannot be built.

Each user of a compiled kernel (the network family's term-table field and expectation
engines, the Gaussian-mixture field, the potential quadrature) keeps one
:class:`CompiledModules`. It compiles a source through :mod:`hierarchy.jit.cache` once per
process; when that fails (no compiler, no Cython, a compile error) it warns once per reason
with a :class:`RuntimeWarning` naming what runs on numpy instead, and remembers the failure,
so the caller falls back to its numpy path without trying again.
"""

import warnings

from hierarchy.core.errors import HierarchyError

#: the fallback warning of most kernels
NUMPY_INSTEAD = "{what} runs on numpy instead of compiled code: {reason}"


class CompiledModules:
    """The compiled modules of one kind of kernel, and the fallbacks warned about.

    Parameters
    ----------
    what : str
        What runs on numpy when a module cannot be had (the warning's subject).
    message : str
        The warning, with ``{what}`` and ``{reason}`` in it.
    """

    def __init__(self, what, message=NUMPY_INSTEAD):
        self.what = what
        self.message = message
        self._modules = {}
        self._warned = set()

    def module(self, source, name_hint, *, key=None, failure="compiling it failed", what=None):
        """The compiled module of the Cython ``source``, or None after a warning, once, when
        it cannot be compiled (``failure (the error's first line)``).

        Parameters
        ----------
        source : str
        name_hint : str
            Readable prefix of the module's name in the cache.
        key : hashable, optional
            What identifies the module in this process (default: ``source``).
        what : str, optional
            The warning's subject, when it is not the one given at construction.
        """
        key = source if key is None else key
        if key not in self._modules:
            from hierarchy.jit import cache  # deferred: the cache is needed only to build
            try:
                self._modules[key] = cache.compile_pyx(source, name_hint)
            except (ImportError, HierarchyError) as error:
                first_line = str(error).splitlines()[0] if str(error) else repr(error)
                self.warn(f"{failure} ({first_line})", what=what)
                self._modules[key] = None
        return self._modules[key]

    def template_module(self, template_name, name_hint, context, **options):
        """The compiled module of ``templates/<template_name>`` rendered with ``context``.

        A module built before is found through the cache's index under
        :func:`hierarchy.jit.render.template_key` (the templates' texts, the context, the
        toolchain), with no render: a warm command imports no jinja2 and renders nothing
        (about 0.02 s a kernel). Otherwise the template is rendered and compiled as by
        :meth:`module` (its fallback included), and the index records the module.

        Parameters
        ----------
        template_name : str
        name_hint : str
        context : dict
            The template's variables, JSON data.
        **options
            ``failure``, ``what``: as for :meth:`module`.
        """
        from hierarchy.jit import cache, render  # deferred: the cache is needed only here
        try:
            key = render.template_key(template_name, context,
                                      cache.toolchain_description(cache.DEFAULT_COMPILE_ARGS))
        except (ImportError, OSError, HierarchyError):  # no Cython, a missing template
            key = None
        if key is not None and key not in self._modules:
            name = cache.index_lookup(key)
            if name is not None:
                try:
                    self._modules[key] = cache.load_module(name)
                except (ImportError, OSError, HierarchyError):  # gone since: built again
                    pass
        if key is None or key not in self._modules:
            source = render.render_template(template_name, **context)
            module = self.module(source, name_hint, key=key, **options)
            if module is not None and key is not None:
                cache.index_record(key, module.__name__, template=template_name)
            return module
        return self._modules[key]

    def warn(self, reason, what=None):
        """Say once per subject and reason that the numpy path runs instead."""
        subject = self.what if what is None else what
        if (subject, reason) not in self._warned:
            self._warned.add((subject, reason))
            warnings.warn(self.message.format(what=subject, reason=reason), RuntimeWarning,
                          stacklevel=4)

    def forget(self):
        """Forget the modules loaded and the fallbacks warned about in this process: the next
        :meth:`module` compiles (or fails, and warns) afresh; tests use it to observe a
        fallback."""
        self._modules.clear()
        self._warned.clear()
