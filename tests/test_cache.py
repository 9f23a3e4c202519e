"""The build cache: keys, reuse without compiling, rebuilds, locking, fallbacks, errors."""

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import hierarchy
import hierarchy.models.attention.compiled
from hierarchy.core.errors import HierarchyError
from hierarchy.jit import cache, render, sparse_kernels

REPO = Path(__file__).resolve().parent.parent


def tiny_source(tag):
    """A minimal module; ``tag`` makes its source (and so its cache key) unique."""
    return f"# {tag}\ndef triple(double x):\n    return 3.0 * x\n"


def run_python(code, cache_folder, extra_env=None):
    env = dict(os.environ, PYTHONPATH=str(REPO), HIERARCHY_GENERATED=str(cache_folder))
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, cwd=str(REPO), timeout=300)


COUNTING_BUILD = """
    import sys
    from hierarchy.jit import cache
    cache.add_build_listener(lambda name: print("COMPILED", flush=True))
"""


@pytest.fixture
def build_listener():
    """``build_listener(callback)`` adds a cache build listener for the test's duration."""
    added = []

    def add(callback):
        added.append(cache.add_build_listener(callback))

    yield add
    for callback in added:
        cache.remove_build_listener(callback)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    folder = tmp_path / "generated"
    monkeypatch.setenv("HIERARCHY_GENERATED", str(folder))
    return folder


def test_compile_and_reuse_without_compiler(tmp_cache, build_listener):
    source = tiny_source(uuid.uuid4().hex)
    module = cache.compile_pyx(source, "tiny")
    assert module.triple(2.0) == 6.0
    assert module.__name__.startswith("tiny_") and len(module.__name__) == len("tiny_") + 16
    entry = cache.module_dir(module)
    assert entry.parent == tmp_cache and (entry / cache.BUILD_FILE).exists()
    assert module.__name__ in [m["name"] for m in cache.list_modules()]

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler was called for a cached module")

    build_listener(no_compiler)
    assert cache.compile_pyx(source, "tiny") is module
    # A fresh process imports the built module from disk without compiling either.
    proc = run_python(COUNTING_BUILD + f"""
    m = cache.compile_pyx({source!r}, "tiny")
    print(m.__name__, m.triple(1.5))
    """, tmp_cache)
    assert proc.returncode == 0, proc.stderr
    assert "COMPILED" not in proc.stdout
    assert f"{module.__name__} 4.5" in proc.stdout


def test_a_killed_builds_folder_is_removed_by_the_next_build(tmp_cache):
    # the cache audit: a SIGKILL during a compile left .build-<name>-* (0.4 MB) for good
    source = tiny_source(uuid.uuid4().hex)
    name = cache.module_name("tiny", cache.module_key(source))
    tmp_cache.mkdir(parents=True)
    leftover = tmp_cache / f".build-{name}-k1ll3d"
    (leftover / name).mkdir(parents=True)
    (leftover / name / f"{name}.pyx").write_text(source)
    other = tmp_cache / ".build-tiny_0123456789abcdef-k1ll3d"  # another module's: kept
    other.mkdir()
    assert cache.compile_pyx(source, "tiny").triple(1.0) == 3.0
    assert not leftover.exists() and other.exists()


def test_key_depends_on_source_flags_and_files():
    base = cache.module_key("x = 1\n")
    assert base == cache.module_key("x = 1\n")
    assert base != cache.module_key("x = 2\n")
    assert base != cache.module_key("x = 1\n", cache.DEFAULT_COMPILE_ARGS + ("-O1",))
    assert base != cache.module_key("x = 1\n", files={"t.npy": b"\x00"})


def test_corrupted_entry_is_detected_and_rebuilt(tmp_cache):
    source = tiny_source(uuid.uuid4().hex)
    first = run_python(COUNTING_BUILD + f"""
    m = cache.compile_pyx({source!r}, "tiny")
    print(m.__name__)
    """, tmp_cache)
    assert first.returncode == 0, first.stderr
    name = first.stdout.split()[-1]
    extension = tmp_cache / name / cache.extension_filename(name)
    extension.write_bytes(extension.read_bytes()[:1000])  # a half-written file
    assert cache.find_module(name) is None
    second = run_python(COUNTING_BUILD + f"""
    m = cache.compile_pyx({source!r}, "tiny")
    print(m.triple(1.0))
    """, tmp_cache)
    assert second.returncode == 0, second.stderr
    assert "COMPILED" in second.stdout and "3.0" in second.stdout
    assert cache.find_module(name) == tmp_cache / name


def test_concurrent_processes_build_once_and_all_succeed(tmp_cache):
    """Four processes on one cache (what the test workers do with ``generated/``): the module is
    built once under its lock, every process imports it, and their racing alias records leave
    one valid index entry and no half-built folder."""
    source = tiny_source(uuid.uuid4().hex)
    alias = uuid.uuid4().hex
    code = COUNTING_BUILD + f"""
    m = cache.compile_pyx({source!r}, "tiny")
    cache.index_record({alias!r}, m.__name__, process=sys.argv[1])
    print("RESULT", m.__name__, m.triple(2.0), cache.index_lookup({alias!r}))
    """
    env = dict(os.environ, PYTHONPATH=str(REPO), HIERARCHY_GENERATED=str(tmp_cache))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(i)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    results = {line for out, _ in outputs for line in out.splitlines() if line.startswith("RESULT")}
    assert len(results) == 1
    _, name, value, found = results.pop().split()
    assert value == "6.0" and found == name
    assert sum(out.count("COMPILED") for out, _ in outputs) == 1
    assert cache.Cache(tmp_cache).index_lookup(alias) == name
    assert not list(tmp_cache.glob(".build-*")) and not list((tmp_cache / ".index").glob(".*"))


def test_compile_errors_carry_the_compiler_message(tmp_cache):
    bad_c = textwrap.dedent(f"""
        # {uuid.uuid4().hex}
        cdef extern from *:
            '''
            static int broken(void) {{ return no_such_symbol_here; }}
            '''
            int broken()
        def f():
            return broken()
    """)
    with pytest.raises(HierarchyError, match="no_such_symbol_here") as info:
        cache.compile_pyx(bad_c, "broken")
    assert info.value.field == "compiler"
    with pytest.raises(HierarchyError, match="Expected") as info:
        cache.compile_pyx(f"# {uuid.uuid4().hex}\ndef f(:\n    pass\n", "syntax")
    assert info.value.field == "source"
    assert not [p for p in tmp_cache.iterdir() if p.name.startswith(".build-")]


def test_missing_compiler_says_what_to_install(tmp_cache, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-9d1f")
    with pytest.raises(HierarchyError, match="apt-get install gcc"):
        cache.compile_pyx(tiny_source(uuid.uuid4().hex), "tiny")


def test_unwritable_generated_falls_back_to_user_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HIERARCHY_GENERATED", str(blocker / "generated"))
    monkeypatch.setattr(cache, "REPO_GENERATED", blocker / "generated")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "hierarchy"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "hierarchy"


def test_repo_generated_folder_is_the_default(monkeypatch):
    monkeypatch.delenv("HIERARCHY_GENERATED", raising=False)
    if os.access(REPO / "generated", os.W_OK):
        assert cache.cache_dir() == REPO / "generated"


def test_second_build_imports_without_compiling(tmp_cache, build_listener):
    first = hierarchy.build("tied", 2, [1], 2)
    calls = []
    build_listener(calls.append)
    again = hierarchy.build("tied", 2, [1], 2)
    assert again.name == first.name and not calls
    reopened = hierarchy.load(first.name)
    assert reopened.labels == first.labels and reopened.form == first.form
    assert hierarchy.load(first.path).name == first.name
    meta = json.loads((first.path / "meta.json").read_text())
    assert meta["labels"] == first.labels


def test_changed_template_rebuilds(tmp_cache, monkeypatch, build_listener):
    original = hierarchy.build("tied", 2, [1], 2, kernel="unrolled")
    real_text = render.template_text

    def edited(name):
        text = real_text(name)
        return text + "\n# edited template\n" if name == "rhs_unrolled.pyx.j2" else text

    monkeypatch.setattr(render, "template_text", edited)
    built = []
    build_listener(built.append)
    changed = hierarchy.build("tied", 2, [1], 2, kernel="unrolled")
    assert changed.name != original.name and built == [changed.name]
    assert "# edited template" in (changed.path / f"{changed.name}.pyx").read_text()


def test_load_unknown_name_is_a_clear_error(tmp_cache):
    with pytest.raises(HierarchyError, match="hierarchy list"):
        hierarchy.load("rhs_nothing_0123456789abcdef")


# ----------------------------------------------------------------------------- alias index

def forbid(*args, **kwargs):
    raise AssertionError("the fast path built a field or rendered a kernel")


def test_second_build_skips_field_and_render(tmp_cache, monkeypatch, build_listener):
    import numpy as np

    first = hierarchy.build("untied", 2, [1], 5)
    monkeypatch.setattr(hierarchy.models.attention.compiled, "build_field", forbid)
    monkeypatch.setattr(sparse_kernels, "generate", forbid)
    build_listener(forbid)
    again = hierarchy.build("untied", 2, (1,), 5)
    assert again.name == first.name and again.labels == first.labels
    assert again.coefficient_names == first.coefficient_names and again.words == first.words
    assert "field" not in again.__dict__  # stays lazy
    rng = np.random.default_rng(0)
    mu, kappa = rng.standard_normal(len(first)), rng.standard_normal(len(first.coefficient_names))
    assert np.array_equal(again.rhs(mu, kappa), first.rhs(mu, kappa))


def test_index_key_is_canonical_and_tracks_sources(monkeypatch):
    from hierarchy.models.attention.compiled import build_key

    base = build_key("untied", 2, [1], 4, observables=("M1.Mt2", "A1.A1"))
    assert base == build_key("untied", 2, (1,), 4, observables=["A1.A1", "Mt2.M1"])
    assert base != build_key("untied", 2, [1], 4, observables=("A1.A1",))
    assert base != build_key("untied", 2, [1], 4, observables=("M1.Mt2", "A1.A1"),
                             kernel="table")
    assert build_key("tied", 2, [1, 2], 3) == build_key("tied", 2, [2, 1], 3)
    assert build_key("tied", 2, [1], 3) != build_key("tied", 2, [1], 3, all_words=True)
    assert build_key("tied", 2, [1], 3, observables=("no.such.word",)) is None
    real_text = render.template_text
    monkeypatch.setattr(render, "template_text", lambda name: real_text(name) + "#\n")
    assert build_key("untied", 2, [1], 4, observables=("M1.Mt2", "A1.A1")) != base


@pytest.fixture
def only_tmp_cache(tmp_cache):
    """The temporary cache and no other folder (no entries from other runs are found)."""
    previous = cache.set_default_cache(cache.Cache(tmp_cache))
    yield tmp_cache
    cache.set_default_cache(previous)


@pytest.mark.parametrize("damage", ["garbage", "dangling", "other-model", "not-a-solver"])
def test_bad_index_entry_falls_back_to_the_full_build(only_tmp_cache, monkeypatch, damage):
    tmp_cache = only_tmp_cache
    from hierarchy.models.attention.compiled import build_key

    first = hierarchy.build("tied", 2, [1], 2)
    key = build_key("tied", 2, [1], 2)
    entry = tmp_cache / cache.INDEX_DIR / f"{key}.json"
    assert json.loads(entry.read_text())["name"] == first.name
    if damage == "garbage":
        entry.write_text('{"key": "' + key[:9])
    elif damage == "dangling":
        entry.write_text(json.dumps({"key": key, "name": "rhs_gone_0123456789abcdef"}))
    elif damage == "other-model":
        other = hierarchy.build("tied", 2, [1], 3)
        entry.write_text(json.dumps({"key": key, "name": other.name}))
    else:
        plain = cache.compile_pyx(tiny_source(uuid.uuid4().hex), "tiny")
        entry.write_text(json.dumps({"key": key, "name": plain.__name__}))
    fields = []
    real_build_field = hierarchy.models.attention.compiled.build_field
    monkeypatch.setattr(hierarchy.models.attention.compiled, "build_field",
                        lambda *a, **k: fields.append(a) or real_build_field(*a, **k))
    again = hierarchy.build("tied", 2, [1], 2)
    assert fields and again.labels == first.labels and again.degree == 2
    assert json.loads(entry.read_text())["name"] == again.name  # the entry is repaired


def test_index_is_best_effort(tmp_cache, tmp_path):
    key = "ab" * 32
    assert cache.index_lookup(key) is None and cache.index_lookup("../escape") is None
    cache.index_record(key, "rhs_gone_0123456789abcdef")
    assert cache.index_lookup(key) is None  # names a module that does not exist

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    unwritable = cache.Cache(blocker / "generated")
    with pytest.raises(HierarchyError, match="no writable folder"):
        unwritable.writable_root()
    unwritable.index_record("cd" * 32, "anything")  # a read-only cache only loses the shortcut


# ----------------------------------------------------------------------------- templates

TINY_TEMPLATE = "def triple(double x):\n    return {{ factor }} * x\n"


@pytest.fixture
def tiny_template(monkeypatch):
    """A template ``tiny.pyx.j2`` among the real ones; ``edit(text)`` changes its text."""
    texts = {"tiny.pyx.j2": TINY_TEMPLATE}
    real_text, real_names = render.template_text, render.template_names()
    monkeypatch.setattr(render, "template_text",
                        lambda name: texts[name] if name in texts else real_text(name))
    monkeypatch.setattr(render, "template_names", lambda: sorted([*real_names, *texts]))
    return lambda text: texts.update({"tiny.pyx.j2": text})


def test_a_template_module_is_found_again_without_rendering(only_tmp_cache, tiny_template,
                                                            monkeypatch, build_listener):
    from hierarchy.jit.fallback import CompiledModules

    built = []
    build_listener(built.append)
    first = CompiledModules("tiny").template_module("tiny.pyx.j2", "tiny", {"factor": 3.0})
    assert first.triple(2.0) == 6.0 and len(built) == 1
    renders = []
    real_render = render.render_template
    monkeypatch.setattr(render, "render_template",
                        lambda *a, **k: renders.append(a) or real_render(*a, **k))
    again = CompiledModules("tiny").template_module("tiny.pyx.j2", "tiny", {"factor": 3.0})
    assert again is first and not renders and len(built) == 1  # a new process's path
    other = CompiledModules("tiny").template_module("tiny.pyx.j2", "tiny", {"factor": 5.0})
    assert other.triple(2.0) == 10.0 and len(renders) == 1 and len(built) == 2
    tiny_template("def triple(double x):\n    return {{ factor }} * x + 1.0\n")
    edited = CompiledModules("tiny").template_module("tiny.pyx.j2", "tiny", {"factor": 3.0})
    assert edited.triple(2.0) == 7.0 and len(renders) == 2 and len(built) == 3


def test_a_template_key_covers_every_template_the_context_and_the_toolchain(tiny_template):
    toolchain = cache.toolchain_description(cache.DEFAULT_COMPILE_ARGS)
    base = render.template_key("tiny.pyx.j2", {"factor": 3.0}, toolchain)
    assert base == render.template_key("tiny.pyx.j2", {"factor": 3.0}, dict(toolchain))
    assert base != render.template_key("tiny.pyx.j2", {"factor": 3}, toolchain)
    assert base != render.template_key("tiny.pyx.j2", {"factor": 3.0},
                                       {**toolchain, "numpy": "0.0"})
    real_text = render.template_text
    render.template_text = lambda name: real_text(name) + ("#" if name == "_buffers.pyx.j2"
                                                           else "")
    try:  # an included template
        assert base != render.template_key("tiny.pyx.j2", {"factor": 3.0}, toolchain)
    finally:
        render.template_text = real_text


def test_a_dangling_template_entry_is_built_again(only_tmp_cache, tiny_template,
                                                  build_listener):
    from hierarchy.jit.fallback import CompiledModules

    context = {"factor": 4.0}
    first = CompiledModules("tiny").template_module("tiny.pyx.j2", "tiny", context)
    key = render.template_key("tiny.pyx.j2", context,
                              cache.toolchain_description(cache.DEFAULT_COMPILE_ARGS))
    entry = only_tmp_cache / cache.INDEX_DIR / f"{key}.json"
    entry.write_text(json.dumps({"key": key, "name": "tiny_gone_0123456789abcdef"}))
    again = CompiledModules("tiny").template_module("tiny.pyx.j2", "tiny", context)
    assert again is first  # rendered again: the same source, the module already built
    assert json.loads(entry.read_text())["name"] == first.__name__  # the entry repaired


def test_the_attention_kernel_key_covers_every_module_its_words_come_from():
    """The key of an attention solver hashes the text of ``KEY_SOURCES``; a module they import
    from the attention package decides the words too (``variants.py`` was left out: after an
    edit there the stale solver was found, and ``hierarchy.build`` returned it again; an
    audit). The key's sources are closed under those imports."""
    import ast
    from pathlib import Path

    import hierarchy
    from hierarchy.models.attention.compiled import KEY_SOURCES
    root = Path(hierarchy.__file__).parent
    for name in KEY_SOURCES:
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "hierarchy.models.attention."):
                source = node.module.removeprefix("hierarchy.").replace(".", "/") + ".py"
                assert source in KEY_SOURCES, f"{name} imports {source}, not in the key"
