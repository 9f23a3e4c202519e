"""Field construction: arguments, observables, coefficient order, rendering."""
import json

import numpy as np
import pytest
from scenarios import (
    DIRECT_ORDER_PARAMETERS,
    INTERFACE_COEFFICIENTS,
    SMALL_SYSTEMS,
    interface_coefficient_names,
    small_field,
)

from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.display import TIME_MAP, render
from hierarchy.models.attention.operators import build_field, coefficient_vector
from hierarchy.models.attention.variants import VARIANTS


@pytest.mark.parametrize("kwargs,field", [
    (dict(K=0), "model.K"), (dict(degree=1), "hierarchy.degree"),
    (dict(degree=2.5), "hierarchy.degree"), (dict(trainable=[3]), "model.trainable"),
    (dict(trainable=[1, 1]), "model.trainable"), (dict(trainable=[]), "model.trainable"),
    (dict(parameterization="free"), "model.parameterization"),
    (dict(observables=["1.3"]), "hierarchy.observables"),
    (dict(observables=["1.1.1.1"], degree=3), "hierarchy.observables"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    args = dict(parameterization="tied", K=2, trainable=[1], degree=3) | kwargs
    with pytest.raises(HierarchyError) as err:
        build_field(**args)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_coefficient_names_follow_interface():
    for (parameterization, K, trainable), names in INTERFACE_COEFFICIENTS.items():
        assert build_field(parameterization, K, list(trainable), 2).coefficient_names == names


def test_direct_system_is_closed_on_its_order_parameters():
    field = build_field("direct", 2, [1], 6)
    assert field.labels == DIRECT_ORDER_PARAMETERS


def test_observables_extend_the_system_and_index_accepts_any_representative():
    base = build_field("untied", 2, [1], 3)
    extra = build_field("untied", 2, [1], 3, observables=["A2.B2"])
    assert "A2.B2" in extra.labels and "A2.B2" not in base.labels
    assert extra.index("B2.A2") == extra.index("A2.B2")
    with pytest.raises(HierarchyError, match="not in this system"):
        base.index("A2.B2")


def test_coefficient_vector_checks_names():
    field = build_field("tied", 2, [1], 2)
    assert np.allclose(field.coefficient_vector({"Gamma[1,1]": 1, "Gamma[1,2]": 2}), [1, 2, 0])
    with pytest.raises(HierarchyError, match="unknown coefficient"):
        field.coefficient_vector({"Gamma[1,1]": 1, "Gamma[1,2]": 2, "beta[1]": 0})
    with pytest.raises(HierarchyError, match="missing"):
        field.coefficient_vector({"Gamma[1,1]": 1})
    # the module-level function is the one definition (the solver's too)
    names = field.coefficient_names
    assert np.array_equal(coefficient_vector(names, [1.0, 2.0, 3.0]), [1.0, 2.0, 3.0])
    with pytest.raises(HierarchyError, match="length 3") as info:
        coefficient_vector(names, [1.0])
    assert info.value.field == "coefficients"
    with pytest.raises(HierarchyError, match="this solver takes"):
        coefficient_vector(names, {"beta[1]": 0}, owner="solver")


def test_show_text_json_latex_and_why():
    field = build_field("untied", 2, [1], 3)
    text = render(field)
    assert "d mu[M1.Mt2]/dtau = " in text and "-beta[1]*mu[A1.M2] - beta[1]*mu[B1.M2]" in text
    data = json.loads(render(field, "json"))
    assert data["labels"] == field.labels
    assert set(data["equations"]) == set(field.labels)
    assert data["equations"]["M2.Mt2"] == "0"
    assert r"\frac{d\mu_{M1.Mt2}}{d\tau}" in render(field, "latex")
    why = render(field, why="Mt2.B1.M1")
    start = why.splitlines()[1].split()[0]
    assert start in field.observables and why.splitlines()[1].endswith("is an observable")
    target = field.labels[field.index("Mt2.B1.M1")]
    assert why.splitlines()[-1].split()[1] == target
    with pytest.raises(HierarchyError, match="format"):
        render(field, "html")


# --- invariants over every row of VARIANTS ------------------------------------------------


def test_small_systems_cover_every_variant():
    assert {system[0] for system in SMALL_SYSTEMS} == set(VARIANTS)


@pytest.mark.parametrize("parameterization,K,trainable,degree", SMALL_SYSTEMS)
def test_small_systems_are_well_formed(parameterization, K, trainable, degree):
    field = small_field(parameterization, K, trainable, degree)
    assert field.coefficient_names == interface_coefficient_names(parameterization, K,
                                                                  trainable)
    assert set(field.observables) <= set(field.labels)
    assert [field.index(label) for label in field.labels] == list(range(len(field)))
    assert all(1 <= len(w) <= degree for w in field.words)
    for name in field.coefficient_names:
        assert field.operators[name].shape == (len(field), len(field))


def test_every_variant_has_a_time_map(variant):
    assert TIME_MAP[variant.name].startswith(f"{variant.time_variable} = ")
    assert ("4 n alpha" in TIME_MAP[variant.name]) == (variant.time_factor == 4)
