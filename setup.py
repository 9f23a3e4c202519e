"""Install the `hierarchy` package.

The compiled right-hand-side kernels and the SGD simulator are generated and compiled on
demand (see ``hierarchy.build``), so installing needs no compiler; using needs one.
The top-level ``templates/`` folder ships inside the package as ``hierarchy.templates``.

Pre-building the solvers of the README and the figures is a separate, optional step run
after the install, with the installed package: ``python tools/prebuild.py``. It is not an
install hook on purpose: pip builds in an isolated environment without numpy/sympy/Cython,
and a build step cannot know which cache folder the installed package will search (the
checkout's ``generated/`` for ``pip install -e``, ``~/.cache/hierarchy`` otherwise), so a
hook would either fail or compile into a folder nobody reads.
"""
from setuptools import find_packages, setup

setup(
    name="hierarchy",
    version="0.1.0",
    description="Trace-moment ODE hierarchies of online SGD for attention-indexed models",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["hierarchy", "hierarchy.*"]) + ["hierarchy.templates"],
    package_dir={"hierarchy.templates": "templates"},
    package_data={"hierarchy.models.attention": ["*.pyx"], "hierarchy.templates": ["*.j2", "*.pyx"]},
    install_requires=[
        "numpy>=1.24",
        "scipy>=1.10",
        "sympy>=1.12",
        "cython>=3.0",
        "jinja2>=3.0",
        "filelock>=3.12",
        "threadpoolctl>=3.1",  # BLAS thread count chosen by measurement (hierarchy.blas_threads)
        "matplotlib>=3.7",
        "dask[distributed]>=2023.1",  # the study (the main job) runs its jobs through Dask
    ],
    extras_require={
        # pytest-xdist: the suite runs on every core (pyproject.toml's addopts: -n 2)
        "test": ["pytest>=7", "pytest-xdist>=3.5", "hypothesis>=6"],
    },
    entry_points={"console_scripts": ["hierarchy = hierarchy.cli.main:main"]},
)
