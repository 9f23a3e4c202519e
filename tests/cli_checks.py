"""Helpers of the input tests: the command run in this process, the one-line refusal, and a
fixture that fails any attention work started before the input was checked."""

import pytest

from hierarchy.cli import main as cli


def run_cli(capsys, *argv):
    """``hierarchy ARGV`` in this process: (exit status, stderr)."""
    status = cli.main([str(a) for a in argv])
    return status, capsys.readouterr().err


def assert_one_line(status, err, *words):
    """Exit status 2, one line on stderr, no traceback, and every one of ``words`` in it."""
    assert status == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err


def write_config(tmp_path, text, name="run.toml"):
    """``text`` written as a config file in ``tmp_path``; its path."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def no_work(monkeypatch):
    """Make any attention solve/sgd/study compute fail the test: bad input must stop before
    it (import it into a test module to use it)."""
    def forbidden(*args, **kwargs):
        raise AssertionError("expensive work started before the input was checked")

    import hierarchy.models.attention.solve_job
    import hierarchy.sgd.job
    import hierarchy.study.run
    monkeypatch.setattr(hierarchy.models.attention.solve_job, "run_solve", forbidden)
    monkeypatch.setattr(hierarchy.sgd.job, "run_sgd", forbidden)
    monkeypatch.setattr(hierarchy.study.run, "run_study", forbidden)
