"""The SQL statements of SQLiteStore (_sqlite.py), one table of entries, one of leases."""

# Design: see _sqlite.py; every statement is parameterised, none is built from input.

__all__ = [
    "CLAIM",
    "DELETE_EXPIRED",
    "DUE",
    "INSERT_NEW",
    "MARK",
    "RELEASE",
    "RENEW",
    "REWEIGH",
    "SCHEMA",
    "SELECT",
    "SLOTS",
    "TRACK",
    "UNTRACK",
    "UPSERT",
]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS mrtr_entries (key TEXT PRIMARY KEY, outcome BLOB,"
    " lease_until REAL NOT NULL, expires REAL NOT NULL, count INTEGER) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS mrtr_entries_expires ON mrtr_entries (expires)",
    "CREATE TABLE IF NOT EXISTS mrtr_leases (name TEXT NOT NULL, key TEXT NOT NULL,"
    " until REAL NOT NULL, expires REAL NOT NULL, PRIMARY KEY (name, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS mrtr_leases_until ON mrtr_leases (name, until)",
)
TRACK = "INSERT OR REPLACE INTO mrtr_leases (name, key, until, expires) VALUES (?, ?, ?, ?)"
UNTRACK = "DELETE FROM mrtr_leases WHERE name = ? AND key = ?"
DUE = ("SELECT l.key, l.expires, e.outcome, e.lease_until, e.expires, e.count FROM mrtr_leases"
       " AS l LEFT JOIN mrtr_entries AS e ON e.key = l.key WHERE l.name = ? AND l.until <= ?"
       " ORDER BY l.until LIMIT ?")
SELECT = "SELECT outcome, lease_until, expires, count FROM mrtr_entries WHERE key = ?"
# Claim in one statement: insert, or take over an entry that is absent in the Store's sense
# (expired, a counter, a lapsed claim). No row changed: the entry is live, and only then is it
# read (a replay or a duplicate, not the common path).
CLAIM = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
          " VALUES (:key, NULL, :lease, :expires, NULL) ON CONFLICT (key) DO UPDATE SET"
          " outcome = NULL, lease_until = :lease, expires = :expires, count = NULL"
          " WHERE NOT (expires > :now AND count IS NULL"
          " AND (outcome IS NOT NULL OR lease_until > :now))")
# An applied token: a DONE-like row (empty outcome); an expired one is taken over.
MARK = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
         " VALUES (:key, X'', :lease, :expires, NULL) ON CONFLICT (key) DO UPDATE SET"
         " outcome = X'', lease_until = :lease, expires = :expires, count = NULL"
         " WHERE NOT expires > :now")
UPSERT = ("INSERT OR REPLACE INTO mrtr_entries (key, outcome, lease_until, expires, count)"
           " VALUES (?, ?, ?, ?, ?)")
RENEW = ("UPDATE mrtr_entries SET lease_until = ? WHERE key = ? AND outcome IS NULL"
          " AND count IS NULL AND lease_until > ? AND expires > ?")
RELEASE = "DELETE FROM mrtr_entries WHERE key = ? AND outcome IS NULL AND count IS NULL"
INSERT_NEW = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
               " VALUES (:key, :outcome, 0.0, :expires, NULL) ON CONFLICT (key) DO UPDATE SET"
               " outcome = :outcome, lease_until = 0.0, expires = :expires, count = NULL"
               " WHERE NOT (expires > :now AND count IS NULL"
               " AND (outcome IS NOT NULL OR lease_until > :now))")
SLOTS = ("SELECT coalesce(sum(count), 0) FROM mrtr_entries WHERE key > ? AND key < ?"
          " AND expires > ?")
REWEIGH = "UPDATE mrtr_entries SET count = ? WHERE key = ?"
DELETE_EXPIRED = ("DELETE FROM mrtr_entries WHERE key IN (SELECT key FROM mrtr_entries"
                   " WHERE expires <= ? LIMIT ?)")
