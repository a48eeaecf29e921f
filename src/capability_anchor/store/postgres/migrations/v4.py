"""Migration 4 of the PostgreSQL schema (#37): `entries_leaf_insert_rules`, the per-row probe
that gives SQL run by hand SQLite's words for a leaf already in its day, is skipped in a
transaction that set `capability_anchor.leaf_probe` to `off` (the store's writes, which
dedupe first and map the unique index's violation to the same words). The unique index
`entries_by_hash` still decides (docs/explanation/decisions/37-lockhold.md).

Frozen: never edit it, add a migration."""

SQL = r"""
DROP TRIGGER entries_leaf_insert_rules ON entries;
CREATE TRIGGER entries_leaf_insert_rules BEFORE INSERT ON entries FOR EACH ROW
    WHEN (pg_catalog.current_setting('capability_anchor.leaf_probe', true)
          IS DISTINCT FROM 'off')
    EXECUTE FUNCTION entries_leaf_insert_rules();
"""
