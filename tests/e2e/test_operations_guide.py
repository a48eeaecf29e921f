"""The operations guide (docs/how-to/operate.md, issue #21 item 7; docs/operations.md before
issue #22) and what ships beside it in docs/: the
systemd unit passes `systemd-analyze verify` (the real tool, when the machine has it), every
environment variable the code reads is in the guide's table, generated from the one list,
and README links the guide near its top."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capability_anchor import envvars
from tests.kit import paths

ROOT = paths.ROOT
DOCS = ROOT / "docs"
GUIDE = DOCS / "how-to" / "operate.md"
UNIT = DOCS / "capability-anchor.service"
INSTALLED = "/opt/capability-anchor/venv"  # the unit's venv; this test's own stands in


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    text = UNIT.read_text()
    assert f"{INSTALLED}/bin/uvicorn capability_anchor.api.asgi:app" in text
    # verify checks that ExecStart's program exists: point it at this venv's uvicorn.
    unit = tmp_path / "capability-anchor.service"
    unit.write_text(text.replace(INSTALLED, sys.prefix))
    done = subprocess.run(
        [tool, "verify", str(unit)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "" and done.stderr.strip() == "", done.stdout + done.stderr


def test_every_environment_variable_is_in_the_guide() -> None:
    guide = GUIDE.read_text()
    for var in envvars.VARIABLES:
        assert f"| `{var.name}` |" in guide, var.name


def test_the_guide_table_is_the_one_generated_from_the_list() -> None:
    spec = importlib.util.spec_from_file_location("env_table", ROOT / "tools" / "env_table.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    guide = GUIDE.read_text()
    assert tool.with_table(guide, envvars.markdown_table()) == guide, (
        "run: .venv/bin/python tools/env_table.py"
    )


def test_the_guide_covers_what_the_issue_asks() -> None:
    guide = GUIDE.read_text()
    for heading in (
        "## Deploying",
        "### The service under systemd",
        "### Behind a TLS reverse proxy",
        "## Environment variables",
        "## Backup and restore",
        "### What a backup cannot hold",
        "## Rotation with witnesses",
        "## Upgrading",
        "## Metrics and alerts",
        "## The recovery procedure",
    ):
        assert f"\n{heading}\n" in guide, heading
    for named in (
        "capability-anchor backup",
        "--workers",
        "rotate-key --activate",
        "rotate-key --compromised",
        "witness update-log",
        "recover --from",
        "--metrics-token",
        "/metrics",
        "acknowledged **before it began**",
    ):
        assert named in guide, named
    for link in ("capability-anchor.service", "nginx-capability-anchor.conf", "alerts.yml"):
        assert f"](../{link})" in guide, link
        if link != "alerts.yml":  # docs/alerts.yml is i21-metrics' file
            assert (DOCS / link).exists(), link


def test_the_readme_links_the_guide_on_its_first_screen() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "](docs/how-to/operate.md)" in first_screen


def test_deploy_and_upgrade_install_from_a_checkout_not_the_package_index() -> None:
    """Issue #35: `pip install capability-anchor` named a package the index does not have.
    Every install in the guide and the unit is of a checkout (or a wheel built from one)."""
    for page in (GUIDE, UNIT):
        text = page.read_text()
        installs = re.findall(r"venv/bin/pip install[^\n]*", text)
        assert installs, page
        for line in installs:
            assert re.search(r"/opt/capability-anchor/src\b|\.whl\b", line), (page.name, line)
    guide = GUIDE.read_text()
    assert "not on the Python package index" in guide
    assert "python3 -m pip wheel --no-deps -w dist ." in guide
    upgrading = guide.split("\n## Upgrading\n", 1)[1].split("\n## ", 1)[0]
    assert "--force-reinstall --no-deps /opt/capability-anchor/src" in upgrading


def test_the_replica_docs_copy_the_new_key_file_to_every_replica_before_activate() -> None:
    """Issue #35: after `rotate-key --activate` on one replica the others lacked the key."""
    rotate = (DOCS / "how-to" / "rotate-keys.md").read_text()
    section = rotate.split("\n## With replicas (PostgreSQL)\n", 1)[1]
    copy, activate = section.index("signing-key.jwk.new"), section.index("--activate")
    assert "every other replica before `--activate`" in section and copy < activate
    postgresql = (DOCS / "how-to" / "postgresql.md").read_text()
    assert "to every replica **before** `rotate-key\n   --activate`" in postgresql
    assert "rotate-keys.md#with-replicas-postgresql" in postgresql
    assert (
        "rotate-keys.md#with-replicas-postgresql"
        in (DOCS / "explanation" / "replicas.md").read_text()
    )
