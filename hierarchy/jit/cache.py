"""Compile Cython source strings into cached, importable extension modules.

The generated right-hand-side kernels, the SGD simulator and the potentials all go through
:meth:`Cache.compile` (:func:`compile_pyx` for the default cache); the compiling itself is
:mod:`hierarchy.jit.compiler`.

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
:meth:`Cache.index_record` after a build, :meth:`Cache.index_lookup` before the next one. Entries are
written atomically; a missing, unreadable or dangling entry reads as a miss.

A :class:`Cache` object holds one cache: the folder it writes to and the folders it
searches. ``Cache(folder)`` is a cache in one folder (tests and tools use their own). The
default cache (:func:`default_cache`, used by the module-level functions such as
:func:`compile_pyx`) writes to ``generated/`` at the repository root when that folder exists
and is writable (:data:`REPO_GENERATED`), otherwise to ``$XDG_CACHE_HOME/hierarchy``
(default ``~/.cache/hierarchy``); the environment variable ``HIERARCHY_GENERATED`` names the
folder builds are written to instead, and is searched first, but the other two are still
searched after it for a module already built (and written to when it is not writable): it
does not isolate a run from the other caches. :func:`set_default_cache` replaces the default
with a given cache (``Cache(folder)`` searches that folder alone).

Every build is announced to the callables registered with :func:`add_build_listener`
(tests count builds this way).
"""

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import threading
from pathlib import Path

from hierarchy.core.errors import HierarchyError
from hierarchy.core.io import atomic_write
from hierarchy.jit.compiler import (
    DEFAULT_COMPILE_ARGS,
    build_extension,
    extension_filename,
    toolchain_description,
)

BUILD_FILE = "BUILD.json"
INDEX_DIR = ".index"
LOCK_TIMEOUT_S = 900

#: The checkout's ``generated/`` folder, preferred by the default cache when it exists and
#: is writable. Assign another path to move it (the fault tests do, to isolate themselves).
REPO_GENERATED = Path(__file__).resolve().parents[2] / "generated"

_loaded = {}  # module name -> module, so one process imports each module once
_loaded_lock = threading.Lock()
_build_listeners = []
_default_override = None


# ----------------------------------------------------------------------------- locations

def user_cache_dir():
    """The per-user cache folder: ``$XDG_CACHE_HOME/hierarchy`` or ``~/.cache/hierarchy``."""
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


# ----------------------------------------------------------------------------- cache key

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


def module_name(name_hint, key):
    """The module name ``f"{name_hint}_{key[:16]}"`` (hint made a valid identifier)."""
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

def _entry_is_valid(entry, name):
    """True when ``entry`` holds a complete build of ``name`` whose files match BUILD.json."""
    build_file = entry / BUILD_FILE
    try:
        record = json.loads(build_file.read_text())
        files = record["files"]
        if record.get("name") != name or extension_filename(name) not in files:
            return False
        if not all(_file_digest(entry / fname) == digest for fname, digest in files.items()):
            return False
        return extension_is_complete(entry / extension_filename(name))
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


def remove_leftover_builds(folder, name):
    """Delete the temporary folders of killed builds of ``name`` in ``folder``.

    Call it holding ``name``'s build lock: every build of ``name`` takes that lock, so a
    ``.build-{name}-*`` folder seen under it belongs to no running build (a build killed by
    SIGKILL never reached its own cleanup)."""
    for leftover in Path(folder).glob(f".build-{name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _import_extension(name, entry):
    with _loaded_lock:
        if name in _loaded:
            return _loaded[name]
        path = entry / extension_filename(name)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.__hierarchy_dir__ = str(entry)
        sys.modules.setdefault(name, module)
        _loaded[name] = module
        return module


def _already_imported(name):
    with _loaded_lock:
        return _loaded.get(name)


def module_dir(module) -> Path:
    """The cache folder of a module returned by :meth:`Cache.compile` or :meth:`Cache.load`."""
    return Path(module.__hierarchy_dir__)


def _index_path(folder, key):
    if not re.fullmatch(r"[0-9a-f]{16,128}", key):
        raise ValueError(f"index keys are hex digests, got {key!r}")
    return Path(folder) / INDEX_DIR / f"{key}.json"


# ----------------------------------------------------------------------------- builds

def add_build_listener(callback):
    """Call ``callback(name)`` just before any cache of this process builds module ``name``.

    A listener that raises stops the build (tests use one to forbid compiling).

    Returns
    -------
    callable
        ``callback``, for :func:`remove_build_listener`.
    """
    _build_listeners.append(callback)
    return callback


def remove_build_listener(callback):
    """Stop calling a listener added with :func:`add_build_listener` (absent: no-op)."""
    with contextlib.suppress(ValueError):
        _build_listeners.remove(callback)


# ----------------------------------------------------------------------------- the cache

class Cache:
    """A folder of compiled modules, plus the folders searched for already built ones.

    Parameters
    ----------
    root : path-like
        The folder builds go to (created on first use) and the first folder searched.
    fallbacks : sequence of (path-like, bool)
        Folders used, in order, when ``root`` cannot be written, each with whether it may be
        created; they are searched too, after ``root``. Empty for a self-contained cache.
    create_root : bool
        Whether ``root`` may be created (the checkout's ``generated/`` is used only when it
        exists).

    Examples
    --------
    >>> tmp_cache = Cache(tmp_path)                                  # doctest: +SKIP
    >>> module = tmp_cache.compile("def f():\n    return 1\n", "f")  # doctest: +SKIP
    >>> tmp_cache.modules()[0]["name"] == module.__name__            # doctest: +SKIP
    True
    """

    def __init__(self, root, fallbacks=(), create_root=True):
        self.candidates = [(Path(root).expanduser(), bool(create_root))]
        self.candidates += [(Path(path).expanduser(), bool(create)) for path, create in fallbacks]

    @classmethod
    def from_environment(cls, repo_generated=None):
        """The default cache as the environment chooses it (module docstring).

        Parameters
        ----------
        repo_generated : path-like, optional
            The checkout's ``generated/`` folder; default :data:`REPO_GENERATED`.
        """
        repo = Path(REPO_GENERATED if repo_generated is None else repo_generated)
        override = os.environ.get("HIERARCHY_GENERATED")
        if override:
            return cls(override, fallbacks=[(repo, False), (user_cache_dir(), True)])
        return cls(repo, fallbacks=[(user_cache_dir(), True)], create_root=False)

    def __repr__(self):
        return f"Cache({str(self.candidates[0][0])!r})"

    # -- folders

    def writable_root(self) -> Path:
        """The folder builds are written to: the first candidate that is (or can be made) a
        writable folder.

        Raises
        ------
        HierarchyError
            When none is writable.
        """
        for path, create in self.candidates:
            if create:
                with contextlib.suppress(OSError):
                    path.mkdir(parents=True, exist_ok=True)
            if _is_writable_dir(path):
                return path
        raise HierarchyError(
            "no writable folder for compiled solvers: set HIERARCHY_GENERATED to a writable "
            "directory", field="HIERARCHY_GENERATED")

    def folders(self) -> list:
        """The existing folders searched for a built module, in search order."""
        found = []
        for path, _ in self.candidates:
            if path.is_dir() and path not in found:
                found.append(path)
        return found

    # -- finding and loading

    def find(self, name):
        """The folder of a valid build of module ``name``, or None."""
        for folder in self.folders():
            entry = folder / name
            if _entry_is_valid(entry, name):
                return entry
        return None

    def load(self, name):
        """Import an already built module by name.

        Parameters
        ----------
        name : str
            Module name (``f"{name_hint}_{key[:16]}"``).

        Raises
        ------
        HierarchyError
            If no valid build of ``name`` exists in :meth:`folders`.
        """
        module = _already_imported(name)
        if module is not None:
            return module
        entry = self.find(name)
        if entry is None:
            where = ", ".join(map(str, self.folders())) or str(self.candidates[0][0])
            raise HierarchyError(f"no valid compiled module named {name!r} in {where}; "
                                 "see `hierarchy list`", field="name")
        return _import_extension(name, entry)

    def modules(self) -> list:
        """Describe every valid built module in the searched folders.

        Returns
        -------
        list of dict
            One dict per module with ``name``, ``path`` (its folder), ``size`` (bytes of the
            extension) and ``files`` (the sidecar file names).
        """
        found, seen = [], set()
        for folder in self.folders():
            for entry in sorted(p for p in folder.iterdir() if p.is_dir()):
                name = entry.name
                if name.startswith(".") or name in seen or not _entry_is_valid(entry, name):
                    continue
                seen.add(name)
                record = json.loads((entry / BUILD_FILE).read_text())
                ext = extension_filename(name)
                found.append({
                    "name": name,
                    "path": str(entry),
                    "size": (entry / ext).stat().st_size,
                    "files": sorted(f for f in record["files"] if f != ext),
                })
        return found

    # -- building

    def compile(self, source: str, name_hint: str, *, extra_compile_args=(), force=False,
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
            When no C compiler, no Python headers or no Cython is available (the message
            says what to install), or when Cython or the compiler rejects the source (the
            message carries their own output, trimmed to the relevant lines).
        """
        compile_args = tuple(DEFAULT_COMPILE_ARGS) + tuple(extra_compile_args)
        name = module_name(name_hint, module_key(source, compile_args, files))
        if not force:
            module = _already_imported(name)
            if module is not None:
                return module
            entry = self.find(name)
            if entry is not None:
                return _import_extension(name, entry)
        from filelock import FileLock  # noqa: PLC0415  (only a build takes the lock)

        folder = self.writable_root()
        entry = folder / name
        with FileLock(str(folder / f".{name}.lock"), timeout=LOCK_TIMEOUT_S):
            if force or not _entry_is_valid(entry, name):
                remove_leftover_builds(folder, name)
                self._build_into(folder, entry, source, name, compile_args, files)
        return _import_extension(name, entry)

    @staticmethod
    def _build_into(folder, entry, source, name, compile_args, files):
        """Build in a temporary folder, record BUILD.json, move the folder into place."""
        for listener in _build_listeners:
            listener(name)
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=folder))
        try:
            staged = tmp / name
            build_extension(source, name, staged, compile_args, files)
            record = {
                "name": name,
                "files": {p.name: _file_digest(p) for p in sorted(staged.iterdir()) if p.is_file()},
            }
            (staged / BUILD_FILE).write_text(json.dumps(record, indent=1))
            if entry.exists():
                shutil.rmtree(entry)
            os.replace(staged, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- alias index

    def index_lookup(self, key):
        """The module name recorded under ``key``, or None.

        Parameters
        ----------
        key : str
            A hex digest chosen by the caller (e.g. of build arguments and source versions).

        Returns
        -------
        str or None
            The name of a module with a valid build in :meth:`folders`; None when no folder
            has a readable entry for ``key`` or the module it names is gone or corrupted.
        """
        for folder in self.folders():
            try:
                record = json.loads(_index_path(folder, key).read_text())
                name = record["name"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if record.get("key") == key and isinstance(name, str) and self.find(name) is not None:
                return name
        return None

    def index_record(self, key, name, **info):
        """Record ``key -> name`` in the index of :meth:`writable_root` (atomically; best effort).

        ``info`` (JSON-serializable) is stored alongside for people reading the index. A
        failure to write (no writable folder, full disk) is ignored: the index only saves
        time.
        """
        try:
            path = _index_path(self.writable_root(), key)
            record = json.dumps({"key": key, "name": name, **info}, sort_keys=True)
            path.parent.mkdir(exist_ok=True)
            atomic_write(path, record)
        except (HierarchyError, OSError, TypeError, ValueError):  # no writable folder, full disk
            pass


# ----------------------------------------------------------------------------- the default

def default_cache() -> Cache:
    """The cache the module-level functions use.

    Returns
    -------
    Cache
        The one given to :func:`set_default_cache`, else :meth:`Cache.from_environment`
        (re-read on every call, so ``HIERARCHY_GENERATED`` may change at run time).
    """
    return _default_override if _default_override is not None else Cache.from_environment()


def set_default_cache(cache):
    """Make ``cache`` (a :class:`Cache`, or None for the environment's) the default.

    Returns
    -------
    Cache or None
        The previous setting, to restore it.
    """
    global _default_override
    previous, _default_override = _default_override, cache
    return previous


def cache_dir() -> Path:
    """The folder the default cache writes to (:meth:`Cache.writable_root`)."""
    return default_cache().writable_root()


def search_dirs() -> list:
    """The folders the default cache searches (:meth:`Cache.folders`)."""
    return default_cache().folders()


def compile_pyx(source: str, name_hint: str, *, extra_compile_args=(), force=False, files=None):
    """:meth:`Cache.compile` on the default cache (same parameters)."""
    return default_cache().compile(source, name_hint, extra_compile_args=extra_compile_args,
                                   force=force, files=files)


def find_module(name):
    """:meth:`Cache.find` on the default cache."""
    return default_cache().find(name)


def load_module(name, folder=None):
    """Import an already built module by name, from ``folder`` or the default cache.

    Parameters
    ----------
    name : str
    folder : path-like, optional
        The cache folder holding it; default: the folders of the default cache.

    Raises
    ------
    HierarchyError
        If no valid build of ``name`` exists.
    """
    return (default_cache() if folder is None else Cache(folder)).load(name)


def list_modules() -> list:
    """:meth:`Cache.modules` of the default cache."""
    return default_cache().modules()


def index_lookup(key):
    """:meth:`Cache.index_lookup` on the default cache."""
    return default_cache().index_lookup(key)


def index_record(key, name, **info):
    """:meth:`Cache.index_record` on the default cache."""
    default_cache().index_record(key, name, **info)
