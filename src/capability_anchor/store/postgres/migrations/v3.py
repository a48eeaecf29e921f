"""Migration 3 of the PostgreSQL schema (SPEC §14.3): the write lock and the sequencer lease
are table locks only the log's roles can take (docs/explanation/store.md, "Migration
notes").

Frozen: never edit it, add a migration."""

SQL = r"""
CREATE TABLE write_lock ();
CREATE TABLE sequencer_lease ();
REVOKE ALL ON write_lock, sequencer_lease FROM PUBLIC;

CREATE OR REPLACE FUNCTION sequencer_take_term() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE taken bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'relation'
                   AND database = (SELECT oid FROM pg_database
                                    WHERE datname = current_database())
                   AND relation = 'sequencer_lease'::regclass AND pid = pg_backend_pid()
                   AND mode = 'ExclusiveLock' AND granted) THEN
        RAISE EXCEPTION 'fenced: this session does not hold the sequencer lease'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    UPDATE sequencer_term SET term = term + 1 WHERE id = 1 RETURNING term INTO taken;
    RETURN taken;
END $$;
DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION %I.sequencer_take_term() '
                              'SET search_path = pg_catalog, %I, pg_temp',
                              current_schema(), current_schema());
END $$;

DO $$
DECLARE r regrole;
BEGIN
    FOR r IN
        SELECT DISTINCT a.grantee::regrole
          FROM pg_catalog.pg_class c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid = pg_catalog.format('%I.entries', current_schema())::regclass
           AND a.privilege_type = 'INSERT'
           AND a.grantee <> c.relowner AND a.grantee <> 0
    LOOP
        EXECUTE pg_catalog.format('GRANT UPDATE ON %I.write_lock, %I.sequencer_lease TO %s',
                                  current_schema(), current_schema(), r);
    END LOOP;
END $$;
"""
