"""The command line's conventions (issue: a newcomer's path): ``--version``, ``-v`` before or after the command, help
for every argument, a description and the one exit-code table under every command's ``--help``, ``report`` taking
its config as ``--config`` like every command that only reads a data root, and shell completion."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from flows import exit_codes
from flows.cli import build_parser, main


def _commands() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"polysent {version('polysent')}"


@pytest.mark.parametrize("name", sorted(set(_commands()) - {"experiment"}))
def test_every_command_has_a_description_help_for_every_argument_and_the_exit_codes(name: str) -> None:
    sp = _commands()[name]
    assert sp.description and len(sp.description) > 20
    missing = [a.option_strings or a.dest for a in sp._actions if not a.help]
    assert not missing, f"{name}: arguments without help: {missing}"
    text = sp.format_help()
    assert exit_codes.TABLE in text and "-v, --verbose" in text
    assert "``" not in text and "pipelines." not in text and "models." not in text  # no docstring markup or modules


def test_verbose_is_accepted_before_and_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    config = str(REPO / "configs" / "default.yaml")
    for argv in (["-v", "validate", config], ["validate", config, "-v"], ["validate", "-v", config]):
        assert main(argv) == exit_codes.OK, capsys.readouterr().err
        assert logging.getLogger("polysent").level == logging.DEBUG
    assert main(["validate", config]) == exit_codes.OK
    assert logging.getLogger("polysent").level == logging.INFO


def test_report_takes_the_config_as_an_option_and_refuses_a_positional_one(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "--compare", "a", "b", str(REPO / "configs" / "default.yaml")])
    assert exc.value.code == exit_codes.USAGE and "unrecognized arguments" in capsys.readouterr().err
    rc = main(["report", "--compare", "a", "b", "--data-root", str(tmp_path / "none")])
    assert rc == exit_codes.USAGE and "no warehouse at" in capsys.readouterr().err


def test_every_command_that_reads_a_data_root_takes_the_config_the_same_way() -> None:
    for name, sp in _commands().items():
        options = {o for a in sp._actions for o in a.option_strings}
        positionals = [a.dest for a in sp._actions if not a.option_strings]
        if "--data-root" in options and "config" not in positionals:
            assert "--config" in options, f"{name} reads a data root but takes no --config"


def test_shell_completion_completes_commands_and_options(tmp_path: Path) -> None:
    pytest.importorskip("argcomplete")
    out = tmp_path / "completions"
    for line, expected in (("polysent ru", {"run"}), ("polysent mine --mar", {"--margin"}),
                           ("polysent sql --for", {"--format"})):
        env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
               "_ARGCOMPLETE_STDOUT_FILENAME": str(out)}
        proc = subprocess.run([sys.executable, "-m", "flows.cli"], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert set(out.read_text().split()) == expected, line
