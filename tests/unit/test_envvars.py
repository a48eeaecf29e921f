"""Every environment variable the code reads is in one list (`envvars.VARIABLES`) and in
the reference's table generated from it (docs/reference/environment.md); the two never
drift, and no variable is read elsewhere."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from capability_anchor import envvars
from capability_anchor.api.settings import Settings
from tests.kit import paths

ROOT = paths.ROOT
SRC = ROOT / "src" / "capability_anchor"
NAMES = {v.name for v in envvars.VARIABLES}


def _tool() -> object:
    spec = importlib.util.spec_from_file_location("env_table", ROOT / "tools" / "env_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_table_is_the_one_generated_from_the_list() -> None:
    tool = _tool()
    readme = (ROOT / "docs" / "reference" / "environment.md").read_text()
    regenerated = tool.with_table(readme, envvars.markdown_table())  # type: ignore[attr-defined]
    assert regenerated == readme, "run: .venv/bin/python tools/env_table.py"
    for name in NAMES:
        assert f"| `{name}` |" in readme


def test_every_variable_named_in_the_sources_is_in_the_list() -> None:
    named = set()
    for path in SRC.rglob("*.py"):
        named |= set(re.findall(r"\bCAPABILITY_ANCHOR_[A-Z_]*[A-Z]\b", path.read_text()))
    assert named, "the search finds nothing: the pattern is wrong"
    assert named <= NAMES, f"read but not listed: {sorted(named - NAMES)}"
    # The four issue #20 found undocumented among them.
    for short in ("RATE_LIMIT", "PUBLIC_URL", "CHECKPOINT_INTERVAL", "RECORD_LIFETIME"):
        assert f"CAPABILITY_ANCHOR_{short}" in NAMES


def test_no_module_reads_the_environment_but_the_list() -> None:
    readers = re.compile(r"os\.environ|os\.getenv|getenv\(|environ\.get\(|environ\[")
    found = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name != "envvars.py" and readers.search(p.read_text())
    ]
    assert found == []


def test_the_asgi_form_reads_the_variables_the_table_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    values = {
        envvars.DATA: str(tmp_path),
        envvars.PUBLIC_URL: "https://anchor.example",
        envvars.CHECKPOINT_INTERVAL: "5",
        envvars.RECORD_LIFETIME: "3600",
        envvars.RATE_LIMIT: "7",
        envvars.BODY_TIMEOUT: "3",
        envvars.HEADER_TIMEOUT: "4",
        envvars.BODY_WORKERS: "0",
        envvars.TSA: "https://a.example/tsa https://b.example/tsa",
        envvars.TSA_CA: "a.pem b.pem",
        envvars.TSA_DEADLINE: "2",
        envvars.WITNESS_DEADLINE: "6",
    }
    for var, value in values.items():
        monkeypatch.setenv(var.name, value)
    settings = Settings.from_env()
    assert settings.data_dir == tmp_path
    assert settings.public_url == "https://anchor.example"
    assert (settings.checkpoint_interval, settings.record_lifetime) == (5.0, 3600)
    assert (settings.rate_limit, settings.body_timeout, settings.header_timeout) == (7, 3.0, 4.0)
    assert settings.body_workers == 0
    assert settings.tsa == ("https://a.example/tsa", "https://b.example/tsa")
    assert settings.tsa_ca == (Path("a.pem"), Path("b.pem"))
    assert (settings.tsa_deadline, settings.witness_deadline) == (2.0, 6.0)
    for var in values:
        monkeypatch.delenv(var.name)
    defaults = Settings.from_env()
    assert defaults == Settings(data_dir=Path("data"))
