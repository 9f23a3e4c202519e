"""The hand-built mixtures as network configs: ``hierarchy show --config CONFIG --as-network``
and ``Model.as_network()`` (the certified path at finite ``snr``), and the TOML writer."""
import math
import pathlib
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hierarchy
from hierarchy.cli.main import main
from hierarchy.config.documents import read_toml, toml_text
from hierarchy.config.loader import load_config
from hierarchy.core.errors import HierarchyError

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tools" / "configs"


@pytest.mark.parametrize("name", ["binary", "xor", "multiclass"])
def test_show_as_network_prints_the_shipped_network_config(capsys, tmp_path, name):
    """The printed TOML reads back to the shipped network config of the same model (the
    shipped files are checked against the presets in tests/test_network_presets.py)."""
    assert main(["show", "--config", str(CONFIGS / f"gmm_{name}.toml"), "--as-network"]) == 0
    text = capsys.readouterr().out
    assert tomllib.loads(text) == read_toml(CONFIGS / f"network_mixture_{name}.toml")
    written = tmp_path / "network.toml"
    written.write_text(text)
    assert load_config(written) == load_config(CONFIGS / f"network_mixture_{name}.toml")


@pytest.mark.parametrize("argv, field", [
    (["show", "--as-network"], "--as-network"),
    (["show", "--config", str(CONFIGS / "committee_erf.toml"), "--as-network"], "--as-network"),
    (["show", "--config", str(CONFIGS / "tied_quadratic.toml"), "--as-network"], "--as-network"),
])
def test_as_network_of_no_mixture_is_one_line_and_exit_2(capsys, argv, field):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and field in err
    if "--config" in argv:
        assert "allowed: gmm-binary | gmm-xor | gmm-multiclass" in err


def test_model_as_network_refuses_other_families():
    with pytest.raises(HierarchyError) as caught:
        hierarchy.Model.from_toml(CONFIGS / "committee_erf.toml").as_network()
    assert caught.value.field == "Model.as_network()"


def test_a_finite_snr_mixture_is_not_certified_but_its_network_form_is(tmp_path):
    """The hand-built field at finite snr is a QMC average (exit 3, and the line says where a
    certified solve is had); the same model as a network config is solved by the joint
    engine and certified."""
    hand = hierarchy.Model.from_toml(CONFIGS / "gmm_binary.toml",
                                     model={"snr": 10.0}, solve={"t_final": 10.0, "points": 11})
    summary = hand.solve(tmp_path / "hand").info["summary"]
    assert summary["certified"] is False
    assert "--as-network" in summary["certification"]["not_certifiable"]
    network = hand.as_network()
    assert network.family == "network"
    assert network.config["model"]["mixture"]["snr"] == 10.0
    info = network.solve(tmp_path / "network").info["summary"]
    assert info["certified"] is True and info["engine"] == "joint (compiled adaptive)"
    assert info["quadrature_error"]["certified"] is True


KEYS = st.text(alphabet=st.sampled_from("abQR1._- \"\\é"), min_size=1, max_size=6)
SCALARS = st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=8),
                    st.floats(allow_nan=False))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.lists(st.lists(st.floats(allow_nan=False), max_size=2), max_size=2))
TABLES = st.recursive(st.dictionaries(KEYS, VALUES, max_size=4),
                      lambda inner: st.dictionaries(KEYS, st.one_of(VALUES, inner), max_size=3),
                      max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, TABLES, max_size=3))
def test_toml_text_reads_back_to_the_same_document(document):
    """Quoted keys (``"Q1.1"``), escapes, infinities and nested tables survive the trip."""
    assert tomllib.loads(toml_text(document)) == document


def test_toml_text_writes_infinities_and_dotted_keys():
    text = toml_text({"model": {"snr": math.inf}, "init": {"statistics": {"Q1.1": 1.0}}})
    assert "snr = inf" in text and '"Q1.1" = 1.0' in text
