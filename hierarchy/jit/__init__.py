"""From generated source to a loaded extension module, safely and once.

- :mod:`~hierarchy.jit.render`: the jinja2 environment over the top-level ``templates/``;
- :mod:`~hierarchy.jit.cache`: :class:`~hierarchy.jit.cache.Cache`, the build cache (keys,
  locks, completeness checks, index);
- :mod:`~hierarchy.jit.compiler`: Cython and the C compiler;
- :mod:`~hierarchy.jit.sparse_kernels`: kernels of sparse fields of integer operators;
- :mod:`~hierarchy.jit.expression_kernels`: sympy expressions to a C node loop.
"""
