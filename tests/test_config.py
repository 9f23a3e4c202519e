"""Config loading and validation: defaults, merging, every refused value, and fuzzing."""
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hierarchy.core import resources
from hierarchy.models.attention import config as attention_config
from hierarchy.config.loader import DEFAULTS, deep_merge, load_config, validate_config
from hierarchy.core.errors import HierarchyError

# The example config of INTERFACE.md, verbatim.
INTERFACE_EXAMPLE = """
[model]
parameterization = "tied"      # tied | untied | direct
K = 2
trainable = [1]
tokens = 1                     # L
covariance = [[1.0]]           # C, L x L; default identity
weight_decay = 0.0             # gamma

[loss]                         # two-index losses: index 1 is the student, index 2 the teacher
name = "quadratic"             # quadratic | mse | softmax-mse | expression
student = "h1"                 # mse activations: h1 h2 h3 tanh erf (more allowed)
teacher = "h1"
expression = ""                # for name = "expression": text in G[i,j,k]

[hierarchy]
degree = 8
observables = []               # extra word labels to keep

[init]
source = "gaussian"            # gaussian | moments
moments = ""                   # for source = "moments": JSON file {label: value}
d = 400                        # gaussian: finite-d matrices W_k (or U_k, V_k, S_k)
width = []                     # d_k per index; default d
scale = []                     # entries ~ N(0, scale_k^2 / d); default 1
seed = 0

[solve]
t_final = 1.0
points = 201                   # output times, evenly spaced from 0 to t_final
rtol = 1e-8
atol = 1e-10

[sgd]
d = 400
learning_rate = 0.01
batch = 512
seeds = [0]
"""


def refused(overrides=None, text=None, tmp_path=None):
    """The HierarchyError of loading ``overrides`` (or a file with ``text``)."""
    path = None
    if text is not None:
        path = tmp_path / "config.toml"
        path.write_text(text)
    with pytest.raises(HierarchyError) as info:
        load_config(path, overrides=overrides)
    message = str(info.value)
    assert "\n" not in message, message
    return info.value


def test_interface_example_loads_and_equals_defaults(tmp_path):
    path = tmp_path / "example.toml"
    path.write_text(INTERFACE_EXAMPLE)
    cfg = load_config(path)
    # The one deliberate difference: the built-in horizon is the one its default extrapolation
    # certifies (exit 0), not INTERFACE.md's t_final = 1.0, which is ten radii out.
    assert DEFAULTS["solve"]["t_final"] < 1.0
    assert cfg == load_config(overrides={"solve": {"t_final": 1.0}})
    for section, table in DEFAULTS.items():
        assert set(cfg[section]) == set(table)


def test_defaults_filled_and_normalised():
    cfg = load_config(overrides={"model": {"tokens": 3, "covariance": []}, "study": {"max_degree": 4}})
    assert cfg["model"]["covariance"] == np.eye(3).tolist()
    assert cfg["study"]["degrees"] == [2, 3, 4]
    assert isinstance(cfg["solve"]["t_final"], float)
    assert DEFAULTS["model"]["covariance"] == []  # defaults are never mutated


def test_overrides_merge_over_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[sgd]\nd = 100\nbatch = 8\n")
    cfg = load_config(path, overrides={"sgd": {"batch": 16}})
    assert (cfg["sgd"]["d"], cfg["sgd"]["batch"], cfg["sgd"]["learning_rate"]) == (100, 16, 0.01)


def test_deep_merge_copies():
    base = {"a": {"b": [1]}}
    merged = deep_merge(base, {"a": {"c": 2}})
    merged["a"]["b"].append(5)
    assert base == {"a": {"b": [1]}} and merged["a"]["c"] == 2


def test_relative_moments_path_is_taken_from_the_config_folder(tmp_path):
    (tmp_path / "mu0.json").write_text(json.dumps({"1": 1.0}))
    path = tmp_path / "c.toml"
    path.write_text('[init]\nsource = "moments"\nmoments = "mu0.json"\n')
    cfg = load_config(path)
    assert cfg["init"]["moments"] == str((tmp_path / "mu0.json").resolve())


def test_observables_are_canonicalised():
    cfg = load_config(overrides={"hierarchy": {"observables": ["2.1.1"]}})
    assert cfg["hierarchy"]["observables"] == ["1.1.2"]


def test_validate_sections_skips_the_loss():
    # show/generate validate only the model: a K=3 model is fine without a K=3 loss
    cfg = validate_config(deep_merge(DEFAULTS, {"model": {"K": 3}}), sections=("model", "hierarchy"))
    assert cfg["model"]["K"] == 3
    with pytest.raises(HierarchyError):
        validate_config(deep_merge(DEFAULTS, {"model": {"K": 3}}))


# --- one test per refused value --------------------------------------------------------------


@pytest.mark.parametrize("K", [0, -1])
def test_K_below_one(K):
    assert refused({"model": {"K": K}}).field == "model.K"


def test_degree_below_two():
    error = refused({"hierarchy": {"degree": 1}})
    assert error.field == "hierarchy.degree" and ">= 2" in str(error)


def test_degree_too_large_names_the_largest_that_fits(monkeypatch):
    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(2**30))
    error = refused({"hierarchy": {"degree": 40}})
    assert error.field == "hierarchy.degree"
    largest = int(str(error).rsplit(" ", 1)[-1])
    budget = resources.MEMORY_FRACTION * 2**30
    assert attention_config.estimate_field_bytes("tied", 2, largest) <= budget
    assert attention_config.estimate_field_bytes("tied", 2, largest + 1) > budget
    load_config(overrides={"hierarchy": {"degree": largest}})  # the named degree is accepted


def test_absurd_degree_is_refused_quickly():
    error = refused({"model": {"parameterization": "untied"}, "hierarchy": {"degree": 10**6}})
    assert "largest degree that fits" in str(error)


def test_study_degrees_are_checked_for_memory(monkeypatch):
    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(2**30))
    assert refused({"study": {"degrees": [2, 60]}}).field == "study.degrees"


@pytest.mark.parametrize("trainable, words", [([3], "out of range"), ([0], "out of range"),
                                              ([1, 1], "repeated"), ([], "at least one")])
def test_trainable_indices(trainable, words):
    error = refused({"model": {"trainable": trainable}})
    assert error.field == "model.trainable" and words in str(error)


def test_covariance_not_symmetric():
    error = refused({"model": {"tokens": 2, "covariance": [[1.0, 0.5], [0.0, 1.0]]}})
    assert error.field == "model.covariance" and "symmetric" in str(error)


def test_covariance_not_psd():
    error = refused({"model": {"tokens": 2, "covariance": [[1.0, 2.0], [2.0, 1.0]]}})
    assert error.field == "model.covariance" and "semidefinite" in str(error)


@pytest.mark.parametrize("covariance", [[[1.0]], [[1.0, 0.0]], [[1.0, 0.0], [0.0]], [1.0, 0.0]])
def test_covariance_wrong_size(covariance):
    error = refused({"model": {"tokens": 2, "covariance": covariance}})
    assert error.field == "model.covariance" and "2x2" in str(error)


def test_covariance_psd_singular_is_accepted():
    cfg = load_config(overrides={"model": {"tokens": 2, "covariance": [[1.0, 1.0], [1.0, 1.0]]},
                                 "loss": {"name": "softmax-mse"}})
    assert cfg["model"]["covariance"] == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("section, key, value", [
    ("sgd", "d", 0), ("sgd", "batch", 0), ("sgd", "learning_rate", 0.0),
    ("sgd", "learning_rate", -0.1), ("init", "d", -5), ("solve", "t_final", 0.0),
    ("solve", "rtol", -1e-8), ("solve", "points", 1),
])
def test_not_positive(section, key, value):
    assert refused({section: {key: value}}).field == f"{section}.{key}"


def test_dimension_too_large_for_memory(monkeypatch):
    monkeypatch.setenv("HIERARCHY_MEMORY_BYTES", str(2**30))
    error = refused({"sgd": {"d": 10**6}})
    assert error.field == "sgd.d" and "allowed: d <=" in str(error)


def test_negative_weight_decay():
    error = refused({"model": {"weight_decay": -0.1}})
    assert error.field == "model.weight_decay" and ">= 0" in str(error)


def test_unknown_key_names_the_nearest():
    error = refused({"model": {"weight_decy": 0.1}})
    assert error.field == "model.weight_decy" and "did you mean weight_decay?" in str(error)


def test_key_in_the_wrong_section_names_the_right_one():
    assert "did you mean hierarchy.degree?" in str(refused({"model": {"degree": 4}}))


def test_unknown_section_names_the_nearest():
    assert "did you mean model?" in str(refused({"modle": {"K": 2}}))


def test_malformed_toml_gives_line_and_column(tmp_path):
    error = refused(text="[model]\nK = 2\ntrainable = [1,, 2]\n", tmp_path=tmp_path)
    assert "malformed TOML" in str(error) and "line 3" in str(error)


def test_unreadable_file(tmp_path):
    assert "cannot read" in str(_refused_path(tmp_path / "missing.toml"))
    assert "cannot read" in str(_refused_path(tmp_path))  # a folder, not a file


def test_binary_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "UTF-8" in str(_refused_path(path))


def _refused_path(path):
    with pytest.raises(HierarchyError) as info:
        load_config(path)
    assert "\n" not in str(info.value)
    return info.value


@pytest.mark.parametrize("section, key, value", [
    ("model", "K", "2"), ("model", "K", 2.5), ("model", "K", True), ("model", "trainable", 1),
    ("model", "trainable", ["1"]), ("model", "covariance", "identity"), ("sgd", "seeds", [0.5]),
    ("sgd", "learning_rate", "fast"), ("loss", "name", 3), ("hierarchy", "observables", "1.2"),
    ("solve", "t_final", float("nan")), ("init", "scale", [1.0, "x"]),
])
def test_wrong_types(section, key, value):
    assert refused({section: {key: value}}).field == f"{section}.{key}"


def test_section_not_a_table(tmp_path):
    assert "must be a table" in str(refused(text="model = 3\n", tmp_path=tmp_path))


@pytest.mark.parametrize("value", ["tide", "TIED", ""])
def test_unknown_parameterization(value):
    error = refused({"model": {"parameterization": value}})
    assert "tied | untied | direct" in str(error)


def test_unknown_observable_label():
    assert refused({"hierarchy": {"observables": ["1.7"]}}).field == "hierarchy.observables"


def test_observable_longer_than_degree():
    error = refused({"hierarchy": {"degree": 2, "observables": ["1.1.2"]}})
    assert "more than hierarchy.degree" in str(error)


@pytest.mark.parametrize("loss, model", [
    ({"name": "quadratic"}, {"K": 3, "trainable": [1]}),          # two-index loss, K = 3
    ({"name": "mse", "student": "relu7"}, {}),                    # unknown activation
    ({"name": "softmax-mse"}, {"tokens": 1}),                     # softmax needs L >= 2
    ({"name": "expression", "expression": "G[1,1,1]*x"}, {}),     # unknown symbol
    ({"name": "expression", "expression": "Abs(G[1,1,1])"}, {}),  # not smooth
    ({"name": "expression", "expression": "G[2,1,1]"}, {}),       # index beyond L
    ({"name": "expression", "expression": ""}, {}),               # empty
    ({"name": "hinge"}, {}),                                      # unknown name
])
def test_loss_that_does_not_fit_the_model(loss, model):
    error = refused({"loss": loss, "model": model})
    assert error.field is not None and (error.field.startswith("loss") or error.field.startswith("model"))


def test_init_moments_file_required(tmp_path):
    assert refused({"init": {"source": "moments"}}).field == "init.moments"
    assert refused({"init": {"source": "moments", "moments": str(tmp_path / "no.json")}}).field == "init.moments"


def test_init_lists_one_per_index():
    assert refused({"init": {"width": [10, 10, 10]}}).field == "init.width"
    assert refused({"init": {"scale": [-1.0, 1.0]}}).field == "init.scale"


def test_seeds():
    assert refused({"sgd": {"seeds": []}}).field == "sgd.seeds"
    assert refused({"sgd": {"seeds": [1, 1]}}).field == "sgd.seeds"
    assert refused({"study": {"seeds": [-1]}}).field == "study.seeds"


def test_study_fields():
    assert refused({"study": {"min_degree": 5, "max_degree": 3}}).field == "study.max_degree"
    assert "did you mean sgd?" in str(refused({"study": {"references": ["sdg"]}}))
    assert refused({"study": {"workers": -1}}).field == "study.workers"


# --- fuzzing ---------------------------------------------------------------------------------

FLOATS = st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), FLOATS, st.booleans(),
                    st.text(max_size=8), st.sampled_from(["tied", "untied", "direct", "mse", "h2", "1.2",
                                                          "moments", "expression", "G[1,1,1]**2"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4), max_leaves=10)
KEYS = st.sampled_from(sorted({k for table in DEFAULTS.values() for k in table}) + ["bogus", "Kk"])
SECTIONS = st.sampled_from(list(DEFAULTS) + ["modle", "extra"])
DOCUMENTS = st.dictionaries(SECTIONS, st.dictionaries(KEYS, VALUES, max_size=4), max_size=4)


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(_toml_value(item) for item in value) + "]"


def _toml_document(document):
    lines = []
    for section, table in document.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in table.items())
    return "\n".join(lines) + "\n"


def _loads_or_refuses(path=None, overrides=None):
    try:
        cfg = load_config(path, overrides=overrides)
    except HierarchyError as error:
        assert str(error) and "\n" not in str(error)
        return None
    assert set(cfg) == set(DEFAULTS)
    return cfg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_fuzz_overrides_load_or_refuse(document):
    _loads_or_refuses(overrides=document)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(document=DOCUMENTS, noise=st.text(max_size=20), cut=st.integers(min_value=0, max_value=400))
def test_fuzz_toml_text_load_or_refuse(tmp_path, document, noise, cut):
    text = _toml_document(document)
    path = tmp_path / "fuzz.toml"
    for variant in (text, text[:cut] + noise + text[cut:]):
        path.write_text(variant, encoding="utf-8", errors="surrogatepass")
        _loads_or_refuses(path)


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({
    "model": st.fixed_dictionaries({
        "parameterization": st.sampled_from(["tied", "untied", "direct"]),
        "K": st.integers(1, 4), "trainable": st.lists(st.integers(0, 4), min_size=1, max_size=3),
        "tokens": st.integers(1, 3), "weight_decay": st.floats(-1, 1)}),
    "hierarchy": st.fixed_dictionaries({"degree": st.integers(1, 12)}),
}))
def test_fuzz_plausible_models_load_or_refuse(document):
    cfg = _loads_or_refuses(overrides=document)
    if cfg is not None:
        assert all(1 <= k <= cfg["model"]["K"] for k in cfg["model"]["trainable"])


# --- [model] family: which model family the config is for -------------------------------------


def test_model_family_defaults_to_attention_and_is_kept():
    from hierarchy.core.registry import family_names

    assert DEFAULTS["model"]["family"] == "attention" and "attention" in family_names()
    assert load_config()["model"]["family"] == "attention"
    assert load_config(overrides={"model": {"family": "attention"}})["model"]["family"] == "attention"


@pytest.mark.parametrize("family", ["transformer", 3, ["attention"]])
def test_unknown_model_family_is_refused_naming_the_field(family):
    error = refused({"model": {"family": family}})
    assert error.field == "model.family" and "attention" in str(error) and "\n" not in str(error)


def test_family_validation_is_dispatched_through_the_registry(monkeypatch):
    from hierarchy.core import registry

    seen = []
    family = registry.family("attention")
    real = family.validate
    monkeypatch.setattr(family, "validate", lambda config, **kw: seen.append(kw) or real(config, **kw))
    load_config()
    validate_config(DEFAULTS, sections=("model", "hierarchy"))
    assert seen == [{}, {"sections": ("model", "hierarchy")}]
