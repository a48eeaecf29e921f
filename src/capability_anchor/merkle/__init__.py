"""RFC 9162 Merkle trees, pure: hashing, which nodes a proof needs (`nodes`), their hashes from a
`NodeSource` (`TiledTree` in memory, `TileNodes` over stored tiles), and proof verification that
trusts only the root it is given. The kernel's base: imports only `errors` and `strictjson`."""

from .edge import TreeEdge, partial_counts
from .hashing import EMPTY_ROOT, HASH_SIZE, hash_leaf
from .nodes import (
    consistency_nodes,
    consistency_path_length,
    inclusion_nodes,
    inclusion_path_length,
    root_from,
)
from .tiles import (
    TILE_HEIGHT,
    TILE_WIDTH,
    TileCache,
    TileID,
    TileNodes,
    tile_path,
    tiles_changed,
)
from .tree import TiledTree, consistency_path, inclusion_path, root_hash
from .verify import calculate_inclusion_root, verify_consistency, verify_inclusion

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "TileCache",
    "TileID",
    "TileNodes",
    "TiledTree",
    "TreeEdge",
    "calculate_inclusion_root",
    "consistency_nodes",
    "consistency_path",
    "consistency_path_length",
    "hash_leaf",
    "inclusion_nodes",
    "inclusion_path",
    "inclusion_path_length",
    "partial_counts",
    "root_from",
    "root_hash",
    "tile_path",
    "tiles_changed",
    "verify_consistency",
    "verify_inclusion",
]
