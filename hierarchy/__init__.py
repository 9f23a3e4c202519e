"""Trace-moment ODE hierarchies of online SGD for attention-indexed models.

The package turns a model (tied ``S = W Wᵀ``, untied ``S = U Vᵀ`` or direct ``S``) and a
loss into the truncated moment hierarchy of ``docs/math.md``, compiles it, solves
it, and validates it against SGD and exact finite-d matrix flows.

Modules, in dependency order (each imports only from those above it):

- ``errors``       the one exception type users see (``HierarchyError``)
- ``words``        letters, canonical words, labels, enumeration
- ``rules``        the substitution rules of each parameterization, derived by sympy
- ``operators``    the truncated field as sparse operators ``dμ = Σ_c κ_c A_c μ``
- ``moments``      exact trace moments of finite-d matrices
- ``display``      human/LaTeX/JSON rendering of the equations (``hierarchy show``)
- ``losses``, ``gaussian``, ``potential``, ``coefficients``   the loss side: ``κ(μ)``
- ``cache``, ``codegen``, ``solver``   compiled kernels and the ``solve_ivp`` driver
- ``flows``, ``sgd``, ``study``        validation: matrix flows, SGD, truncation study
- ``config``, ``outputs``, ``cli``     configuration files, result files, command line
"""

__version__ = "0.1.0"

from hierarchy.core.errors import HierarchyError  # noqa: F401


def __getattr__(name):
    # Lazy public API: importing the package stays cheap (no sympy/Cython at import).
    if name in ("build", "load"):
        from hierarchy.ode import solver

        return getattr(solver, name)
    if name == "build_field":
        from hierarchy.models.attention.operators import build_field

        return build_field
    raise AttributeError(f"module 'hierarchy' has no attribute {name!r}")
