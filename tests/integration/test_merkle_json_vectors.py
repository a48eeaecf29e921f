"""The language-neutral vectors in tests/vectors/rfc9162.json: generated from the naive
reference by tools/gen_vectors.py, checked here against the package, and kept current."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from capability_anchor import merkle
from capability_anchor.errors import VerificationError
from tests.kit import paths

ROOT = paths.ROOT
DOC = json.loads((ROOT / "tests" / "vectors" / "rfc9162.json").read_text())


def h(x: str) -> bytes:
    return bytes.fromhex(x)


def test_vector_file_is_what_the_generator_makes() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_vectors.py"), "--check"], capture_output=True
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("tree", DOC["trees"], ids=lambda t: f"{len(t['leaf_inputs'])}-leaves")
def test_valid_vectors(tree: dict[str, Any]) -> None:
    hashes = [merkle.hash_leaf(h(x)) for x in tree["leaf_inputs"]]
    assert [x.hex() for x in hashes] == tree["leaf_hashes"]
    t = merkle.TiledTree(hashes)
    for size, root in tree["roots"].items():
        assert t.root(int(size)).hex() == root
    for v in tree["inclusion"]:
        i, n = v["leaf_index"], v["tree_size"]
        assert [x.hex() for x in t.inclusion_proof(i, n)] == v["path"]
        merkle.verify_inclusion(
            hashes[i], i, n, [h(x) for x in v["path"]], h(tree["roots"][str(n)])
        )
    for v in tree["consistency"]:
        m, n = v["first"], v["second"]
        assert [x.hex() for x in t.consistency_proof(m, n)] == v["path"]
        merkle.verify_consistency(
            m, n, h(tree["roots"][str(m)]), h(tree["roots"][str(n)]), [h(x) for x in v["path"]]
        )


@pytest.mark.parametrize("v", DOC["invalid"], ids=lambda v: f"{v['kind']}-{v['mutation']}")
def test_invalid_vectors_are_rejected(v: dict[str, Any]) -> None:
    path = [bytes.fromhex(x) for x in v["path"]]
    with pytest.raises(VerificationError):
        if v["kind"] == "inclusion":
            merkle.verify_inclusion(
                h(v["leaf_hash"]), v["leaf_index"], v["tree_size"], path, h(v["root"])
            )
        else:
            merkle.verify_consistency(
                v["first"], v["second"], h(v["first_root"]), h(v["second_root"]), path
            )
