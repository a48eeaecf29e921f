"""Hypothesis: random leaves and sizes; the incremental tree equals the naive one, and every
proof for m <= n verifies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from capability_anchor import merkle
from tests.kit.hypo import examples
from tests.kit.naive_rfc9162 import Naive, leaf

leaves = st.lists(st.binary(max_size=40), min_size=1, max_size=300)


@settings(max_examples=examples(150), deadline=None)
@given(leaves, st.data())
def test_incremental_tree_matches_naive(data_leaves: list[bytes], data: st.DataObject) -> None:
    hashes = [leaf(x) for x in data_leaves]
    naive = Naive(hashes)
    tree = merkle.TiledTree()
    # Grow in random batch sizes, checking the root after each batch.
    pos = 0
    while pos < len(hashes):
        step = data.draw(st.integers(1, len(hashes) - pos))
        tree.extend(hashes[pos : pos + step])
        pos += step
        assert tree.root() == naive.root(pos)
    n = data.draw(st.integers(1, len(hashes)), label="n")
    m = data.draw(st.integers(1, n), label="m")
    index = data.draw(st.integers(0, n - 1), label="index")
    assert tree.root(n) == naive.root(n) == merkle.root_hash(hashes[:n])
    path = tree.inclusion_proof(index, n)
    assert path == naive.inclusion(index, n)[0]
    merkle.verify_inclusion(hashes[index], index, n, path, naive.root(n))
    cpath = tree.consistency_proof(m, n)
    assert cpath == naive.consistency(m, n)[0]
    merkle.verify_consistency(m, n, naive.root(m), naive.root(n), cpath)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(1, 1 << 40), st.data())
def test_path_lengths_agree_with_node_plans_at_any_size(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, size - 1))
    assert len(merkle.inclusion_nodes(index, size)) == merkle.inclusion_path_length(index, size)
    first = data.draw(st.integers(1, size))
    nodes = merkle.consistency_nodes(first, size)
    if first < size:
        assert len(nodes) == merkle.consistency_path_length(first, size)
    else:
        assert nodes == []
