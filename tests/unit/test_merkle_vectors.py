"""Known answers: the 8-leaf reference tree used across RFC 6962/9162 implementations.

Each hash can be reproduced with a shell one-liner, e.g. the leaf hash of the empty leaf:
    printf '\\x00' | sha256sum                 -> 6e340b9c…a01d
and of leaf 0x00:
    printf '\\x00\\x00' | sha256sum            -> 96a296d2…cfc7
and an interior node from two hex hashes L and R:
    printf '\\x01'"$(printf %s "$L$R" | sed 's/../\\\\x&/g')" | sha256sum
"""

from __future__ import annotations

import hashlib

import pytest

from capability_anchor import merkle
from capability_anchor.errors import MalformedProof, RootMismatch, VerificationError

LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
HASHES = [merkle.hash_leaf(x) for x in LEAVES]

ROOTS = {
    0: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

# (leaf_index, tree_size) -> path, from the RFC 6962 reference vectors.
INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}

# (first, second) -> path, from the RFC 6962 reference vectors.
CONSISTENCY = {
    (1, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}


def test_leaf_hash_of_empty_leaf_matches_one_liner() -> None:
    assert merkle.hash_leaf(b"").hex() == hashlib.sha256(b"\x00").hexdigest() == ROOTS[1]


@pytest.mark.parametrize("size", sorted(ROOTS))
def test_roots_of_every_prefix(size: int) -> None:
    assert merkle.root_hash(HASHES[:size]).hex() == ROOTS[size]
    assert merkle.TiledTree(HASHES).root(size).hex() == ROOTS[size]


def test_issue_anchor_values() -> None:
    # The three values the kernel issue names explicitly.
    assert merkle.root_hash(HASHES).hex().startswith("5dc9da79a70659a9")
    assert merkle.root_hash(HASHES[:3]).hex().startswith("aeb6bcfe274b70a1")
    assert merkle.root_hash([]) == merkle.EMPTY_ROOT == hashlib.sha256(b"").digest()


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION))
def test_inclusion_vectors(index: int, size: int) -> None:
    path = merkle.inclusion_path(HASHES, index, size)
    assert [p.hex() for p in path] == INCLUSION[(index, size)]
    root = bytes.fromhex(ROOTS[size])
    merkle.verify_inclusion(HASHES[index], index, size, path, root)


@pytest.mark.parametrize(("first", "second"), sorted(CONSISTENCY))
def test_consistency_vectors(first: int, second: int) -> None:
    path = merkle.consistency_path(HASHES, first, second)
    assert [p.hex() for p in path] == CONSISTENCY[(first, second)]
    merkle.verify_consistency(
        first, second, bytes.fromhex(ROOTS[first]), bytes.fromhex(ROOTS[second]), path
    )


def test_single_leaf_tree_has_empty_path() -> None:
    assert merkle.inclusion_path(HASHES, 0, 1) == []
    merkle.verify_inclusion(HASHES[0], 0, 1, [], HASHES[0])


def test_equal_sizes_need_empty_path_and_equal_roots() -> None:
    root = bytes.fromhex(ROOTS[5])
    merkle.verify_consistency(5, 5, root, root, [])
    assert merkle.consistency_path(HASHES, 5, 5) == []
    with pytest.raises(MalformedProof):
        merkle.verify_consistency(5, 5, root, root, [root])
    with pytest.raises(RootMismatch):
        merkle.verify_consistency(5, 5, root, bytes.fromhex(ROOTS[6]), [])


@pytest.mark.parametrize(("first", "second"), [(0, 0), (0, 5), (6, 5), (-1, 3)])
def test_consistency_rejects_bad_sizes(first: int, second: int) -> None:
    root = bytes.fromhex(ROOTS[5])
    with pytest.raises(MalformedProof, match="0 < first <= second"):
        merkle.verify_consistency(first, second, root, root, [])


def test_root_mismatch_names_both_roots() -> None:
    path = merkle.inclusion_path(HASHES, 2, 8)
    wrong = bytes(32)
    with pytest.raises(RootMismatch) as info:
        merkle.verify_inclusion(HASHES[2], 2, 8, path, wrong)
    assert info.value.expected == wrong
    assert info.value.calculated.hex() == ROOTS[8]
    assert ROOTS[8] in str(info.value) and wrong.hex() in str(info.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((HASHES[0], 8, 8), "outside a tree of size 8"),
        ((HASHES[0], -1, 8), "outside a tree of size 8"),
        ((HASHES[0], 0, 0), "outside a tree of size 0"),
        ((HASHES[0][:31], 0, 8), "leaf hash must be 32 bytes"),
        ((HASHES[0] + b"\x00", 0, 8), "leaf hash must be 32 bytes"),
        ((HASHES[0], True, 8), "leaf index must be an integer"),
    ],
)
def test_inclusion_preconditions(args: tuple[bytes, int, int], message: str) -> None:
    path = merkle.inclusion_path(HASHES, 0, 8)
    with pytest.raises(MalformedProof, match=message):
        merkle.verify_inclusion(*args, path, bytes.fromhex(ROOTS[8]))


def test_preconditions_are_checked_before_hashing_in_order() -> None:
    # Index out of range wins over a short hash and a wrong-length path.
    with pytest.raises(MalformedProof, match="outside"):
        merkle.verify_inclusion(b"x", 9, 8, [b"y"], b"z")
    with pytest.raises(MalformedProof, match="path has 1 hashes, a valid proof"):
        merkle.verify_inclusion(HASHES[0], 0, 8, [HASHES[1]], bytes(32))
    with pytest.raises(MalformedProof, match=r"inclusion path\[1\] must be 32 bytes"):
        merkle.verify_inclusion(HASHES[0], 0, 8, [HASHES[1], b"short", HASHES[2]], bytes(32))


def test_all_verification_errors_share_one_base() -> None:
    assert issubclass(MalformedProof, VerificationError)
    assert issubclass(RootMismatch, VerificationError)
