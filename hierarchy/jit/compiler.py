"""Turn one Cython source string into a compiled extension module in a given folder.

This is the project's one compiler driver (Cython, then the C compiler through setuptools,
with their output captured); :mod:`hierarchy.jit.cache` decides where and when to call it.
Errors say what to install (no compiler, no Python headers, no Cython) or carry the
compiler's own message trimmed to the lines that matter.
"""

import contextlib
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import Cython
import numpy

from hierarchy.core.errors import HierarchyError

if sys.platform == "win32":
    DEFAULT_COMPILE_ARGS = ("/O2",)
else:
    DEFAULT_COMPILE_ARGS = ("-O3", "-g0", "-Wno-unused-function", "-Wno-unreachable-code")


def toolchain_description(compile_args):
    """What decides a compiled module besides its source.

    Parameters
    ----------
    compile_args : sequence of str
        All C compiler flags used.

    Returns
    -------
    dict
        Interpreter, extension suffix, platform, Cython and numpy versions, C compiler and
        flags (JSON-serialisable; part of every cache key).
    """
    return {
        "python": sys.version,
        "implementation": sys.implementation.cache_tag,
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "platform": sysconfig.get_platform(),
        "machine": platform.machine(),
        "cython": Cython.__version__,
        "numpy": numpy.__version__,
        "cc": sysconfig.get_config_var("CC"),
        "compile_args": list(compile_args),
    }


def extension_filename(name):
    """File name of the compiled extension module ``name`` on this platform."""
    return name + sysconfig.get_config_var("EXT_SUFFIX")


def check_toolchain():
    """Check that Python headers and a C compiler are present.

    Raises
    ------
    HierarchyError
        Saying what to install (``field="compiler"``).
    """
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not header.exists():
        raise HierarchyError(
            f"Python headers not found ({header}): install them, e.g. "
            "`apt-get install python3-dev` (Debian/Ubuntu) or `dnf install python3-devel`",
            field="compiler")
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if sys.platform != "win32" and shutil.which(compiler) is None:
        raise HierarchyError(
            f"no C compiler found ({compiler!r} is not on PATH): install one, e.g. "
            "`apt-get install gcc python3-dev` or `conda install -c conda-forge c-compiler`",
            field="compiler")


def build_extension(source, name, folder, compile_args, files=None):
    """Translate and compile ``source`` into a new folder holding the module and its sidecars.

    Parameters
    ----------
    source : str
        Cython source (``language_level=3``).
    name : str
        Module name.
    folder : pathlib.Path
        Folder to create (must not exist); it ends up holding ``<name>.pyx``, the extension
        (:func:`extension_filename`) and the ``files``.
    compile_args : sequence of str
        All C compiler flags.
    files : mapping str -> bytes, optional
        Sidecar files written next to the module.

    Raises
    ------
    HierarchyError
        A missing toolchain, or Cython / the C compiler rejecting the source.
    """
    check_toolchain()
    folder.mkdir(parents=True)
    pyx_path = folder / f"{name}.pyx"
    pyx_path.write_text(source)
    for file_name, content in (files or {}).items():
        (folder / file_name).write_bytes(content)
    work = folder / "_build"
    c_path = _cythonize(pyx_path)
    built = _compile_c(c_path, name, work, compile_args)
    shutil.move(str(built), folder / extension_filename(name))
    shutil.rmtree(work, ignore_errors=True)
    c_path.unlink()


def _relevant_lines(text, limit=40):
    """The compiler's error lines with a little context, at most ``limit`` lines."""
    lines = text.splitlines()
    marks = [i for i, line in enumerate(lines)
             if re.search(r"\berror\b|Error compiling|undefined reference", line, re.IGNORECASE)]
    if not marks:
        return "\n".join(lines[-limit:])
    keep = sorted({j for i in marks for j in range(max(0, i - 2), min(len(lines), i + 4))})
    return "\n".join(lines[j] for j in keep[:limit])


class _CompilerFailed(Exception):
    def __init__(self, output):
        super().__init__(output)
        self.output = output


def _run_compiler(cmd, env=None, **_ignored):
    """Run one compiler/linker command, capturing its output (replaces the compiler's spawn)."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env, check=False)
    except FileNotFoundError as exc:
        raise HierarchyError(
            f"C compiler {cmd[0]!r} not found: install one, e.g. `apt-get install gcc "
            "python3-dev`", field="compiler") from exc
    if proc.returncode != 0:
        raise _CompilerFailed(proc.stdout + proc.stderr)


def _cythonize(pyx_path):
    # Deferred on purpose: Cython's compiler takes a noticeable time to import and is only
    # needed when something is actually built.
    from Cython.Build import cythonize
    from Cython.Compiler.Errors import CompileError

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            cythonize([str(pyx_path)], quiet=True, force=True,
                      compiler_directives={"language_level": 3})
    except (CompileError, Exception) as exc:  # cythonize raises plain Exception subclasses
        raise HierarchyError(
            f"Cython could not translate {pyx_path.name}:\n"
            + "\n".join((captured.getvalue() or str(exc)).strip().splitlines()[:40]),
            field="source") from exc
    return pyx_path.with_suffix(".c")


def _compile_c(c_path, name, build_dir, compile_args):
    # Deferred on purpose: setuptools is slow to import (and patches distutils); it is only
    # needed when something is actually built.
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    class CapturingBuildExt(build_ext):
        def build_extensions(self):
            self.compiler.spawn = _run_compiler
            super().build_extensions()

    ext = Extension(name, [str(c_path)], include_dirs=[numpy.get_include()],
                    extra_compile_args=list(compile_args),
                    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
    cmd = CapturingBuildExt(Distribution({"name": name, "ext_modules": [ext]}))
    cmd.build_temp = str(build_dir / "tmp")
    cmd.build_lib = str(build_dir / "lib")
    cmd.ensure_finalized()
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            cmd.run()
    except _CompilerFailed as exc:
        raise HierarchyError(f"the C compiler failed on {name}:\n" + _relevant_lines(exc.output),
                             field="compiler") from exc
    return Path(cmd.get_ext_fullpath(name))
