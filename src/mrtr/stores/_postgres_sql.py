"""The SQL of PostgresStore (_postgres.py): versioned migrations and the statements it runs."""

# Design: keys, tokens and members are bytea (a Store key may hold NUL, which text refuses).
# Every time is epoch seconds from the client's clock (double precision), as in the other
# stores: deadlines are the flow's own. Claims and outcomes live in mrtr_entries (outcome NULL:
# claimed until lease_until; not NULL: done); counters, applied tokens, slots and messages have
# tables of their own, each with an index on `expires` for the bounded sweep. Tracked leases
# are rows of mrtr_leases (index name, key, lease end, deadline) with an index on (name, until):
# `lapsed` reads the due rows of one index by it, never the entries. The operations
# that read after a conflict are plpgsql functions: one round trip, and in READ COMMITTED each
# statement of a function sees what committed before it, so the read after an
# INSERT .. ON CONFLICT (which locks the row it met) sees that row's latest version.
# Migrations are numbered; mrtr_schema holds the highest applied. `migrate` takes a
# transaction-scoped advisory lock first, so replicas starting together apply each one once.
from __future__ import annotations

from typing import Any

__all__ = [
    "migrate",
    "ADD",
    "ADMITTED",
    "COMPLETE",
    "DELIVER",
    "DISMISS",
    "GET",
    "LOCK",
    "MIGRATIONS",
    "NOTIFY",
    "PURGE",
    "RELEASE",
    "RELEASE_TRACKED",
    "RENEW",
    "RENEW_TRACKED",
    "SWEEP_SLOTS",
    "TABLES",
    "TAKE",
    "VERSION",
]

LOCK = 0x6D727472  # "mrtr": the advisory lock that serialises migrations

_V1 = """
CREATE TABLE IF NOT EXISTS mrtr_entries (
    key bytea PRIMARY KEY, outcome bytea,
    lease_until double precision NOT NULL, expires double precision NOT NULL, holder text);
CREATE INDEX IF NOT EXISTS mrtr_entries_expires ON mrtr_entries (expires);
CREATE TABLE IF NOT EXISTS mrtr_counters (
    key bytea PRIMARY KEY, value bigint NOT NULL, expires double precision NOT NULL);
CREATE INDEX IF NOT EXISTS mrtr_counters_expires ON mrtr_counters (expires);
CREATE TABLE IF NOT EXISTS mrtr_tokens (
    key bytea NOT NULL, token bytea NOT NULL, expires double precision NOT NULL,
    PRIMARY KEY (key, token));
CREATE INDEX IF NOT EXISTS mrtr_tokens_expires ON mrtr_tokens (expires);
CREATE TABLE IF NOT EXISTS mrtr_slots (
    key bytea NOT NULL, member bytea NOT NULL, weight bigint NOT NULL,
    expires double precision NOT NULL, PRIMARY KEY (key, member));
CREATE INDEX IF NOT EXISTS mrtr_slots_expires ON mrtr_slots (expires);
CREATE TABLE IF NOT EXISTS mrtr_messages (
    key bytea PRIMARY KEY, message bytea NOT NULL, expires double precision NOT NULL);
CREATE INDEX IF NOT EXISTS mrtr_messages_expires ON mrtr_messages (expires);
CREATE TABLE IF NOT EXISTS mrtr_leases (
    name bytea NOT NULL, key bytea NOT NULL, until double precision NOT NULL,
    expires double precision NOT NULL, PRIMARY KEY (name, key));
CREATE INDEX IF NOT EXISTS mrtr_leases_until ON mrtr_leases (name, until);
CREATE INDEX IF NOT EXISTS mrtr_leases_expires ON mrtr_leases (expires);

-- NULL: the caller holds the claim now; 'r': held under a live lease; 'd' || outcome: done.
-- With `ix` (not NULL), a NEW claim also joins that index of tracked leases. A claim by the
-- holder `h` (not '') that holds it is NEW again (a retried claim whose answer was lost).
CREATE OR REPLACE FUNCTION mrtr_claim(k bytea, lease double precision,
                                      exp double precision, now double precision, ix bytea,
                                      h text)
RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE found_outcome bytea;
BEGIN
  INSERT INTO mrtr_entries AS e VALUES (k, NULL, now + lease, exp, h)
  ON CONFLICT (key) DO UPDATE SET outcome = NULL, lease_until = EXCLUDED.lease_until,
      expires = EXCLUDED.expires, holder = EXCLUDED.holder
  WHERE NOT (e.expires > now AND (e.outcome IS NOT NULL OR e.lease_until > now))
     OR (h <> '' AND e.holder = h AND e.outcome IS NULL);
  IF FOUND THEN
    IF ix IS NOT NULL THEN
      INSERT INTO mrtr_leases VALUES (ix, k, now + lease, exp) ON CONFLICT (name, key)
      DO UPDATE SET until = EXCLUDED.until, expires = EXCLUDED.expires;
    END IF;
    RETURN NULL;
  END IF;
  SELECT outcome INTO found_outcome FROM mrtr_entries WHERE key = k;
  IF found_outcome IS NULL THEN RETURN '\\x72'::bytea; END IF;
  RETURN '\\x64'::bytea || found_outcome;
END $$;

CREATE OR REPLACE FUNCTION mrtr_put_if_absent(k bytea, value bytea, exp double precision,
                                              now double precision)
RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE found_outcome bytea;
BEGIN
  INSERT INTO mrtr_entries AS e VALUES (k, value, 0.0, exp)
  ON CONFLICT (key) DO UPDATE SET outcome = EXCLUDED.outcome, lease_until = 0.0,
      expires = EXCLUDED.expires
  WHERE NOT (e.expires > now AND (e.outcome IS NOT NULL OR e.lease_until > now));
  IF FOUND THEN RETURN NULL; END IF;
  SELECT outcome INTO found_outcome FROM mrtr_entries WHERE key = k;
  IF found_outcome IS NULL THEN RETURN '\\x72'::bytea; END IF;
  RETURN '\\x64'::bytea || found_outcome;
END $$;

-- The token is the idempotency record, written in the same transaction as the addition.
CREATE OR REPLACE FUNCTION mrtr_add_once(k bytea, amount bigint, t bytea,
                                         exp double precision, now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE total bigint;
BEGIN
  INSERT INTO mrtr_tokens AS o VALUES (k, t, exp)
  ON CONFLICT (key, token) DO UPDATE SET expires = EXCLUDED.expires WHERE o.expires <= now;
  IF FOUND THEN
    INSERT INTO mrtr_counters AS c VALUES (k, amount, exp)
    ON CONFLICT (key) DO UPDATE SET
        value = CASE WHEN c.expires > now THEN c.value + amount ELSE amount END,
        expires = EXCLUDED.expires
    RETURNING value INTO total;
    RETURN total;
  END IF;
  SELECT value INTO total FROM mrtr_counters WHERE key = k AND expires > now;
  RETURN coalesce(total, 0);
END $$;

-- One key's slots: a transaction-scoped advisory lock on the key serialises admits to it
-- (two new members racing could each see room otherwise); lapsed members weigh nothing.
CREATE OR REPLACE FUNCTION mrtr_admit(k bytea, m bytea, lim bigint, exp double precision,
                                      w bigint, now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE held bigint; total bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(encode(k, 'base64'), 7));
  SELECT weight INTO held FROM mrtr_slots WHERE key = k AND member = m AND expires > now;
  IF held IS NOT NULL AND w <= held THEN
    IF w <> held THEN UPDATE mrtr_slots SET weight = w WHERE key = k AND member = m; END IF;
    RETURN true;
  END IF;
  SELECT coalesce(sum(weight), 0) INTO total FROM mrtr_slots WHERE key = k AND expires > now;
  IF total - coalesce(held, 0) + w > lim OR (held IS NULL AND NOT now < exp) THEN
    RETURN false;
  END IF;
  IF held IS NULL THEN
    INSERT INTO mrtr_slots AS s VALUES (k, m, w, exp)
    ON CONFLICT (key, member) DO UPDATE SET weight = EXCLUDED.weight, expires = EXCLUDED.expires;
  ELSE
    UPDATE mrtr_slots SET weight = w WHERE key = k AND member = m;
  END IF;
  RETURN true;
END $$;

-- The keys of index `ix` whose lease lapsed, earliest first: done and expired ones leave the
-- index, one renewed without the index moves to its lease's end.
CREATE OR REPLACE FUNCTION mrtr_lapsed(ix bytea, lim integer, now double precision)
RETURNS SETOF bytea LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT l.key, l.expires AS tracked, e.outcome, e.lease_until, e.expires
           FROM mrtr_leases AS l LEFT JOIN mrtr_entries AS e ON e.key = l.key
           WHERE l.name = ix AND l.until <= now ORDER BY l.until LIMIT lim
           FOR UPDATE OF l SKIP LOCKED LOOP
    IF NOT now < r.tracked OR r.expires IS NULL OR NOT now < r.expires
       OR r.outcome IS NOT NULL THEN
      DELETE FROM mrtr_leases WHERE name = ix AND key = r.key;
    ELSIF now < r.lease_until THEN
      UPDATE mrtr_leases SET until = r.lease_until WHERE name = ix AND key = r.key;
    ELSE
      RETURN NEXT r.key;
    END IF;
  END LOOP;
END $$;
"""

# A loop turn's put_if_absent calls (_put_batches.py): arrays of keys (sorted), outcomes and
# deadlines, each row's mrtr_put_if_absent answered in the order given.
PUT_IF_ABSENT_ROWS = ("SELECT mrtr_put_if_absent(t.k, t.v, t.e, $4) FROM unnest($1::bytea[],"
                      " $2::bytea[], $3::float8[]) WITH ORDINALITY AS t(k, v, e, i) ORDER BY t.i")
GET = "SELECT outcome, lease_until, expires FROM mrtr_entries WHERE key = $1"
COMPLETE = ("INSERT INTO mrtr_entries VALUES ($1, $2, 0.0, $3) ON CONFLICT (key) DO UPDATE"
            " SET outcome = EXCLUDED.outcome, lease_until = 0.0, expires = EXCLUDED.expires")
RENEW = ("UPDATE mrtr_entries SET lease_until = $2 + $3 WHERE key = $1 AND outcome IS NULL"
         " AND lease_until > $2 AND expires > $2 RETURNING 1")
RENEW_TRACKED = ("WITH r AS (UPDATE mrtr_entries SET lease_until = $2 + $3 WHERE key = $1"
                 " AND outcome IS NULL AND lease_until > $2 AND expires > $2"
                 " RETURNING key, expires) INSERT INTO mrtr_leases"
                 " SELECT $4, key, $2 + $3, expires FROM r ON CONFLICT (name, key)"
                 " DO UPDATE SET until = EXCLUDED.until RETURNING 1")
# $2 (a holder, or NULL for any): only that holder's claim goes.
RELEASE = ("DELETE FROM mrtr_entries WHERE key = $1 AND outcome IS NULL"
           " AND ($2::text IS NULL OR holder = $2::text)")
RELEASE_TRACKED = ("WITH r AS (DELETE FROM mrtr_entries WHERE key = $1 AND outcome IS NULL"
                   " AND ($3::text IS NULL OR holder = $3::text))"
                   " DELETE FROM mrtr_leases WHERE name = $2 AND key = $1")
ADD = ("INSERT INTO mrtr_counters AS c VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET"
       " value = CASE WHEN c.expires > $4 THEN c.value + $2 ELSE $2 END,"
       " expires = EXCLUDED.expires RETURNING value")
DISMISS = "SELECT mrtr_dismiss($1, $2)"
ADMITTED = "SELECT mrtr_admitted($1, $2)"
SWEEP_SLOTS = "SELECT mrtr_sweep_slots($1, $2)"
# The message and its notification commit together: a waiter woken finds it.
DELIVER = ("WITH put AS (INSERT INTO mrtr_messages VALUES ($1, $2, $3) ON CONFLICT (key)"
           " DO UPDATE SET message = EXCLUDED.message, expires = EXCLUDED.expires"
           " RETURNING 1) SELECT pg_notify($4, $5) FROM put")
TAKE = "DELETE FROM mrtr_messages WHERE key = $1 RETURNING message, expires"
NOTIFY = "SELECT pg_notify($1, $2)"
# The slots' two tables are swept by SWEEP_SLOTS, which keeps a key's total and members in step.
TABLES = ("mrtr_entries", "mrtr_counters", "mrtr_tokens", "mrtr_messages", "mrtr_leases")
# One table's expired rows, at most $2 of them (names from TABLES only, never from input).
PURGE = ("DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} WHERE expires <= $1"
         " LIMIT $2)")

# V2 (#31): a key's total is kept in mrtr_slot_totals, equal to the sum of its member rows (lapsed
# or not) whenever it exists, so an admit no longer sums every member (3 ms at 10,000). Every
# call on a key's slots takes its advisory lock; mrtr_slot_total first deletes the key's lapsed
# members (by the (key, expires) index: the work is theirs only), then reads the total, or
# totals the members once when the key has none (written before V2, or swept). The generic
# sweep leaves both tables to mrtr_sweep_slots, which drops a key whole once its total expired
# (every member lapsed) and skips a key whose lock is held, so two sweeps never deadlock. A
# replica of version 1 still running in a rolling upgrade dismisses and sweeps members without
# the total, which then refuses too much: a refusal counts the key's members again first, at
# most once a minute (`counted`).
_V2 = """
CREATE TABLE IF NOT EXISTS mrtr_slot_totals (
    key bytea PRIMARY KEY, total bigint NOT NULL, expires double precision NOT NULL,
    counted double precision NOT NULL);
CREATE INDEX IF NOT EXISTS mrtr_slot_totals_expires ON mrtr_slot_totals (expires);
CREATE INDEX IF NOT EXISTS mrtr_slots_key_expires ON mrtr_slots (key, expires);

CREATE OR REPLACE FUNCTION mrtr_slot_recount(k bytea, now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE cur bigint; latest double precision;
BEGIN
  DELETE FROM mrtr_slots AS s WHERE s.key = k AND s.expires <= now;
  SELECT coalesce(sum(s.weight), 0), max(s.expires) INTO cur, latest FROM mrtr_slots AS s
    WHERE s.key = k;
  IF latest IS NULL THEN
    DELETE FROM mrtr_slot_totals AS t WHERE t.key = k;
  ELSE
    INSERT INTO mrtr_slot_totals AS t VALUES (k, cur, latest, now) ON CONFLICT (key) DO UPDATE
      SET total = EXCLUDED.total, expires = EXCLUDED.expires, counted = EXCLUDED.counted;
  END IF;
  RETURN cur;
END $$;

CREATE OR REPLACE FUNCTION mrtr_slot_total(k bytea, now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE lapsed bigint; cur bigint;
BEGIN
  WITH gone AS (DELETE FROM mrtr_slots WHERE key = k AND expires <= now RETURNING weight)
  SELECT coalesce(sum(weight), 0) INTO lapsed FROM gone;
  SELECT t.total INTO cur FROM mrtr_slot_totals AS t WHERE t.key = k;
  IF cur IS NULL THEN
    RETURN mrtr_slot_recount(k, now);
  END IF;
  IF lapsed <> 0 THEN
    UPDATE mrtr_slot_totals AS t SET total = cur - lapsed WHERE t.key = k;
  END IF;
  RETURN cur - lapsed;
END $$;

CREATE OR REPLACE FUNCTION mrtr_admit(k bytea, m bytea, lim bigint, exp double precision,
                                      w bigint, now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE held bigint; cur bigint; last double precision;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(encode(k, 'base64'), 7));
  cur := mrtr_slot_total(k, now);
  SELECT s.weight INTO held FROM mrtr_slots AS s WHERE s.key = k AND s.member = m;
  IF held IS NOT NULL AND w <= held THEN
    IF w <> held THEN
      UPDATE mrtr_slots AS s SET weight = w WHERE s.key = k AND s.member = m;
      UPDATE mrtr_slot_totals AS t SET total = cur - held + w WHERE t.key = k;
    END IF;
    RETURN true;
  END IF;
  IF held IS NULL AND NOT now < exp THEN
    RETURN false;
  END IF;
  IF cur - coalesce(held, 0) + w > lim THEN
    SELECT t.counted INTO last FROM mrtr_slot_totals AS t WHERE t.key = k;
    IF last IS NULL OR now - last < 60 THEN
      RETURN false;
    END IF;
    cur := mrtr_slot_recount(k, now);  -- a refusal: make sure of the total first
    IF cur - coalesce(held, 0) + w > lim THEN
      RETURN false;
    END IF;
  END IF;
  IF held IS NULL THEN
    INSERT INTO mrtr_slots AS s VALUES (k, m, w, exp)
    ON CONFLICT (key, member) DO UPDATE SET weight = EXCLUDED.weight, expires = EXCLUDED.expires;
  ELSE
    UPDATE mrtr_slots AS s SET weight = w WHERE s.key = k AND s.member = m;
  END IF;
  INSERT INTO mrtr_slot_totals AS t VALUES (k, cur - coalesce(held, 0) + w, exp, now)
  ON CONFLICT (key) DO UPDATE SET total = EXCLUDED.total,
    expires = greatest(t.expires, EXCLUDED.expires);
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION mrtr_dismiss(k bytea, m bytea)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE w bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(encode(k, 'base64'), 7));
  DELETE FROM mrtr_slots AS s WHERE s.key = k AND s.member = m RETURNING s.weight INTO w;
  IF w IS NOT NULL THEN
    UPDATE mrtr_slot_totals AS t SET total = t.total - w WHERE t.key = k;
  END IF;
END $$;

CREATE OR REPLACE FUNCTION mrtr_admitted(k bytea, now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(encode(k, 'base64'), 7));
  RETURN mrtr_slot_total(k, now);
END $$;

CREATE OR REPLACE FUNCTION mrtr_sweep_slots(now double precision, most integer)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; gone bigint := 0; n bigint;
BEGIN
  FOR r IN SELECT t.key FROM mrtr_slot_totals AS t WHERE t.expires <= now LIMIT most LOOP
    CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended(encode(r.key, 'base64'), 7));
    DELETE FROM mrtr_slot_totals AS t WHERE t.key = r.key AND t.expires <= now;
    IF FOUND THEN
      DELETE FROM mrtr_slots AS s WHERE s.key = r.key;
      GET DIAGNOSTICS n = ROW_COUNT;
      gone := gone + n;
    END IF;
  END LOOP;
  FOR r IN SELECT DISTINCT s.key FROM mrtr_slots AS s WHERE s.expires <= now AND NOT EXISTS
      (SELECT 1 FROM mrtr_slot_totals AS t WHERE t.key = s.key) LIMIT most LOOP
    CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended(encode(r.key, 'base64'), 7));
    CONTINUE WHEN EXISTS (SELECT 1 FROM mrtr_slot_totals AS t WHERE t.key = r.key);
    DELETE FROM mrtr_slots AS s WHERE s.key = r.key AND s.expires <= now;
    GET DIAGNOSTICS n = ROW_COUNT;
    gone := gone + n;
  END LOOP;
  RETURN gone;
END $$;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2)
VERSION = len(MIGRATIONS)


async def migrate(db: Any, schema: str) -> int:
    """Bring the schema `schema` of connection `db` to the current version; the version found.

    Idempotent and safe when several processes run it at once (an advisory lock orders them).
    """
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock($1)", LOCK)
        await db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await db.execute(f'CREATE TABLE IF NOT EXISTS "{schema}".mrtr_schema'
                         " (version integer NOT NULL)")
        found = await db.fetchval(f'SELECT max(version) FROM "{schema}".mrtr_schema') or 0
        for number in range(found + 1, VERSION + 1):
            await db.execute(f'SET LOCAL search_path = "{schema}"')
            await db.execute(MIGRATIONS[number - 1])
            await db.execute(f'INSERT INTO "{schema}".mrtr_schema VALUES ({number})')
    return int(found)
