"""The package's own docs/: generated config reference, CLI coverage, links, --help."""
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

from hierarchy.cli.main import build_parser, main
from hierarchy.config.loader import DEFAULTS
from hierarchy.config.reference import (KEY_HELP, flatten_defaults, missing_help,
                                        render_config_reference, toml_value)

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GENERATOR = ROOT / "tools" / "gen_config_docs.py"

# [text](target) and ![alt](target), optionally with a "title"; and [label]: target definitions.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
HTML_LINK = re.compile(r"(?:href|src)\s*=\s*[\"']([^\"']+)[\"']")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


# ---------------------------------------------------------------------------------------
# docs/config.md: generated from DEFAULTS + KEY_HELP


def test_every_config_key_has_help_and_no_help_is_stale():
    flat = flatten_defaults(DEFAULTS)
    assert len(flat) >= 30  # every section's keys, not just the section names
    assert set(KEY_HELP) - set(flat) == set(), "KEY_HELP names keys that DEFAULTS lacks"
    assert set(flat) - set(KEY_HELP) == set(), (
        "config keys without an entry in KEY_HELP (hierarchy/config_reference.py)")
    for key, (description, allowed) in KEY_HELP.items():
        assert description.strip() and allowed.strip(), key


def test_flatten_defaults_flattens_nested_tables_to_dotted_names():
    flat = flatten_defaults({"a": {"b": 1, "c": {"d": [2], "e": {"f": "x"}}}, "g": {"h": True}})
    assert flat == {"a.b": 1, "a.c.d": [2], "a.c.e.f": "x", "g.h": True}


def test_missing_help_finds_a_new_key_and_a_stale_entry():
    defaults = {"solve": {"rtol": 1e-8, "connect_timeout": 10.0}}
    help_table = {"solve.rtol": ("tolerance", "number > 0"), "solve.gone": ("old", "-")}
    assert missing_help(defaults, help_table) == (["solve.connect_timeout"], ["solve.gone"])
    with pytest.raises(ValueError, match="connect_timeout"):
        render_config_reference(defaults, help_table)


def test_docs_config_md_matches_the_generator():
    expected = render_config_reference()
    current = (DOCS / "config.md").read_text(encoding="utf-8")
    assert current == expected, (
        "docs/config.md is out of date with hierarchy.config.loader.DEFAULTS / KEY_HELP: "
        "run `python tools/gen_config_docs.py`")


def test_config_md_lists_every_key_with_its_default():
    text = render_config_reference()
    for dotted, value in flatten_defaults(DEFAULTS).items():
        section, key = dotted.split(".", 1)
        row = next((line for line in text.splitlines() if line.startswith(f"| `{key}` |")
                    and _section_of(text, line) == section), None)
        assert row is not None, dotted
        assert f"`{toml_value(value).replace('|', chr(92) + '|')}`" in row, (dotted, row)


def _section_of(text, line):
    before = text[: text.index(line)]
    return re.findall(r"^## `\[([^\]]+)\]`", before, re.MULTILINE)[-1]


def test_config_md_defaults_are_valid_toml_that_loads_back():
    import tomllib

    for dotted, value in flatten_defaults(DEFAULTS).items():
        assert tomllib.loads(f"x = {toml_value(value)}")["x"] == value, dotted


def test_a_changed_default_makes_the_reference_differ():
    changed = {section: dict(table) for section, table in DEFAULTS.items()}
    changed["solve"]["rtol"] = 1e-3
    assert render_config_reference(changed) != render_config_reference()
    assert "`0.001`" in render_config_reference(changed)


def test_generator_check_exits_1_on_drift_and_0_when_current(tmp_path, capsys):
    target = tmp_path / "config.md"
    target.write_text(render_config_reference().replace("`LSODA`", "`RK45`", 1), encoding="utf-8")
    # the real command once (its exit status and message); the other runs call its main()
    # in this process (each subprocess spent ~2 s importing the package)
    stale = _generator("--check", "--out", target)
    assert stale.returncode == 1
    assert "python tools/gen_config_docs.py" in stale.stderr
    generator = _generator_module()
    assert generator.main(["--check", "--out", str(target)]) == 1
    assert "python tools/gen_config_docs.py" in capsys.readouterr().err
    assert generator.main(["--out", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == render_config_reference()
    assert generator.main(["--check", "--out", str(target)]) == 0
    assert "is up to date" in capsys.readouterr().out
    assert generator.main(["--check", "--out", str(tmp_path / "absent.md")]) == 1


def _generator(*argv):
    return subprocess.run([sys.executable, str(GENERATOR), *map(str, argv)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def _generator_module():
    spec = importlib.util.spec_from_file_location("gen_config_docs", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------
# docs/cli.md: every subcommand and flag of the parser


def _subcommands(parser):
    for action in parser._actions:  # argparse has no public accessor for its subparsers
        if hasattr(action, "add_parser"):  # the subparsers action
            return dict(action.choices)
    return {}


def _flags(parser):
    return {option for action in parser._actions for option in action.option_strings}


def _mentions(text, flag):
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def test_cli_md_mentions_every_subcommand_and_flag():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = _subcommands(parser)
    assert {"show", "generate", "solve", "sgd", "study", "list"} <= set(commands)
    missing = [flag for flag in _flags(parser) if not _mentions(text, flag)]
    for name, sub in commands.items():
        if not re.search(rf"hierarchy {re.escape(name)}\b", text):
            missing.append(f"hierarchy {name}")
        if f"## `hierarchy {name}" not in text:
            missing.append(f"section for {name}")
        missing += [f"{name} {flag}" for flag in _flags(sub) if not _mentions(text, flag)]
        for action in sub._actions:
            if not action.option_strings and action.metavar and action.metavar not in text:
                missing.append(f"{name} {action.metavar}")
            for choice in action.choices or ():
                if f"`{choice}`" not in text:
                    missing.append(f"{name} {action.option_strings} {choice}")
    assert not missing, f"docs/cli.md does not mention: {missing}"


def test_cli_flag_check_catches_an_undocumented_flag():
    parser = build_parser()
    _subcommands(parser)["solve"].add_argument("--brand-new-flag")
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert not _mentions(text, "--brand-new-flag")
    assert not _mentions("--out-of-range", "--out")  # a longer flag is not a mention
    assert _mentions("`--out DIR`", "--out")


# ---------------------------------------------------------------------------------------
# Links stay inside the repository


def _doc_files():
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _prose(text):
    """Markdown without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def _links(text):
    prose = _prose(text)
    found = INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose) + HTML_LINK.findall(prose)
    return [link for link in found if not EXTERNAL.match(link)]


def _anchors(text):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose_keep_code(text), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.replace("`", "").strip().lower()).replace(" ", "-")
            for h in headings}


def _prose_keep_code(text):
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def link_problems(path, text):
    """Relative links of a markdown file that are broken or leave the repository."""
    problems = []
    for link in _links(text):
        target, _, anchor = link.partition("#")
        target = target.split("?", 1)[0]
        if "shared/spec" in target or target.startswith("../shared"):
            problems.append(f"{link}: points to the shared spec, not in a clone")
            continue
        if not target:
            resolved = path
        elif target.startswith("/"):
            resolved = (ROOT / target.lstrip("/")).resolve()
        else:
            resolved = (path.parent / target).resolve()
        if ROOT != resolved and ROOT not in resolved.parents:
            problems.append(f"{link}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{link}: no such file")
        elif anchor and resolved.suffix == ".md":
            linked = text if resolved == path else resolved.read_text(encoding="utf-8")
            if anchor not in _anchors(linked):
                problems.append(f"{link}: no such heading")
    return problems


@pytest.mark.parametrize("path", _doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_in_the_repo(path):
    problems = link_problems(path, path.read_text(encoding="utf-8"))
    assert not problems, f"{path.relative_to(ROOT)}: {problems}"


def test_link_check_catches_broken_outside_and_shared_links():
    text = ("# Top heading\n[a](../shared/spec/MATH.md) [b](../../etc/passwd) [c](docs/nope.md) "
            "![d](tools/figures/missing.png)\n[e]: ../outside.md\n"
            "[f](docs/math.md#no-such-section) [g](#missing)\n"
            "[ok](docs/math.md#1-notation) [web](https://example.org) [top](#top-heading) "
            "`[code](not/a/link.md)`\n```\n[fenced](not/a/link.md)\n```\n")
    problems = link_problems(ROOT / "README.md", text)
    assert len(problems) == 7, problems
    assert any("shared" in p for p in problems)
    assert sum("outside" in p for p in problems) == 2
    assert sum("no such heading" in p for p in problems) == 2


def test_docs_do_not_send_readers_to_the_shared_spec():
    for path in DOCS.glob("*.md"):
        text = path.read_text(encoding="utf-8")
        assert not _names_a_spec_outside_the_repo(text), path.name


def test_docs_index_and_math_exist_and_cover_the_topics():
    assert (DOCS / "README.md").is_file()
    math = (DOCS / "math.md").read_text(encoding="utf-8")
    for needle in ("Σ_c κ_c", "Price", "Riccati", "(343)", "(11)", "(32)", "(13)", "radius",
                   "T^bias", "T^diff", "Γ", "β", "a⁽ʳ⁾", "`A_kl`, `B_kl`", "τ = nα/d", "t = 4nα/d"):
        assert needle in math, needle


# ---------------------------------------------------------------------------------------
# hierarchy --help says where the examples and the docs are


def test_help_mentions_docs_and_example_configs(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "docs/" in out and "tools/configs/" in out
    for folder in ("docs", "tools/configs"):
        assert (ROOT / folder).is_dir()


def test_help_of_the_real_entry_point_mentions_docs():
    proc = subprocess.run([sys.executable, "-m", "hierarchy", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0
    assert "docs/" in proc.stdout and "tools/configs/" in proc.stdout


def _names_a_spec_outside_the_repo(text):
    return re.search(r"\.\./shared|shared/spec|(?<![\w/])(?:MATH|INTERFACE|SUMMARY_MODELS)\.md",
                     text) is not None


def test_spec_reference_check_catches_the_shared_spec():
    assert _names_a_spec_outside_the_repo("the maths is in `../shared/spec/MATH.md`")
    assert _names_a_spec_outside_the_repo("(MATH.md §2)")
    assert _names_a_spec_outside_the_repo("its contract is the project's `SUMMARY_MODELS.md`")
    assert not _names_a_spec_outside_the_repo("the maths is in [docs/math.md](docs/math.md)")


def test_readme_names_no_spec_outside_the_repo():
    assert not _names_a_spec_outside_the_repo((ROOT / "README.md").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------
# Issue 24, item 7: docs that were wrong


def _text_files():
    """Every source, doc and config file of the repository a reader or --help shows."""
    found = [ROOT / "README.md", *DOCS.glob("*.md")]
    for folder in ("hierarchy", "tools"):
        for pattern in ("*.py", "*.pyx", "*.toml"):
            found += (ROOT / folder).rglob(pattern)
    return sorted(found)


def test_no_file_of_the_repo_cites_a_spec_outside_it():
    offenders = [str(path.relative_to(ROOT)) for path in _text_files()
                 if _names_a_spec_outside_the_repo(path.read_text(encoding="utf-8"))]
    assert not offenders, offenders


def test_the_console_and_docs_cite_no_outside_contract():
    """"within the contract's <= -0.5" cited a file not in the repository."""
    from hierarchy.study import dimension_report
    source = pathlib.Path(dimension_report.__file__).read_text(encoding="utf-8")
    assert "contract's" not in source
    for path in (ROOT / "README.md", DOCS / "spectra.md", DOCS / "cli.md"):
        assert "the contract's" not in path.read_text(encoding="utf-8"), path.name


def test_cli_md_counts_its_subcommands_and_lists_every_one_in_its_summary():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    commands = _subcommands(build_parser())
    words = {5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
    assert f"has {words[len(commands)]} subcommands" in text
    summary = re.search(r"^```\nhierarchy \[--version\].*?^```", text, re.MULTILINE | re.DOTALL)
    assert summary is not None
    for name in commands:
        assert f"hierarchy {name}" in summary.group(0), name
    assert "hierarchy show     --config CONFIG.toml" in summary.group(0)


def test_cli_md_fixed_points_section_names_every_family_that_has_them():
    from hierarchy.core import registry
    from hierarchy.models.base import ModelFamily
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    section = text.split("## `hierarchy fixed-points")[1].split("\n## ")[0]
    with_points = [name for name in registry.family_names() if name != "network"  # in progress
                   and type(registry.family(name)).fixed_points is not ModelFamily.fixed_points]
    assert with_points and all(f"`{name}`" in section for name in with_points), with_points


def test_every_command_in_the_docs_names_a_config_that_ships():
    configs = set()
    for path in _doc_files():
        configs |= set(re.findall(r"hierarchy \w[\w-]* (?:--config )?(\S+\.toml)",
                                  path.read_text(encoding="utf-8")))
    missing = [config for config in configs
               if "/" in config and not (ROOT / config).is_file()]
    bare = [config for config in configs if "/" not in config
            and config.strip("[]") != "CONFIG.toml"]
    assert not missing and not bare, (missing, bare)
    assert (ROOT / "tools" / "configs" / "pca_study.toml").is_file()


def test_the_shipped_pca_study_config_is_a_valid_dimension_study():
    from hierarchy.cli.commands import study_config
    config = study_config(str(ROOT / "tools" / "configs" / "pca_study.toml"))
    assert config["model"]["family"] == "spiked-pca" and len(config["study"]["dimensions"]) >= 2


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    pages = {path.name for path in DOCS.glob("*.md")} - {"README.md"}
    assert pages and all(f"]({page})" in index for page in pages), pages


def test_figure1_help_cites_the_repos_math():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "figure1.py"), "--help"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0
    assert "docs/math.md" in proc.stdout and "MATH.md" not in proc.stdout.replace("math.md", "")


def test_an_unknown_family_lists_every_registered_family(tmp_path, capsys):
    from hierarchy.core import registry
    config = tmp_path / "bad.toml"
    config.write_text('[model]\nfamily = "no-such-family"\n')
    assert main(["solve", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "model.family" in err
    allowed = err.split("allowed:")[1]
    assert [name.strip() for name in allowed.split("|")] == list(registry.family_names())


@pytest.mark.parametrize("name", sorted(_subcommands(build_parser())))
def test_every_subcommand_help_says_what_it_does_writes_and_exits_with(name, capsys):
    from hierarchy.cli import parser as cli_parser
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    description, _, statuses = cli_parser.DESCRIPTIONS[name]
    assert " ".join(description.split()) in " ".join(out.split())
    assert "writes:" in out and "exit status:" in out
    for status in statuses:
        assert re.search(rf"^  {status}\s+\S", out, re.MULTILINE), (name, status)
    assert set(cli_parser.DESCRIPTIONS) == set(cli_parser.SUBCOMMANDS)


def test_solve_help_mentions_exit_3():
    from hierarchy.cli import parser as cli_parser
    assert 3 in cli_parser.DESCRIPTIONS["solve"][2]


# ---------------------------------------------------------------------------------------
# tools/readme_numbers.py: the README's timing claims, re-measured


def _readme_numbers():
    import importlib.util
    spec = importlib.util.spec_from_file_location("readme_numbers",
                                                  ROOT / "tools" / "readme_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_numbers_runs_a_claim_and_prints_it_beside_the_readme():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_numbers.py"), "--only",
                           "pca-solve"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    claim = next(c for c in _readme_numbers().CLAIMS if c.name == "pca-solve")
    assert f"README: {claim.readme}" in proc.stdout
    wall = float(re.search(r"wall \(s\)\s+([0-9.]+)", proc.stdout).group(1))
    assert 0 < wall < 300 and "exit status" not in proc.stdout


def test_readme_numbers_reads_the_benchmarks_own_lines():
    """Each pattern matches the line its script prints (formats copied from the scripts)."""
    claims = {c.name: c for c in _readme_numbers().CLAIMS}
    lines = {
        "bench-gmm": ("binary SGD 200 runs N=250 T=100:  43.48 s (budget 60 s); one run at a time "
                      "(scaled from 2)  242.8 s, ratio   5.6\n"
                      "XOR ODE K=4 lambda=inf    T=150:   7.67 s (budget 10 s, ratio 0.77)\n"
                      "XOR ODE K=4 lambda=1000   T=150:  11.46 s (budget 10 s, ratio 1.15)\n"
                      "field binary lambda=inf   1000 states: ... ratio 321.0\n"),
        "bench-spectra": ("Lanczos snapshot    8.27 s (0.41 s per block)\n"
                          "dense (form + eigh)   58.65 s (2.93 s per block)\n"
                          "ratio dense / Lanczos   7.09; max relative eigenvalue difference 1e-9\n"
                          "per-block eigsh: 4.14 s per block (20 blocks timed), 82.8 s per "
                          "snapshot scaled\n"),
        "figure-spectra-kgmm-quick": "figure_spectra_kgmm (quick mode) took 37.8 s (after "
                                     "imports; 17.5 s CPU)\n",
        "bench-network": (
            "field K = M = 8 (80 statistics): compiled 0.433 ms, numpy closed forms 7.218 ms, "
            "ratio 16.7\n"
            "SGD K = M = 2, N = 500: ensemble of 64 runs 24,842 samples/s, per-run numpy loop "
            "3,298 samples/s, ratio 7.5\n"
            "tanh/tanh K = M = 1 mse: field call new 1.5 ms (compiled, stated error 2.0e-13), "
            "old 2.3 ms (stated error 3.3e-06), ratio old/new 1.51; largest difference 2.6e-06\n"
            "  the engine's uniform rules over the whole cube: 3.1 ms, ratio uniform/new 2.08; "
            "largest difference 1.1e-16\n"
            "  the engine at a steep state (Q_kk up to 8.5): split at the turns 9.0 ms, stated "
            "error 5.1e-14; the trapezoid alone 7.8 ms, stated error 2.8e-08; ratio "
            "trapezoid/split 0.86; largest difference 7.1e-13\n"
            "  solve to alpha = 300 (eta = 1): 4.7 s wall, 5.0 s CPU (the whole command, fresh "
            "process), t reached 300, status 0, certified True, nfev 420\n"
            "tanh/tanh K = M = 3 mse: field call new 303.8 ms (compiled, stated error 1.1e-13), "
            "old 96.1 ms (stated error 1.3e-03), ratio old/new 0.32; largest difference 9.2e-04\n"
            "  the engine's uniform rules over the whole cube: 1725.6 ms, ratio uniform/new "
            "5.68; largest difference 6.7e-16\n"
            "  the engine at a steep state (Q_kk up to 8.5): split at the turns 2184.5 ms, "
            "stated error 3.9e-13; the trapezoid alone 1626.0 ms, stated error 1.8e-07; ratio "
            "trapezoid/split 0.74; largest difference 1.1e-10\n"
            "  the engine without the mirror z -> -z (every node of an even row): 131.8 ms, "
            "ratio without/with 1.65; largest difference 8.9e-16\n"
            "  the same engine on one thread: 298.2 ms, ratio one/2 threads 1.72\n"
            "relu/erf K = M = 2 mse: field call new 4.7 ms (compiled, stated error 1.1e-11), "
            "old 870.5 ms (stated error 4.4e-04), ratio old/new 184.66; largest difference "
            "5.1e-05\n"
            "  the engine's uniform rules over the whole cube: 6.1 ms, ratio uniform/new 1.29; "
            "largest difference 0.0e+00\n"
            "  solve to alpha = 300 (eta = 0.5): 5.7 s wall, 5.9 s CPU (the whole command, fresh "
            "process), t reached 300, status 0, certified True, nfev 488; coarse re-solve "
            "moved the states by 1.2e-09\n"
            "relu/erf K = M = 3 mse: field call new 5.6 ms (compiled, stated error 1.1e-11), "
            "old 612.2 ms (stated error 9.0e-04), ratio old/new 109.55; largest difference "
            "4.4e-04\n"
            "  the engine's uniform rules over the whole cube: 9.3 ms, ratio uniform/new 1.67; "
            "largest difference 0.0e+00\n"
            "  the same engine on one thread: 8.0 ms, ratio one/2 threads 0.83\n"
            "  solve to alpha = 300 (eta = 0.5): 9.5 s wall, 9.6 s CPU (the whole command, fresh "
            "process), t reached 300, status 0, certified True, nfev 645; coarse re-solve "
            "moved the states by 1.4e-09\n"
            "erf/erf K = M = 2 logistic: field call new 119.3 ms (joint (compiled adaptive), "
            "stated error 1.6e-13), old 7.5 ms (stated error 9.2e-05), ratio old/new 0.06; "
            "largest difference 2.1e-04\n"
            "  the engine without the mirror z -> -z (every node of an even row): 231.0 ms, "
            "ratio without/with 1.94; largest difference 1.4e-17\n"
            "  the same engine on one thread: 116.7 ms, ratio one/2 threads 1.78\n"
            "  solve to alpha = 300 (eta = 1): 85.4 s wall, 162.8 s CPU (the whole command, "
            "fresh process), t reached 300, status 0, certified False, nfev 313\n"),
        "bench-engine-turns": (
            "tanh K = M = 3 field, target 1e-10, one thread:\n"
            "  Q_kk up to 2.93: split at the turns 2.44 s (stated error 3.0e-11), the trapezoid "
            "alone 3.41 s (stated error 2.1e-11); ratio trapezoid/split 1.39; largest "
            "difference 1.3e-13\n"
            "  Q_kk up to 9.82: split at the turns 3.31 s (stated error 2.4e-11), the trapezoid "
            "alone 2.63 s (stated error 5.5e-07); ratio trapezoid/split 0.79; largest "
            "difference 2.2e-10\n"
            "the rows of tools/engine_honesty.py (1500 draws x 3 targets):\n"
            "  the trapezoid alone: 4 of 4500 stated errors below the true one (largest ratio "
            "2.02), 36.3 s\n"
            "  GAUSS_TURN_WIDTH 0.7: 0 of 4500 stated errors below the true one (largest ratio "
            "0.00), 25.4 s\n"),
        "network-xor-preset": (
            "field: joint (compiled adaptive); largest quadrature error of the field 1.67e-08, "
            "of eg 2.51e-08; the solve with a 100x tighter quadrature moved the states by "
            "7.33e-06, eg by 1.12e-06; with every row one order lower (the rows short of their "
            "target move by their stated error) the states moved by 4.39e-05, eg by 6.19e-06 "
            "(certified at every output time against atol + rtol |u|)\n"),
    }
    expected = {"bench-gmm": ["43.48", "242.8", "5.6", "7.67", "11.46"],
                "bench-spectra": ["8.27", "58.65", "7.09", "82.8"],
                "figure-spectra-kgmm-quick": ["37.8", "17.5"],
                "bench-network": ["0.433", "7.218", "16.7", "24,842", "3,298", "7.5", "5.6",
                                  "612.2", "9.6", "9.5", "True", "1.4e-09", "303.8", "5.68", "1.72",
                                  "1.65", "2184.5", "3.9e-13", "1.8e-07", "0.74",
                                  "119.3", "1.78", "1.94", "85.4", "False",
                                  "2.0e-13", "5.0", "True", "5.9", "True", "1.2e-09"],
                "bench-engine-turns": ["3.31", "2.4e-11", "5.5e-07", "4", "0"],
                "network-xor-preset": ["1.67e-08", "4.39e-05",
                                       "certified at every output time"]}
    for name, text in lines.items():
        found = [re.search(pattern, text, re.MULTILINE).group(1)
                 for _, pattern in claims[name].patterns]
        assert found == expected[name], name
