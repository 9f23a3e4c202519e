"""The derivation cache (``network/table_cache.py``): a second run of the same network reads
its term table from disk instead of deriving it, and never reads a wrong one.

Each test uses its own cache folder (``tmp_path``) and small networks (``K, M <= 2``).
"""
import shutil

import numpy as np
import pytest

from hierarchy.config.loader import load_config
from hierarchy.jit import render
from hierarchy.jit.cache import Cache
from hierarchy.models.network import derivation, table_cache
from hierarchy.models.network.model import network_from_config


def network(**model):
    """The Network of a small config: tanh K = M = 2 with ``model`` merged into ``[model]``."""
    config = {"model": {"family": "network", "student": {"width": 2, "activation": "tanh"},
                        "teacher": {"width": 2, "activation": "tanh"}}}
    for key, value in model.items():
        section, _, name = key.partition("__")
        if name:
            config["model"].setdefault(section, {})[name] = value
        else:
            config["model"][key] = value
    return network_from_config(load_config(None, config))


def cached(net, cache, derive=derivation.derive_term_table):
    return table_cache.cached(net, derive, derivation.table_from_arrays, cache)


def never(net):
    raise AssertionError("derived although the cache holds the table")


def assert_same_table(a, b):
    assert a.size == b.size and len(a.groups) == len(b.groups)
    for g, h in zip(a.groups, b.groups):
        assert g.pattern == h.pattern
        assert all(type(x) is int for entry in h.pattern for x in entry)
        for name in ("fields", "coefficient", "v_index", "target"):
            x, y = getattr(g, name), getattr(h, name)
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name


def entry(cache, net):
    return cache.writable_root() / table_cache.FOLDER / f"{table_cache.table_key(net)}.npz"


def test_a_second_run_reads_the_table_it_derived(tmp_path):
    cache, net = Cache(tmp_path), network(loss="(yhat - y)**4/4", teacher__noise=0.3,
                                           student__second_layer="trained")
    first = cached(net, cache)
    assert entry(cache, net).is_file()
    assert_same_table(cached(net, cache, derive=never), first)
    assert_same_table(first, derivation.derive_term_table(net))


def test_a_network_without_a_table_is_cached_as_none(tmp_path):
    cache, net = Cache(tmp_path), network()
    assert cached(net, cache, derive=lambda _: None) is None
    assert cached(net, cache, derive=never) is None


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other key", "bad shapes"])
def test_a_corrupt_or_foreign_entry_is_derived_again_and_rewritten(tmp_path, damage):
    cache, net, other = Cache(tmp_path), network(), network(loss="(yhat - y)**4/4")
    cached(net, cache)
    path = entry(cache, net)
    if damage == "garbage":
        path.write_bytes(b"not a table")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "other key":  # another network's table under this name
        cached(other, cache)
        shutil.copy(entry(cache, other), path)
    else:
        with np.load(path) as data:
            arrays = dict(data)
        arrays["coefficient"] = arrays["coefficient"][:-1]
        np.savez(path, **arrays)
    assert table_cache.load(table_cache.table_key(net), cache) is None
    derived = []
    table = cached(net, cache, derive=lambda n: derived.append(1) or
                   derivation.derive_term_table(n))
    assert derived == [1]
    assert_same_table(table, derivation.derive_term_table(net))
    assert_same_table(cached(net, cache, derive=never), table)  # rewritten whole


@pytest.mark.parametrize("change", [
    {"student__activation": "erf"}, {"teacher__activation": "x**3"}, {"loss": "(yhat - y)**4"},
    {"teacher__noise": 0.1}, {"student__second_layer": "trained"},
    {"student__second_layer_values": [1.0, 0.5]}, {"teacher__second_layer_values": [1.0, 2.0]},
    {"teacher__width": 1},
])
def test_the_key_changes_with_the_model(change):
    assert table_cache.table_key(network(**change)) != table_cache.table_key(network())


def test_the_key_is_the_same_for_the_same_model():
    assert table_cache.table_key(network()) == table_cache.table_key(network())


def test_the_key_changes_with_the_code(tmp_path):
    copy = tmp_path / "network"
    shutil.copytree(table_cache.CODE_FOLDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = table_cache.code_digest(copy)
    assert before == table_cache.code_digest.__wrapped__(table_cache.CODE_FOLDER)
    derivation_file = copy / "derivation.py"
    derivation_file.write_text(derivation_file.read_text() + "\n# changed\n")
    after = table_cache.code_digest.__wrapped__(copy)
    assert after != before
    net = network()
    assert table_cache.table_key(net, before) != table_cache.table_key(net, after)


@pytest.mark.parametrize("template", table_cache.TEMPLATES)
def test_the_key_changes_with_the_engines_templates(monkeypatch, template):
    """The cache keeps an engine's rendered source (``engine.pattern_plan``): a template
    edited without a module of the family must still give new keys."""
    before = table_cache.code_digest.__wrapped__(table_cache.CODE_FOLDER)
    text = table_cache.template_text(template)
    monkeypatch.setattr(table_cache, "template_text",
                        lambda name: text + "\n# changed\n" if name == template
                        else render.template_text(name))
    assert table_cache.code_digest.__wrapped__(table_cache.CODE_FOLDER) != before
