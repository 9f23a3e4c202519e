"""Compile Cython source strings into cached, importable extension modules.

This is the project's one compiler driver: the generated right-hand-side kernels, the SGD
simulator and the potentials all go through :func:`compile_pyx`.

Layout of the cache (one folder per module, named like the module)::

    <cache_dir>/<name>/<name><EXT_SUFFIX>   the extension module
    <cache_dir>/<name>/<name>.pyx           the source it was built from
    <cache_dir>/<name>/<extra files>        sidecars passed as ``files=`` (tables, metadata)
    <cache_dir>/<name>/BUILD.json           cache key + sha256 of every file above
    <cache_dir>/.<name>.lock                the per-module file lock
    <cache_dir>/.index/<key>.json           optional aliases: a caller's own key -> name

``name = f"{name_hint}_{key[:16]}"`` where ``key`` is the sha256 of the source, the sidecar
contents, the compiler flags and the Python/Cython/numpy/platform versions, so any change to
a template or to a table produces a new module. A module folder is built in a temporary
folder and moved into place with one ``os.replace``; ``BUILD.json`` is checked on every load,
so a half-written or corrupted entry is detected and rebuilt.

The alias index lets a caller whose inputs are expensive to turn into a source (a field
that takes seconds to build) find its module from a cheap key of those inputs instead:
:func:`index_record` after a build, :func:`index_lookup` before the next one. Entries are
written atomically; a missing, unreadable or dangling entry reads as a miss.

The cache folder is ``generated/`` at the repository root when that folder exists and is
writable, otherwise ``$XDG_CACHE_HOME/hierarchy`` (default ``~/.cache/hierarchy``). The
environment variable ``HIERARCHY_GENERATED`` overrides both.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import platform
import re
import shutil
import subprocess
import struct
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

from hierarchy.core.errors import HierarchyError

if sys.platform == "win32":
    DEFAULT_COMPILE_ARGS = ("/O2",)
else:
    DEFAULT_COMPILE_ARGS = ("-O3", "-g0", "-Wno-unused-function", "-Wno-unreachable-code")
BUILD_FILE = "BUILD.json"
INDEX_DIR = ".index"
LOCK_TIMEOUT_S = 900

_loaded = {}  # module name -> module, so one process imports each module once
_loaded_lock = threading.Lock()


# ----------------------------------------------------------------------------- locations

def _repo_generated_dir():
    return Path(__file__).resolve().parents[2] / "generated"


def _user_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hierarchy"


def _is_writable_dir(path):
    if not path.is_dir():
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            return True
    except OSError:
        return False


def cache_dir() -> Path:
    """Return the folder compiled modules are written to (created if needed).

    Returns
    -------
    pathlib.Path
        ``$HIERARCHY_GENERATED`` if set and writable, else the repository's ``generated/``
        folder if it exists and is writable, else the per-user cache
        (``$XDG_CACHE_HOME/hierarchy`` or ``~/.cache/hierarchy``).
    """
    candidates = []
    override = os.environ.get("HIERARCHY_GENERATED")
    if override:
        candidates.append((Path(override).expanduser(), True))
    candidates.append((_repo_generated_dir(), False))
    candidates.append((_user_cache_dir(), True))
    for path, create in candidates:
        if create:
            with contextlib.suppress(OSError):
                path.mkdir(parents=True, exist_ok=True)
        if _is_writable_dir(path):
            return path
    raise HierarchyError(
        "no writable folder for compiled solvers: set HIERARCHY_GENERATED to a writable "
        "directory", field="HIERARCHY_GENERATED")


def search_dirs() -> list:
    """Folders searched for an already built module: the cache folder first, then the rest."""
    dirs = []
    override = os.environ.get("HIERARCHY_GENERATED")
    for path in ([Path(override).expanduser()] if override else []) + [
            _repo_generated_dir(), _user_cache_dir()]:
        if path.is_dir() and path not in dirs:
            dirs.append(path)
    return dirs


# ----------------------------------------------------------------------------- cache key

def toolchain_description(compile_args):
    """What decides a compiled module besides its source: interpreter, Cython, numpy, flags."""
    import Cython
    import numpy

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


def module_key(source, compile_args=DEFAULT_COMPILE_ARGS, files=None) -> str:
    """Return the sha256 hex digest that names a module.

    Parameters
    ----------
    source : str
        The Cython source.
    compile_args : sequence of str
        All C compiler flags used.
    files : mapping str -> bytes, optional
        Sidecar files stored with the module; their contents are part of the key.
    """
    digest = hashlib.sha256()
    digest.update(json.dumps(toolchain_description(compile_args), sort_keys=True).encode())
    digest.update(b"\0source\0" + source.encode())
    for fname in sorted(files or {}):
        digest.update(b"\0file\0" + fname.encode() + b"\0" + hashlib.sha256(files[fname]).digest())
    return digest.hexdigest()


def _module_name(name_hint, key):
    hint = re.sub(r"\W", "_", name_hint) or "mod"
    if hint[0].isdigit():
        hint = "m" + hint
    return f"{hint}_{key[:16]}"


def _file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- validation

def _extension_filename(name):
    return name + sysconfig.get_config_var("EXT_SUFFIX")


def _entry_is_valid(entry, name):
    """True when ``entry`` holds a complete build of ``name`` whose files match BUILD.json."""
    build_file = entry / BUILD_FILE
    try:
        record = json.loads(build_file.read_text())
        files = record["files"]
        if record.get("name") != name or _extension_filename(name) not in files:
            return False
        if not all(_file_digest(entry / fname) == digest for fname, digest in files.items()):
            return False
        return extension_is_complete(entry / _extension_filename(name))
    except (OSError, ValueError, KeyError, TypeError):
        return False


_ELF_MAGIC = b"\x7fELF"


def extension_is_complete(path):
    """Check a compiled extension's own structure before it is imported.

    BUILD.json's digests say the files are the ones recorded, but a damaged record can vouch
    for a truncated library, and importing one that ends before its segments do crashes the
    interpreter (SIGBUS), so the ELF headers are checked independently: every program segment
    and the section-header table must lie inside the file. Non-ELF platforms pass unchecked.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    bool
    """
    with open(path, "rb") as handle:
        header = handle.read(64)
        size = os.fstat(handle.fileno()).st_size
        if not header.startswith(_ELF_MAGIC):
            return sys.platform in ("darwin", "win32")
        if len(header) < 52 or header[4] not in (1, 2) or header[5] not in (1, 2):
            return False
        wide, order = header[4] == 2, "<" if header[5] == 1 else ">"
        layout = f"{order}HHIQQQIHHHHHH" if wide else f"{order}HHIIIIIHHHHHH"
        fields = struct.unpack_from(layout, header, 16)
        phoff, shoff, phentsize, phnum, shentsize, shnum = (fields[4], fields[5], fields[8],
                                                            fields[9], fields[10], fields[11])
        if shoff + shentsize * shnum > size or phoff + phentsize * phnum > size:
            return False
        handle.seek(phoff)
        table = handle.read(phentsize * phnum)
    return all(offset + filesize <= size for offset, filesize in _segments(table, wide, order, phentsize))


def _segments(table, wide, order, entry_size):
    """``(p_offset, p_filesz)`` of every ELF program header in ``table``."""
    layout = f"{order}IIQQQQ" if wide else f"{order}IIIIII"
    for start in range(0, len(table) - entry_size + 1, entry_size):
        fields = struct.unpack_from(layout, table, start)
        yield (fields[2], fields[5]) if wide else (fields[1], fields[4])


def _import_extension(name, entry):
    with _loaded_lock:
        if name in _loaded:
            return _loaded[name]
        path = entry / _extension_filename(name)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.__hierarchy_dir__ = str(entry)
        sys.modules.setdefault(name, module)
        _loaded[name] = module
        return module


def find_module(name):
    """Return the folder of a valid built module called ``name``, or None."""
    for folder in search_dirs():
        entry = folder / name
        if _entry_is_valid(entry, name):
            return entry
    return None


def load_module(name, folder=None):
    """Import an already built module by name.

    Parameters
    ----------
    name : str
        Module name (``f"{name_hint}_{key[:16]}"``).
    folder : path-like, optional
        The cache folder holding it; default: search :func:`search_dirs`.

    Raises
    ------
    HierarchyError
        If no valid build of ``name`` exists.
    """
    with _loaded_lock:
        if name in _loaded:
            return _loaded[name]
    if folder is not None:
        entry = Path(folder) / name
        entry = entry if _entry_is_valid(entry, name) else None
        where = str(folder)
    else:
        entry = find_module(name)
        where = ", ".join(map(str, search_dirs()))
    if entry is None:
        raise HierarchyError(f"no valid compiled module named {name!r} in {where}; "
                             "see `hierarchy list`", field="name")
    return _import_extension(name, entry)


def module_dir(module) -> Path:
    """The cache folder of a module returned by :func:`compile_pyx` or :func:`load_module`."""
    return Path(module.__hierarchy_dir__)


def list_modules() -> list:
    """Describe every valid built module in the searched folders.

    Returns
    -------
    list of dict
        One dict per module with ``name``, ``path`` (its folder), ``size`` (bytes of the
        extension) and ``files`` (the sidecar file names).
    """
    found, seen = [], set()
    for folder in search_dirs():
        for entry in sorted(p for p in folder.iterdir() if p.is_dir()):
            name = entry.name
            if name.startswith(".") or name in seen or not _entry_is_valid(entry, name):
                continue
            seen.add(name)
            record = json.loads((entry / BUILD_FILE).read_text())
            ext = _extension_filename(name)
            found.append({
                "name": name,
                "path": str(entry),
                "size": (entry / ext).stat().st_size,
                "files": sorted(f for f in record["files"] if f != ext),
            })
    return found


# ----------------------------------------------------------------------------- building

def _check_toolchain():
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
    try:
        import Cython  # noqa: F401
    except ImportError as exc:
        raise HierarchyError("Cython is not installed: `pip install cython`",
                             field="compiler") from exc


def _relevant_lines(text, limit=40):
    """The compiler's error lines with a little context, at most ``limit`` lines."""
    lines = text.splitlines()
    marks = [i for i, line in enumerate(lines)
             if re.search(r"\berror\b|Error compiling|undefined reference", line, re.I)]
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
        proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env)
    except FileNotFoundError as exc:
        raise HierarchyError(
            f"C compiler {cmd[0]!r} not found: install one, e.g. `apt-get install gcc "
            "python3-dev`", field="compiler") from exc
    if proc.returncode != 0:
        raise _CompilerFailed(proc.stdout + proc.stderr)


def _cythonize(pyx_path):
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
    import numpy
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


def _build_module(source, name, entry_tmp, compile_args, files):
    """Translate and compile ``source`` into the folder ``entry_tmp`` (then moved into place)."""
    _check_toolchain()
    entry_tmp.mkdir(parents=True)
    pyx_path = entry_tmp / f"{name}.pyx"
    pyx_path.write_text(source)
    for fname, content in (files or {}).items():
        (entry_tmp / fname).write_bytes(content)
    work = entry_tmp / "_build"
    c_path = _cythonize(pyx_path)
    built = _compile_c(c_path, name, work, compile_args)
    shutil.move(str(built), entry_tmp / _extension_filename(name))
    shutil.rmtree(work, ignore_errors=True)
    c_path.unlink()
    record = {
        "name": name,
        "files": {p.name: _file_digest(p) for p in sorted(entry_tmp.iterdir()) if p.is_file()},
    }
    (entry_tmp / BUILD_FILE).write_text(json.dumps(record, indent=1))


def _lock(folder, name):
    from filelock import FileLock

    return FileLock(str(folder / f".{name}.lock"), timeout=LOCK_TIMEOUT_S)


def compile_pyx(source: str, name_hint: str, *, extra_compile_args=(), force=False,
                files=None):
    """Compile a Cython source string into an imported extension module, with caching.

    Parameters
    ----------
    source : str
        Cython source of the module. ``language_level=3`` is implied.
    name_hint : str
        Readable prefix of the module name; the name is ``f"{name_hint}_{key[:16]}"``.
    extra_compile_args : sequence of str
        C compiler flags added to the defaults (``-O3``); they are part of the cache key.
    force : bool
        Rebuild even when a valid cached build exists (a module already imported in this
        process stays the one returned, since extension modules cannot be reloaded).
    files : mapping str -> bytes, optional
        Sidecar files (tables, metadata) stored in the module's folder; part of the key.
        Read them back from :func:`module_dir`.

    Returns
    -------
    module
        The imported module; ``module_dir(module)`` is its cache folder.

    Raises
    ------
    HierarchyError
        When no C compiler, no Python headers or no Cython is available (the message says
        what to install), or when Cython or the compiler rejects the source (the message
        carries their own output, trimmed to the relevant lines).
    """
    compile_args = tuple(DEFAULT_COMPILE_ARGS) + tuple(extra_compile_args)
    key = module_key(source, compile_args, files)
    name = _module_name(name_hint, key)
    if not force:
        with _loaded_lock:
            if name in _loaded:
                return _loaded[name]
        entry = find_module(name)
        if entry is not None:
            return _import_extension(name, entry)
    folder = cache_dir()
    entry = folder / name
    with _lock(folder, name):
        if force or not _entry_is_valid(entry, name):
            tmp = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=folder))
            try:
                _build_module(source, name, tmp / name, compile_args, files)
                if entry.exists():
                    shutil.rmtree(entry)
                os.replace(tmp / name, entry)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return _import_extension(name, entry)


# ----------------------------------------------------------------------------- alias index

def _index_path(folder, key):
    if not re.fullmatch(r"[0-9a-f]{16,128}", key):
        raise ValueError(f"index keys are hex digests, got {key!r}")
    return Path(folder) / INDEX_DIR / f"{key}.json"


def index_lookup(key):
    """The module name recorded under ``key``, or None.

    Parameters
    ----------
    key : str
        A hex digest chosen by the caller (e.g. of build arguments and source versions).

    Returns
    -------
    str or None
        The name of a module with a valid build in :func:`search_dirs`; None when no folder
        has a readable entry for ``key`` or the module it names is gone or corrupted.
    """
    for folder in search_dirs():
        try:
            record = json.loads(_index_path(folder, key).read_text())
            name = record["name"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if record.get("key") == key and isinstance(name, str) and find_module(name) is not None:
            return name
    return None


def index_record(key, name, **info):
    """Record ``key -> name`` in the index of :func:`cache_dir` (atomically; best effort).

    ``info`` (JSON-serializable) is stored alongside for people reading the index. A failure
    to write (read-only or full disk) is ignored: the index only saves time.
    """
    tmp = None
    try:
        path = _index_path(cache_dir(), key)
        record = json.dumps({"key": key, "name": name, **info}, sort_keys=True)
        path.parent.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".tmp-", suffix=".json",
                                         delete=False) as handle:
            tmp = handle.name
            handle.write(record)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache's index from others
        os.replace(tmp, path)
    except (HierarchyError, OSError, TypeError, ValueError):  # no writable folder, full disk
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
