"""A clean checkout stays clean: what the README's commands leave behind is ignored by git,
and the package metadata is the form setuptools no longer warns about (an SPDX license)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib

import pytest

from tests.kit import paths

ROOT = paths.ROOT


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize(
    "left_behind",
    ["data/", "data/log.sqlite3", "public/", "public/keys.json", "record.json", "mon/"],
)
def test_what_the_readme_commands_leave_behind_is_ignored(left_behind: str) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", left_behind], cwd=ROOT, check=False
    )
    assert result.returncode == 0, f"{left_behind} is not in .gitignore"


def test_the_license_is_an_spdx_string_setuptools_does_not_warn_about() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # A `{text = ...}` table is deprecated from setuptools 77 on (a warning at every install).
    assert meta["project"]["license"] == "MIT"
    assert meta["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "setuptools>=77" in meta["build-system"]["requires"]
