"""Field construction: arguments, observables, coefficient order, rendering."""
import json

import numpy as np
import pytest

from hierarchy.models.attention.display import render
from hierarchy.core.errors import HierarchyError
from hierarchy.models.attention.operators import build_field


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
    assert build_field("tied", 2, [1], 2).coefficient_names == \
        ["Gamma[1,1]", "Gamma[1,2]", "gamma"]
    assert build_field("untied", 2, [1], 2).coefficient_names == \
        ["beta[1]", "a1[1,1]", "a1[1,2]", "a2[1,1]", "a2[1,2]", "gamma"]
    assert build_field("direct", 2, [2], 2).coefficient_names == \
        ["A[2,1]", "A[2,2]", "B[2,1]", "B[2,2]", "gamma"]


def test_direct_system_is_closed_on_its_order_parameters():
    field = build_field("direct", 2, [1], 6)
    assert field.labels == ["t1", "t2", "Psi1.1", "Omega1.1", "Psi1.2", "Omega1.2", "Psi2.2",
                            "Omega2.2"]


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
