"""``hierarchy show --config`` for the attention family (issue 24 item 3).

For every shipped attention config the printed equations are those of ``hierarchy show``
with the flags the config sets (the independent path: the flags are parsed and validated
by the CLI, not by the family), after one line naming the config's loss, in each format.
"""

import json
import pathlib

import pytest

from hierarchy.cli.main import main
from hierarchy.config import loader

ROOT = pathlib.Path(__file__).resolve().parents[1]
ATTENTION_CONFIGS = sorted(
    path for path in (ROOT / "tools" / "configs").glob("*.toml")
    if loader.load_config(path)["model"]["family"] == "attention")


def flags_of(config):
    model, hierarchy = config["model"], config["hierarchy"]
    flags = ["--parameterization", model["parameterization"], "--K", str(model["K"]),
             "--trainable", ",".join(map(str, model["trainable"])),
             "--degree", str(hierarchy["degree"])]
    if hierarchy["observables"]:
        flags += ["--observables", ",".join(hierarchy["observables"])]
    return flags


def printed(capsys, argv):
    code = main(argv)
    return code, capsys.readouterr().out


def test_every_attention_config_ships():
    assert len(ATTENTION_CONFIGS) >= 2   # tied_quadratic, tied_softmax


@pytest.mark.parametrize("path", ATTENTION_CONFIGS, ids=lambda p: p.stem)
@pytest.mark.parametrize("format", ["text", "latex"])
def test_config_equations_are_the_flags_equations(capsys, path, format):
    config = loader.load_config(path)
    code, shown = printed(capsys, ["show", "--config", str(path), "--format", format])
    assert code == 0
    _, flagged = printed(capsys, ["show", *flags_of(config), "--format", format])
    first, rest = shown.split("\n", 1)
    assert rest == flagged
    assert config["loss"]["name"] in first and first.startswith("%" if format == "latex" else "#")


@pytest.mark.parametrize("path", ATTENTION_CONFIGS, ids=lambda p: p.stem)
def test_config_json_has_the_equations_and_the_loss(capsys, path):
    config = loader.load_config(path)
    code, shown = printed(capsys, ["show", "--config", str(path), "--format", "json"])
    assert code == 0
    record = json.loads(shown)
    _, flagged = printed(capsys, ["show", *flags_of(config), "--format", "json"])
    expected = json.loads(flagged)
    assert record["equations"] == expected["equations"] and record["labels"] == expected["labels"]
    assert record["degree"] == config["hierarchy"]["degree"]
    assert record["config"]["loss"] == config["loss"]


def test_a_text_only_family_refuses_other_formats_in_one_line(capsys):
    code = main(["show", "--config", str(ROOT / "tools/configs/gmm_xor.toml"), "--format",
                 "latex"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--format" in err and "text" in err


def test_the_python_api_names_its_own_format_argument():
    import hierarchy
    from hierarchy.core.errors import HierarchyError
    model = hierarchy.Model.from_toml(ROOT / "tools/configs/gmm_xor.toml")
    with pytest.raises(HierarchyError) as error:
        model.equations(format="latex")
    assert error.value.field == "format" and "--format" not in str(error.value)
