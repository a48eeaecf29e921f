"""Migration 2 of the PostgreSQL schema (issue #35): every function fixes its search_path, only
the lease holder takes a term, and a head row's document is that head's
(docs/explanation/store.md, "Migration notes").

Frozen: never edit it, add a migration."""

SQL = r"""
CREATE OR REPLACE FUNCTION id_once_insert_rules() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE taken boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I WHERE id = $1)',
                   TG_TABLE_SCHEMA, TG_TABLE_NAME)
        INTO taken USING NEW.id;
    IF taken THEN
        RAISE EXCEPTION 'append-only: a % row is stored under this id', TG_TABLE_NAME
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION sequencer_take_term() RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE taken bigint;
BEGIN
    -- The lease is the session advisory lock on key 0x63612D73 ("ca-s", lease.LEASE_KEY):
    -- a bigint key below 2^32 is classid 0, objid the key, objsubid 1.
    IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
                   AND pid = pg_backend_pid() AND classid = 0 AND objid = 1667313011
                   AND objsubid = 1 AND granted) THEN
        RAISE EXCEPTION 'fenced: this session does not hold the sequencer lease'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    UPDATE sequencer_term SET term = term + 1 WHERE id = 1 RETURNING term INTO taken;
    RETURN taken;
END $$;
REVOKE EXECUTE ON FUNCTION sequencer_take_term() FROM PUBLIC;

CREATE FUNCTION heads_signed_doc() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d jsonb;
    before_jws text;
    after_jws text;
    claims text;
    header text;
    token text;
BEGIN
    BEGIN
        d := convert_from(NEW.doc, 'UTF8')::jsonb;
    EXCEPTION WHEN data_exception THEN
        d := NULL;  -- not UTF-8, or not JSON: refused below
    END;
    IF jsonb_typeof(d) IS DISTINCT FROM 'object'
       OR jsonb_typeof(d -> 'iss') IS DISTINCT FROM 'string'
       OR jsonb_typeof(d -> 'jws') IS DISTINCT FROM 'string'
       OR NOT (jsonb_typeof(d -> 'prev') = 'null'
               OR (jsonb_typeof(d -> 'prev') = 'string' AND d ->> 'prev' ~ '^[0-9a-f]{64}$'))
    THEN
        RAISE EXCEPTION 'head document: not the JCS of this head''s claims and its JWS'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    -- JCS (RFC 8785) of the claims, members in code-unit order; to_json writes a string as
    -- JCS does (", \ and control characters escaped, these as \b \t \n \f \r or \u00xx).
    before_jws := '{"day":' || to_json(NEW.day)::text || ',"iat":' || NEW.iat::text
        || ',"iss":' || to_json(d ->> 'iss')::text;
    after_jws := ',"prev":' || (d -> 'prev')::text
        || ',"root":"' || encode(NEW.root, 'hex')
        || '","sealed":' || CASE NEW.sealed WHEN 1 THEN 'true' ELSE 'false' END
        || ',"tree_size":' || NEW.tree_size::text || ',"v":"0.2"}';
    claims := before_jws || after_jws;
    header := '{"alg":"EdDSA","kid":' || to_json(NEW.kid)::text
        || ',"typ":"capability-anchor+jws"}';
    token := d ->> 'jws';
    IF NEW.doc <> convert_to(before_jws || ',"jws":' || to_json(token)::text || after_jws, 'UTF8')
       OR split_part(token, '.', 1) <> translate(rtrim(replace(
              encode(convert_to(header, 'UTF8'), 'base64'), E'\n', ''), '='), '+/', '-_')
       OR split_part(token, '.', 2) <> translate(rtrim(replace(
              encode(convert_to(claims, 'UTF8'), 'base64'), E'\n', ''), '='), '+/', '-_')
       OR split_part(token, '.', 3) !~ '^[A-Za-z0-9_-]{86}$'
       OR split_part(token, '.', 4) <> ''
    THEN
        RAISE EXCEPTION 'head document: not the JCS of this head''s claims and its JWS'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER heads_signed_doc BEFORE INSERT ON heads
    FOR EACH ROW EXECUTE FUNCTION heads_signed_doc();

DO $$
DECLARE
    s text := current_schema();
    f regprocedure;
    r record;
BEGIN
    -- Every function of the log's schema (pg_amcheck's extension, when installed there, is
    -- not the log's), the ones above included.
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = s)
           AND NOT EXISTS (SELECT 1 FROM pg_depend d
                            WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                              AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, s);
    END LOOP;
    -- Whoever could take a term at will (the service's role, granted by an earlier
    -- grant_service_role) now takes it only as the lease holder.
    FOR r IN
        SELECT a.grantee::regrole AS role FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
         WHERE p.oid = format('%I.sequencer_next_term()', s)::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %I.sequencer_next_term() FROM %s', s, r.role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %I.sequencer_take_term() TO %s', s, r.role);
    END LOOP;
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %I.sequencer_next_term() FROM PUBLIC', s);
END $$;
"""
