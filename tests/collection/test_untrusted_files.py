"""Config and ``--payload`` files as they arrive: broken bytes, deep nesting, huge numbers.

Each is a usage error (exit 2, one line naming the file), never a traceback or exit 1 (which a
scheduler reads as "symptom found"). And a config picked up from the working directory is said.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.exit_codes import ExitCode

runner = CliRunner()

BAD_TOML = {
    "invalid-utf8": b"[probe]\nmodel = \"\xff\xfe\"\n",
    "deep": b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "huge-int": b"[probe]\nrequests = " + b"9" * 4400 + b"\n",
}
BAD_PAYLOAD = {
    "invalid-utf8": (b'{"model": "\xff"}', "not UTF-8"),
    "deep": (b'{"a": ' + b"[" * 450 + b"]" * 450 + b"}", "nested deeper"),
    "huge-int": (b'{"max_tokens": ' + b"9" * 4400 + b"}", "too large"),
    "lone-surrogate-is-fine-but-no-target": (b'{"model": "\\ud800"}', "nothing to"),
}


@pytest.mark.parametrize("name", BAD_TOML)
def test_a_bad_config_file_is_a_usage_error(tmp_path: Path, name: str) -> None:
    config = tmp_path / "c.toml"
    config.write_bytes(BAD_TOML[name])
    result = runner.invoke(app, ["diagnose", "--config", str(config), "--engine", "http://127.0.0.1:9"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert "error:" in result.output and str(config) in result.output.replace("\n", "")
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception


@pytest.mark.parametrize("name", BAD_PAYLOAD)
def test_a_bad_payload_file_is_a_usage_error(tmp_path: Path, name: str) -> None:
    data, message = BAD_PAYLOAD[name]
    payload = tmp_path / "p.json"
    payload.write_bytes(data)
    args = ["collect", "--payload", str(payload), "-o", str(tmp_path / "b.json")]
    if not name.startswith("lone"):
        args += ["--engine", "http://127.0.0.1:9"]
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert message in result.output, result.output
    assert not (tmp_path / "b.json").exists()  # refused before anything was sent


def test_a_config_in_the_working_directory_is_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llm-doctor.toml").write_text("[budgets]\nttft = 2.0\n")
    result = runner.invoke(app, ["analyze", str(tmp_path / "missing.json")])
    assert "using llm-doctor.toml from the working directory" in result.output, result.output
