"""Migration 3 of the PostgreSQL schema: the log's locks are locks only its roles can take
(SPEC §14.3).

The write lock and the sequencer lease were advisory locks, which any role that may
connect can take: a role with no grants at all could hold the write lock's key and stall
every `POST /records`, or the lease's and stop every signature. They are now table locks
(`LOCK TABLE ... IN EXCLUSIVE MODE`) on two tables of their own, which PostgreSQL lets
only a role with UPDATE (or DELETE, TRUNCATE) on the table take, checked before the lock
is queued for: the owner, and the service role `schema.grant_service_role` grants UPDATE.
EXCLUSIVE mode leaves ACCESS SHARE free, so `pg_dump` and readers of the tables never
wait on them. The tables have no columns: there is nothing to UPDATE, and a role without
INSERT cannot add a row (a row would change nothing anyway).

A table lock takes no transaction id and a READ COMMITTED transaction holds no snapshot
between statements, so the lease's transaction, open as long as its holder leads, holds
back no vacuum.

A service role granted before this migration (a role with INSERT on `entries`) is granted
UPDATE on both tables here, so a log upgraded in place keeps writing.

`sequencer_take_term()` (migration 2) now asks for the lease as it is here: the caller's
session must hold the EXCLUSIVE lock of `sequencer_lease`. Its `search_path` is fixed again
as migration 2 fixed it (a replaced function keeps no SET clause of the one it replaces).

Frozen: never edit it, add a migration.
"""

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
