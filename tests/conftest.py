"""Every test gets the marker of its tier, from its folder (`-m unit`, `-m "not e2e"`...), and
the RFC 3161 test TSA's fixtures (tsakit) and the session's PostgreSQL (pgkit) without an
import in each module. Hypothesis runs the profile HYPOTHESIS_PROFILE names: `ci` (the
default, and `tools/dev.py test`) or `dev` (`--fast`); see tests/kit/hypo.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tests.kit import hypo
from tests.kit.pgkit import postgres  # noqa: F401
from tests.kit.tsakit import (  # noqa: F401
    other_pki_ec,
    other_pki_rsa,
    pki_ec,
    pki_rsa,
    tsa_ec,
    tsa_rsa,
)

TIERS = ("unit", "integration", "e2e")
# The store's contract suite keeps its own folder (every engine runs it); its tier:
FOLDER_TIER = {"store_contract": "integration"}
HERE = Path(__file__).resolve().parent
settings.load_profile(hypo.PROFILE)


def tier_of(path: Path) -> str:
    """The tier folder a test file sits in; a test anywhere else is a layout error, not a
    test that silently runs in no lane."""
    parts = path.resolve().relative_to(HERE).parts
    tier = FOLDER_TIER.get(parts[0], parts[0]) if len(parts) > 1 else ""
    if tier not in TIERS:
        raise pytest.UsageError(f"{path}: a test belongs in tests/unit, integration or e2e")
    return tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item.path)))
