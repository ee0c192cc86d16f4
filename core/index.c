/* SPDX-License-Identifier: MIT */
/* The SQLite index: see index.h for the contract. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>

#include "common/log.h"
#include "common/util.h"
#include "core/idmap.h"
#include "jitcache/jitcache.h"

#define APP_ID 0x4A434348 /* "JCCH" */
#define SCHEMA_VERSION 5
#define FOREIGN 1 /* internal: the file is not our current schema */

/*
 * Schema 2: who used each entry. users holds one row per (key, uid) that
 * requested or was served the entry, with that uid's own first use, last
 * access and hits; user_totals keeps per uid the entries, failed entries,
 * bytes (the full size of every ok entry it uses: see ARCHITECTURE.md, "Per-user
 * visibility") and hits, by triggers, so per-uid budgets and stats are O(1).
 * A row of entries takes its users rows with it (BEFORE DELETE, so that
 * their trigger still sees its size). Schema 1 is upgraded in place
 * (step_1_2), every entry attributed to the index file's owner.
 *
 * Schema 3: what each entry costs on disk, its charge (CHARGE below: its
 * object in whole 4 KiB blocks, its compile log, lowered names and other
 * text, and ROW_BYTES for the row and its index entries), summed over every
 * entry, ok or failed, into totals.stored and user_totals.stored by the same
 * triggers: the budgets count logs and negative entries (index.h). New
 * indexes use auto_vacuum=INCREMENTAL, so pages that removals free go back
 * to the file system (jc__index_reclaim); schema 2 is upgraded in place
 * (step_2_3) and then vacuumed once into that mode.
 */
#define ROW_BYTES "256"
#define CHARGE(t) \
	"(CASE WHEN " t ".status = 0 THEN (" t ".size + 4095) / 4096 * 4096 ELSE 0 END" \
	" + length(CAST(" t ".log AS BLOB)) + coalesce(length(" t ".lowered), 0)" \
	" + length(CAST(" t ".options AS BLOB)) + length(CAST(" t ".versions AS BLOB))" \
	" + length(CAST(" t ".source_name AS BLOB)) + length(CAST(" t ".arch AS BLOB))" \
	" + length(CAST(" t ".app_abi AS BLOB)) + " ROW_BYTES ")"
#define CHARGE_OF_KEY(k) "coalesce((SELECT " CHARGE("x") " FROM entries x WHERE x.key = " k "), 0)"
#define OK_SIZE_OF_KEY(k) \
	"coalesce((SELECT CASE WHEN status = 0 THEN size ELSE 0 END FROM entries WHERE key = " k "), 0)"
/* The columns CHARGE reads: an update of any of them moves the totals. */
#define CHARGE_COLS "status, size, log, lowered, options, versions, source_name, arch, app_abi"

#define USERS_TABLES_SQL(stored) \
	"CREATE TABLE users(key BLOB NOT NULL, uid INTEGER NOT NULL, created INTEGER NOT NULL," \
	" last_access INTEGER NOT NULL, hits INTEGER NOT NULL, PRIMARY KEY (key, uid)) WITHOUT ROWID;" \
	"CREATE INDEX users_lru ON users(uid, last_access, key);" \
	"CREATE TABLE user_totals(uid INTEGER PRIMARY KEY, entries INTEGER NOT NULL," \
	" negative INTEGER NOT NULL, bytes INTEGER NOT NULL, hits INTEGER NOT NULL" stored ");"

#define DROP_TRIGGERS_SQL \
	"DROP TRIGGER IF EXISTS entries_ins; DROP TRIGGER IF EXISTS entries_del;" \
	" DROP TRIGGER IF EXISTS entries_upd; DROP TRIGGER IF EXISTS users_ins;" \
	" DROP TRIGGER IF EXISTS users_del; DROP TRIGGER IF EXISTS users_upd;" \
	" DROP TRIGGER IF EXISTS entries_del_users; DROP TRIGGER IF EXISTS entries_upd_users;"

/* O(1) totals, kept by triggers (put is an upsert, so UPDATE fires). */
#define TRIGGERS_SQL \
	"CREATE TRIGGER entries_ins AFTER INSERT ON entries BEGIN" \
	" UPDATE totals SET entries = entries + 1, negative = negative + (NEW.status <> 0)," \
	" bytes = bytes + CASE WHEN NEW.status = 0 THEN NEW.size ELSE 0 END," \
	" stored = stored + " CHARGE("NEW") "; END;" \
	"CREATE TRIGGER entries_del AFTER DELETE ON entries BEGIN" \
	" UPDATE totals SET entries = entries - 1, negative = negative - (OLD.status <> 0)," \
	" bytes = bytes - CASE WHEN OLD.status = 0 THEN OLD.size ELSE 0 END," \
	" stored = stored - " CHARGE("OLD") "; END;" \
	"CREATE TRIGGER entries_upd AFTER UPDATE OF " CHARGE_COLS " ON entries BEGIN" \
	" UPDATE totals SET negative = negative - (OLD.status <> 0) + (NEW.status <> 0)," \
	" bytes = bytes - CASE WHEN OLD.status = 0 THEN OLD.size ELSE 0 END" \
	" + CASE WHEN NEW.status = 0 THEN NEW.size ELSE 0 END," \
	" stored = stored - " CHARGE("OLD") " + " CHARGE("NEW") "; END;" \
	"CREATE TRIGGER users_ins AFTER INSERT ON users BEGIN" \
	" INSERT OR IGNORE INTO user_totals VALUES (NEW.uid, 0, 0, 0, 0, 0);" \
	" UPDATE user_totals SET entries = entries + 1, hits = hits + NEW.hits," \
	" negative = negative + coalesce((SELECT status <> 0 FROM entries WHERE key = NEW.key), 0)," \
	" bytes = bytes + " OK_SIZE_OF_KEY("NEW.key") "," \
	" stored = stored + " CHARGE_OF_KEY("NEW.key") " WHERE uid = NEW.uid; END;" \
	"CREATE TRIGGER users_del AFTER DELETE ON users BEGIN" \
	" UPDATE user_totals SET entries = entries - 1, hits = hits - OLD.hits," \
	" negative = negative - coalesce((SELECT status <> 0 FROM entries WHERE key = OLD.key), 0)," \
	" bytes = bytes - " OK_SIZE_OF_KEY("OLD.key") "," \
	" stored = stored - " CHARGE_OF_KEY("OLD.key") " WHERE uid = OLD.uid;" \
	" DELETE FROM user_totals WHERE uid = OLD.uid AND entries = 0; END;" \
	"CREATE TRIGGER users_upd AFTER UPDATE OF hits ON users BEGIN" \
	" UPDATE user_totals SET hits = hits - OLD.hits + NEW.hits WHERE uid = NEW.uid; END;" \
	"CREATE TRIGGER entries_del_users BEFORE DELETE ON entries BEGIN" \
	" DELETE FROM users WHERE key = OLD.key; END;" \
	"CREATE TRIGGER entries_upd_users AFTER UPDATE OF " CHARGE_COLS " ON entries BEGIN" \
	" UPDATE user_totals SET negative = negative - (OLD.status <> 0) + (NEW.status <> 0)," \
	" bytes = bytes - CASE WHEN OLD.status = 0 THEN OLD.size ELSE 0 END" \
	" + CASE WHEN NEW.status = 0 THEN NEW.size ELSE 0 END," \
	" stored = stored - " CHARGE("OLD") " + " CHARGE("NEW") \
	" WHERE uid IN (SELECT uid FROM users WHERE key = NEW.key); END;"

/* Schema 1 -> 2 (%u: the uid existing entries are attributed to), its
 * totals summed here; the triggers are step_2_3's, which follows. */
static const char step_1_2[] = USERS_TABLES_SQL("")
	"INSERT INTO users SELECT key, %u, created, last_access, hits FROM entries;"
	"INSERT INTO user_totals SELECT u.uid, count(*), sum(e.status <> 0),"
	" sum(CASE WHEN e.status = 0 THEN e.size ELSE 0 END), sum(u.hits)"
	" FROM users u CROSS JOIN entries e ON e.key = u.key GROUP BY u.uid;";

/* Schema 2 -> 3: the stored columns, the triggers that keep them, and
 * their sums. */
static const char step_2_3[] =
	"ALTER TABLE totals ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE user_totals ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;"
	DROP_TRIGGERS_SQL TRIGGERS_SQL
	"UPDATE totals SET stored = (SELECT coalesce(sum(" CHARGE("e") "), 0) FROM entries e);"
	"UPDATE user_totals SET stored = (SELECT coalesce(sum(" CHARGE("e") "), 0)"
	" FROM users u CROSS JOIN entries e ON e.key = u.key WHERE u.uid = user_totals.uid);";

/*
 * Schema 4: the request that made each entry (index.h, "kept requests"),
 * inline: requests holds each distinct kept request once (data: its
 * encoding, core/kept.h), found by its content (hash: 32 bits of its
 * XXH3-128; equal bytes share a row, compared in full), the uid that asked
 * first and refs, the entries that name it in their request column. Ids
 * are SQLite's, ascending, so rows fill their pages (random keys would
 * leave them a third empty). Triggers keep refs, drop a request no entry
 * names, and count rows and bytes in totals (the byte budget includes
 * them). In the index rather than a file each: a SAXPY request is ~430
 * bytes, a file takes a block. Schema 3 is upgraded in place (step_3_4).
 * meta holds named strings (the toolchain identity of the daemon that last
 * opened the cache).
 *
 * Schema 5: no index on requests(hash). Its pages, filled in hash order,
 * cost ~20 bytes a request (5 % of a SAXPY one); the writer finds a request
 * by its hash through a map in memory instead (idmap.h: built from the
 * table at its first keep, find_request). step_4_5 drops it.
 */
#define REQUESTS_SQL \
	"CREATE TABLE requests(id INTEGER PRIMARY KEY, hash INTEGER NOT NULL," \
	" uid INTEGER NOT NULL, refs INTEGER NOT NULL, data BLOB NOT NULL);" \
	"ALTER TABLE entries ADD COLUMN request INTEGER;" \
	"CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;" \
	"ALTER TABLE totals ADD COLUMN requests INTEGER NOT NULL DEFAULT 0;" \
	"ALTER TABLE totals ADD COLUMN request_bytes INTEGER NOT NULL DEFAULT 0;" \
	"CREATE TRIGGER requests_ins AFTER INSERT ON requests BEGIN" \
	" UPDATE totals SET requests = requests + 1, request_bytes = request_bytes +" \
	" length(NEW.data); END;" \
	"CREATE TRIGGER requests_del AFTER DELETE ON requests BEGIN" \
	" UPDATE totals SET requests = requests - 1, request_bytes = request_bytes -" \
	" length(OLD.data); END;" \
	"CREATE TRIGGER entries_upd_request AFTER UPDATE OF request ON entries BEGIN" \
	" UPDATE requests SET refs = refs + 1 WHERE id = NEW.request;" \
	" UPDATE requests SET refs = refs - 1 WHERE id = OLD.request;" \
	" DELETE FROM requests WHERE id = OLD.request AND refs <= 0; END;" \
	"CREATE TRIGGER entries_del_request AFTER DELETE ON entries" \
	" WHEN OLD.request IS NOT NULL BEGIN" \
	" UPDATE requests SET refs = refs - 1 WHERE id = OLD.request;" \
	" DELETE FROM requests WHERE id = OLD.request AND refs <= 0; END;"

static const char step_3_4[] = REQUESTS_SQL;
static const char step_4_5[] = "DROP INDEX IF EXISTS requests_hash;";

static const char schema_sql[] =
	"CREATE TABLE entries("
	" key BLOB PRIMARY KEY NOT NULL,"
	" status INTEGER NOT NULL CHECK (status IN (0, 1)),"
	" error INTEGER NOT NULL,"
	" object BLOB,"                 /* NULL for failures */
	" size INTEGER NOT NULL,"
	" output INTEGER NOT NULL,"
	" arch TEXT NOT NULL,"
	" versions TEXT NOT NULL,"
	" options TEXT NOT NULL,"
	" source_name TEXT NOT NULL,"
	" app_abi TEXT NOT NULL,"
	" created INTEGER NOT NULL,"
	" last_access INTEGER NOT NULL,"
	" expires INTEGER NOT NULL,"
	" hits INTEGER NOT NULL,"
	" compile_ns INTEGER NOT NULL,"
	/* Large values last: columns after an overflowing one cost page reads. */
	" log TEXT NOT NULL,"
	" lowered BLOB);"               /* (u32le len, expr, u32le len, lowered)* */
	"CREATE INDEX entries_lru ON entries(last_access, key);"
	"CREATE INDEX entries_object ON entries(object) WHERE object IS NOT NULL;"
	"CREATE TABLE counters(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)"
	" WITHOUT ROWID;"
	"CREATE TABLE totals(id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL,"
	" negative INTEGER NOT NULL, bytes INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0);"
	"INSERT INTO totals VALUES (0, 0, 0, 0, 0);"
	USERS_TABLES_SQL(", stored INTEGER NOT NULL DEFAULT 0") TRIGGERS_SQL REQUESTS_SQL;

/* Entry columns, in the order of enum col (key first, large values last). */
#define COLS "key, status, error, object, size, output, arch, versions, options, " \
	     "source_name, app_abi, created, last_access, expires, hits, compile_ns, log, lowered"
enum col {
	C_KEY, C_STATUS, C_ERROR, C_OBJECT, C_SIZE, C_OUTPUT, C_ARCH, C_VERSIONS, C_OPTIONS,
	C_SOURCE_NAME, C_APP_ABI, C_CREATED, C_LAST_ACCESS, C_EXPIRES, C_HITS, C_COMPILE_NS,
	C_LOG, C_LOWERED,
	C_CHARGE, /* selected, not stored: CHARGE of the row */
};

/* The same columns for one uid's view (users u CROSS JOIN entries e): that
 * uid's own created, last_access and hits in place of the entry's. */
#define COLS_USER "e.key, e.status, e.error, e.object, e.size, e.output, e.arch, e.versions," \
		  " e.options, e.source_name, e.app_abi, u.created, u.last_access, e.expires," \
		  " u.hits, e.compile_ns, e.log, e.lowered"

enum stmt { ST_GET, ST_PUT, ST_DELETE, ST_TOUCH, ST_TOTALS, ST_REFS, ST_CNT_LOAD,
	    ST_CNT_SAVE, ST_BEGIN, ST_COMMIT, ST_ROLLBACK, ST_USE, ST_GET_USER, ST_UNUSE,
	    ST_USERS_OF, ST_USER_TOTALS, ST_ALL_USER_TOTALS, ST_PREFIX, ST_PREFIX_USER, ST_REQ_SCAN,
	    ST_REQ_PUT, ST_REQ_LINK, ST_REQ_UNUSED, ST_REQ_DATA, ST_REQ_GET, ST_REQ_TOTALS, ST_META_GET,
	    ST_META_SET, ST__N };

static const char *const stmt_sql[ST__N] = {
	[ST_GET] = "SELECT " COLS ", " CHARGE("entries") " FROM entries WHERE key = ?1",
	[ST_PUT] = "INSERT INTO entries (" COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
		   " ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18) ON CONFLICT (key) DO UPDATE SET"
		   " status = excluded.status, error = excluded.error, object = excluded.object,"
		   " size = excluded.size, output = excluded.output, arch = excluded.arch,"
		   " versions = excluded.versions, options = excluded.options,"
		   " source_name = excluded.source_name, app_abi = excluded.app_abi,"
		   " created = excluded.created, last_access = excluded.last_access,"
		   " expires = excluded.expires, hits = excluded.hits,"
		   " compile_ns = excluded.compile_ns, log = excluded.log,"
		   " lowered = excluded.lowered",
	[ST_DELETE] = "DELETE FROM entries WHERE key = ?1",
	[ST_TOUCH] = "UPDATE entries SET hits = hits + ?2, last_access = ?3 WHERE key = ?1",
	/* The byte budget counts kept requests too. */
	[ST_TOTALS] = "SELECT entries, negative, bytes, stored + request_bytes FROM totals WHERE id = 0",
	[ST_REFS] = "SELECT count(*) FROM entries WHERE object = ?1",
	[ST_CNT_LOAD] = "SELECT name, value FROM counters ORDER BY name",
	[ST_CNT_SAVE] = ("INSERT INTO counters (name, value) VALUES (?1, ?2)"
			 " ON CONFLICT (name) DO UPDATE SET value = excluded.value"),
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	/* ?1 key, ?2 uid, ?3 now, ?4 hits; nothing when the entry is gone. */
	[ST_USE] = "INSERT INTO users (key, uid, created, last_access, hits)"
		   " SELECT ?1, ?2, ?3, ?3, ?4 FROM entries WHERE key = ?1"
		   " ON CONFLICT (key, uid) DO UPDATE SET last_access = excluded.last_access,"
		   " hits = hits + excluded.hits",
	/* users first (CROSS JOIN keeps the order): a key another uid used costs
	 * the same one failed probe as a key nobody has. */
	[ST_GET_USER] = "SELECT " COLS_USER ", " CHARGE("e") " FROM users u CROSS JOIN entries e ON e.key = u.key"
			" WHERE u.key = ?1 AND u.uid = ?2",
	[ST_UNUSE] = "DELETE FROM users WHERE key = ?1 AND uid = ?2",
	[ST_USERS_OF] = "SELECT uid FROM users WHERE key = ?1 ORDER BY uid",
	/* keys between two 16-byte bounds (a hex prefix padded with 0s, with fs) */
	[ST_PREFIX] = "SELECT key FROM entries WHERE key BETWEEN ?1 AND ?2 ORDER BY key LIMIT ?3",
	[ST_PREFIX_USER] = "SELECT key FROM users WHERE key BETWEEN ?1 AND ?2 AND uid = ?4"
			   " ORDER BY key LIMIT ?3",
	[ST_USER_TOTALS] = "SELECT entries, negative, bytes, hits, stored FROM user_totals WHERE uid = ?1",
	[ST_ALL_USER_TOTALS] = "SELECT uid, entries, negative, bytes, hits, stored FROM user_totals"
			       " ORDER BY uid",
	[ST_REQ_SCAN] = "SELECT id, hash FROM requests",
	[ST_REQ_PUT] = "INSERT INTO requests (hash, uid, refs, data) VALUES (?1, ?2, 0, ?3)",
	[ST_REQ_LINK] = "UPDATE entries SET request = ?1 WHERE key = ?2 AND request IS NULL",
	[ST_REQ_UNUSED] = "DELETE FROM requests WHERE id = ?1 AND refs <= 0",
	[ST_REQ_DATA] = "SELECT data FROM requests WHERE id = ?1",
	[ST_REQ_GET] = "SELECT r.id, length(r.data), r.uid FROM entries e CROSS JOIN requests r"
		       " ON r.id = e.request WHERE e.key = ?1",
	[ST_REQ_TOTALS] = "SELECT requests, request_bytes FROM totals WHERE id = 0",
	[ST_META_GET] = "SELECT value FROM meta WHERE name = ?1",
	[ST_META_SET] = "INSERT INTO meta (name, value) VALUES (?1, ?2)"
			" ON CONFLICT (name) DO UPDATE SET value = excluded.value",
};

struct jc_index {
	sqlite3 *db;
	sqlite3_stmt *st[ST__N];
	uint64_t wal_keep; /* bytes kept allocated for the WAL at close (set_budget) */
	char msg[512];
	/* Kept requests by content hash (schema 5; find_request): built at the
	 * first keep, rebuilt when ids of removed rows outnumber the rest. */
	struct jc_idmap requests;
	int requests_mapped;
};


static int map_rc(sqlite3 *db, int rc)
{
	switch (rc & 0xff) {
	case SQLITE_FULL:
		return JC_ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return JC_EBUSY;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return JC_ECORRUPT;
	case SQLITE_NOMEM:
		return JC_ENOMEM;
	case SQLITE_IOERR: {
		int e = sqlite3_system_errno(db);
		return e == ENOSPC || e == EDQUOT ? JC_ENOSPC : JC_EIO;
	}
	default:
		return JC_EIO;
	}
}

/* Records "what: sqlite message" and returns the mapped code. */
static int fail(struct jc_index *ix, int rc, const char *what)
{
	snprintf(ix->msg, sizeof(ix->msg), "%s: %s (SQLite code %d)", what,
		 sqlite3_errmsg(ix->db), rc);
	return map_rc(ix->db, rc);
}

/* Steps a statement that returns no row, then resets it. */
static int step_done(struct jc_index *ix, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st), out = rc == SQLITE_DONE ? 0 : fail(ix, rc, what);

	sqlite3_reset(st);
	return out;
}

static int tx(struct jc_index *ix, enum stmt which)
{
	return step_done(ix, ix->st[which], stmt_sql[which]);
}

/* Commits, or rolls back after an earlier failure rc; returns rc or the commit's. */
static int tx_end(struct jc_index *ix, int rc)
{
	if (rc == 0)
		rc = tx(ix, ST_COMMIT);
	if (rc && !sqlite3_get_autocommit(ix->db)) {
		char keep[sizeof(ix->msg)];

		memcpy(keep, ix->msg, sizeof(keep));
		tx(ix, ST_ROLLBACK);
		memcpy(ix->msg, keep, sizeof(keep));
	}
	return rc;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

static void detach(struct jc_index *ix)
{
	for (int i = 0; i < ST__N; i++) {
		sqlite3_finalize(ix->st[i]);
		ix->st[i] = NULL;
	}
	sqlite3_close(ix->db);
	ix->db = NULL;
}

/*
 * Schema 1 to 4 -> 5 in one transaction: 1 -> 2 attributes every entry
 * to the uid that owns the index file (the daemon's: the cache directory is
 * its alone); 2 -> 3 adds the charges; 3 -> 4 the kept requests; 4 -> 5
 * drops their hash index. Returns an
 * SQLite code (*msg: its message).
 */
static int upgrade_schema(sqlite3 *db, const char *path, int64_t from, char **msg)
{
	struct stat st;
	char *sql;
	int rc;

	if (stat(path, &st) != 0)
		return SQLITE_CANTOPEN;
	sql = sqlite3_mprintf("%s%s%s%s", from == 1 ? step_1_2 : "", from <= 2 ? step_2_3 : "",
			      from <= 3 ? step_3_4 : "", step_4_5);
	char *step = sql ? sqlite3_mprintf(sql, (unsigned)st.st_uid) : NULL;
	sqlite3_free(sql);
	if (!step)
		return SQLITE_NOMEM;
	rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, msg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, step, NULL, NULL, msg);
	if (rc == SQLITE_OK) {
		char pragma[64];

		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d; COMMIT", SCHEMA_VERSION);
		rc = sqlite3_exec(db, pragma, NULL, NULL, msg);
	}
	if (rc != SQLITE_OK)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_free(step);
	/* Pages freed later go back to the file system (jc__index_reclaim): the
	 * mode takes one VACUUM, which needs room for a copy of the file. */
	if (rc == SQLITE_OK && from <= 2 &&
	    sqlite3_exec(db, "PRAGMA auto_vacuum = INCREMENTAL; VACUUM", NULL, NULL, NULL) != SQLITE_OK)
		jc_log_warn(INDEX, "%s: not vacuumed into incremental mode (%s): freed pages stay in "
			    "the file until a later start manages it", path, sqlite3_errmsg(db));
	return rc;
}

/*
 * Opens the connection, checks the schema (creating it in an empty writable
 * file), sets WAL and prepares every statement. Returns 0, FOREIGN (err says
 * why) or a JC_E* code. The caller detaches on failure.
 */
static int attach(struct jc_index *ix, const char *path, int readonly, char *err,
		  size_t errlen)
{
	int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	int64_t app = 0, ver = 0, tables = 0, wal = 0;
	char *msg = NULL;
	int rc;

	rc = sqlite3_open_v2(path, &ix->db, flags, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(ix->db, 5000);
	/* Versions first: nothing is changed in a file we do not understand. */
	if (rc == SQLITE_OK)
		rc = pragma_int(ix->db, "PRAGMA application_id", &app);
	if (rc == SQLITE_OK)
		rc = pragma_int(ix->db, "PRAGMA user_version", &ver);
	if (rc == SQLITE_OK)
		rc = pragma_int(ix->db, "SELECT count(*) FROM sqlite_master", &tables);
	if (rc != SQLITE_OK)
		goto sqlite_fail;
	int upgrade = !readonly && app == APP_ID && ver >= 1 && ver < SCHEMA_VERSION;
	if ((app != APP_ID || ver != SCHEMA_VERSION) && !upgrade) {
		if (app || ver || tables || readonly) {
			const char *then = !readonly ? "" : app == APP_ID && ver >= 1 &&
					   ver < SCHEMA_VERSION ?
				" (jitcached upgrades it in place, keeping its entries)" :
				" (jitcached moves it aside and starts afresh)";
			if (app == APP_ID)
				jc__fail(err, errlen, 0, "%s has index schema version %lld; this "
					 "jitcached uses %d%s", path, (long long)ver, SCHEMA_VERSION, then);
			else
				jc__fail(err, errlen, 0, "%s is not a jitcache index (application_id "
					 "%lld)%s", path, (long long)app, then);
			return FOREIGN;
		}
	}
	/* The -wal and -shm files stay when the last connection closes (the WAL
	 * truncated): a daemon restarted on a full disk maps the -shm that is
	 * there instead of failing to make one ("disk I/O error"). */
	int persist = 1;
	sqlite3_file_control(ix->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	if (!readonly) {
		/* A new file: freed pages go back to the file system
		 * (jc__index_reclaim); set before WAL mode writes the first page. */
		if (!tables && (rc = sqlite3_exec(ix->db, "PRAGMA auto_vacuum = INCREMENTAL", NULL, NULL,
						  NULL)) != SQLITE_OK)
			goto sqlite_fail;
		rc = sqlite3_exec(ix->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
				  " PRAGMA journal_size_limit=4194304; PRAGMA cache_size=-65536",
				  NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			goto sqlite_fail;
		if (pragma_int(ix->db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode",
			       &wal) != SQLITE_OK || !wal) {
			jc__fail(err, errlen, 0, "%s: SQLite cannot use WAL mode here (a network or "
				"unusual filesystem?)", path);
			return JC_EIO;
		}
	}
	if (upgrade) {
		rc = upgrade_schema(ix->db, path, ver, &msg);
		if (rc == SQLITE_ERROR) {
			/* An old version on tables we do not know. */
			jc__fail(err, errlen, 0, "%s: unexpected schema: %s", path, msg ? msg : "");
			sqlite3_free(msg);
			return FOREIGN;
		}
		if (rc != SQLITE_OK)
			goto sqlite_fail;
		jc_log_notice(INDEX, "upgraded index %s from schema %lld to %d%s", path, (long long)ver,
			      SCHEMA_VERSION, ver == 1 ? ": existing entries belong to its owner's uid" : "");
	}
	if (!readonly && !tables) {
		rc = sqlite3_exec(ix->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(ix->db, schema_sql, NULL, NULL, NULL);
		if (rc == SQLITE_OK) {
			char pragmas[128];

			snprintf(pragmas, sizeof(pragmas),
				 "PRAGMA application_id = %d; PRAGMA user_version = %d; COMMIT",
				 APP_ID, SCHEMA_VERSION);
			rc = sqlite3_exec(ix->db, pragmas, NULL, NULL, &msg);
		}
		if (rc != SQLITE_OK) {
			sqlite3_exec(ix->db, "ROLLBACK", NULL, NULL, NULL);
			goto sqlite_fail;
		}
		jc_log_info(INDEX, "created index %s (schema %d)", path, SCHEMA_VERSION);
	}
	for (int i = 0; i < ST__N; i++) {
		rc = sqlite3_prepare_v3(ix->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&ix->st[i], NULL);
		if (rc == SQLITE_ERROR) {
			/* Our version numbers on tables we do not know. */
			jc__fail(err, errlen, 0, "%s: unexpected schema: %s", path,
				sqlite3_errmsg(ix->db));
			return FOREIGN;
		}
		if (rc != SQLITE_OK)
			goto sqlite_fail;
	}
	return 0;

sqlite_fail:
	jc__fail(err, errlen, 0, "%s: %s (SQLite code %d)", path,
		ix->db ? sqlite3_errmsg(ix->db) : sqlite3_errstr(rc), rc);
	sqlite3_free(msg);
	return ix->db ? map_rc(ix->db, rc) : JC_ENOMEM;
}

/* Renames path (and its -wal) to path.old-<n>, removes its -shm. */
static int move_aside(const char *path, char *aside, size_t len)
{
	char from[4096 + 8], to[4096 + 16];

	for (int n = 1; n < 1000; n++) {
		snprintf(aside, len, "%s.old-%d", path, n);
		if (access(aside, F_OK) == 0)
			continue;
		if (rename(path, aside) < 0)
			return -1;
		snprintf(from, sizeof(from), "%s-wal", path);
		snprintf(to, sizeof(to), "%s-wal", aside);
		if (rename(from, to) < 0 && errno != ENOENT)
			return -1;
		snprintf(from, sizeof(from), "%s-shm", path);
		if (unlink(from) < 0 && errno != ENOENT)
			return -1;
		return 0;
	}
	errno = EEXIST;
	return -1;
}

int jc__index_open(const char *path, int readonly, struct jc_index **out, char *err,
		   size_t errlen)
{
	struct jc_index *ix;
	char why[512] = "", aside[4096];
	int rc;

	if (!path || !out)
		return jc__fail(err, errlen, 0, "no index path"), JC_EINVAL;
	if (readonly && access(path, F_OK) < 0) {
		jc__fail(err, errlen, 0, "%s: %s", path, strerror(errno));
		return errno == ENOENT ? JC_ENOTFOUND : JC_EIO;
	}
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return jc__fail(err, errlen, 0, "out of memory"), JC_ENOMEM;
	rc = attach(ix, path, readonly, why, sizeof(why));
	if ((rc == FOREIGN || rc == JC_ECORRUPT) && !readonly) {
		detach(ix);
		if (move_aside(path, aside, sizeof(aside)) < 0) {
			jc__fail(err, errlen, 0, "%s; moving it aside failed: %s", why,
				strerror(errno));
			rc = JC_EIO;
			goto err_after_alloc;
		}
		jc_log_warn(INDEX, "%s; moved it to %s and started an empty index (the cache "
			    "starts cold)", why, aside);
		rc = attach(ix, path, readonly, why, sizeof(why));
	}
	if (rc) {
		jc__fail(err, errlen, 0, "%s", why);
		rc = rc == FOREIGN ? JC_EVERSION : rc;
		goto err_after_alloc;
	}
	*out = ix;
	return 0;

err_after_alloc:
	detach(ix);
	free(ix);
	return rc;
}

/* Keeps ix->wal_keep bytes allocated for the WAL at wal (its size kept):
 * the room the next frames are written in, so rows can be deleted on a
 * full disk. Best effort. */
static void keep_wal_room(const struct jc_index *ix, const char *wal)
{
	int fd = open(wal, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)ix->wal_keep) != 0)
		jc_log_debug(INDEX, "no room kept in %s: %s", wal, strerror(errno));
	close(fd);
}

void jc__index_close(struct jc_index *ix)
{
	if (!ix)
		return;
	char wal[4200] = "";
	if (ix->wal_keep && ix->db)
		snprintf(wal, sizeof(wal), "%s",
			 sqlite3_filename_wal(sqlite3_db_filename(ix->db, "main")));
	detach(ix);
	jc__idmap_clear(&ix->requests);
	/* The last close left the WAL empty (PERSIST_WAL): the next open
	 * writes its first frames in the room kept. */
	if (wal[0])
		keep_wal_room(ix, wal);
	free(ix);
}

int jc__index_wal_pages(uint64_t max_size)
{
	uint64_t pages = max_size / 16 / 4096;
	return pages < 16 ? 16 : pages > 1000 ? 1000 : (int)pages;
}

int jc__index_set_budget(struct jc_index *ix, uint64_t max_size)
{
	char sql[128];
	int pages = jc__index_wal_pages(max_size);
	snprintf(sql, sizeof(sql), "PRAGMA wal_autocheckpoint=%d; PRAGMA journal_size_limit=%d", pages,
		 pages * 4096);
	int rc = sqlite3_exec(ix->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return fail(ix, rc, "set budget");
	ix->wal_keep = 32 + (uint64_t)pages * (4096 + 24); /* header, frames */
	/* A WAL longer than that (a new index's schema is more than a small
	 * budget's WAL; an upgrade's VACUUM) is cut back now, not at some later
	 * write after it next fills: into the file, emptied, the room kept, as
	 * a restarted daemon finds it. Best effort (a reader may hold it). */
	const char *wal = sqlite3_filename_wal(sqlite3_db_filename(ix->db, "main"));
	struct stat st;
	if (wal && stat(wal, &st) == 0 && st.st_size > (off_t)pages * 4096) {
		if (sqlite3_exec(ix->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) ==
		    SQLITE_OK)
			keep_wal_room(ix, wal);
		else
			jc_log_debug(INDEX, "%s not cut back: %s", wal, sqlite3_errmsg(ix->db));
	}
	return 0;
}

const char *jc__index_errmsg(struct jc_index *ix)
{
	return ix->msg;
}

void jc__entry_clear(struct jc_entry *e)
{
	if (!e)
		return;
	free(e->arch);
	free(e->versions);
	free(e->options);
	free(e->source_name);
	free(e->app_abi);
	free(e->log);
	for (size_t i = 0; i < e->n_lowered; i++) {
		free(e->lowered[i].expr);
		free(e->lowered[i].lowered);
	}
	free(e->lowered);
	memset(e, 0, sizeof(*e));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* One length-prefixed string of the lowered blob into a new C string. */
static int take_str(const uint8_t **p, const uint8_t *end, char **out)
{
	uint32_t len;

	if (end - *p < 4)
		return JC_ECORRUPT;
	len = get32(*p);
	*p += 4;
	if ((size_t)(end - *p) < len)
		return JC_ECORRUPT;
	*out = strndup((const char *)*p, len);
	*p += len;
	return *out ? 0 : JC_ENOMEM;
}

static int decode_lowered(const uint8_t *p, size_t size, struct jc_entry *e)
{
	const uint8_t *end = p + size;
	size_t cap = size / 8; /* each pair takes at least 8 bytes */
	int rc;

	if (!size)
		return 0;
	e->lowered = calloc(cap, sizeof(*e->lowered));
	if (!e->lowered)
		return JC_ENOMEM;
	while (p < end) {
		struct jc_lowered *l = &e->lowered[e->n_lowered];

		if (e->n_lowered == cap)
			return JC_ECORRUPT;
		e->n_lowered++;
		rc = take_str(&p, end, &l->expr);
		if (!rc)
			rc = take_str(&p, end, &l->lowered);
		if (rc)
			return rc;
	}
	return 0;
}

/* The lowered blob of e, malloc'd into *out (NULL when there are none). */
static int encode_lowered(const struct jc_entry *e, uint8_t **out, size_t *size)
{
	size_t n = 0;
	uint8_t *p;

	*out = NULL;
	*size = 0;
	for (size_t i = 0; i < e->n_lowered; i++) {
		size_t a = strlen(e->lowered[i].expr), b = strlen(e->lowered[i].lowered);

		if (a > UINT32_MAX || b > UINT32_MAX)
			return JC_EINVAL;
		n += 8 + a + b;
	}
	if (!n)
		return 0;
	p = *out = malloc(n);
	if (!p)
		return JC_ENOMEM;
	for (size_t i = 0; i < e->n_lowered; i++) {
		const char *s[2] = { e->lowered[i].expr, e->lowered[i].lowered };

		for (int j = 0; j < 2; j++) {
			size_t len = strlen(s[j]);

			put32(p, (uint32_t)len);
			memcpy(p + 4, s[j], len);
			p += 4 + len;
		}
	}
	*size = n;
	return 0;
}

static int copy_text(sqlite3_stmt *st, int col, char **out)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	*out = strdup(t ? (const char *)t : "");
	return *out ? 0 : JC_ENOMEM;
}

static int copy_hash(sqlite3_stmt *st, int col, uint8_t out[16])
{
	const void *b = sqlite3_column_blob(st, col);

	if (!b) {
		memset(out, 0, 16);
		return 0;
	}
	if (sqlite3_column_bytes(st, col) != 16)
		return JC_ECORRUPT;
	memcpy(out, b, 16);
	return 0;
}

/* The current row into *e (overwritten; cleared again on failure). */
static int row_to_entry(sqlite3_stmt *st, struct jc_entry *e)
{
	static const int text_cols[] = { C_ARCH, C_VERSIONS, C_OPTIONS, C_SOURCE_NAME,
					 C_APP_ABI, C_LOG };
	char **text[] = { &e->arch, &e->versions, &e->options, &e->source_name, &e->app_abi,
			  &e->log };
	int rc;

	memset(e, 0, sizeof(*e));
	e->status = sqlite3_column_int(st, C_STATUS);
	e->error = sqlite3_column_int(st, C_ERROR);
	e->size = (uint64_t)sqlite3_column_int64(st, C_SIZE);
	e->output = (uint32_t)sqlite3_column_int64(st, C_OUTPUT);
	e->created = sqlite3_column_int64(st, C_CREATED);
	e->last_access = sqlite3_column_int64(st, C_LAST_ACCESS);
	e->expires = sqlite3_column_int64(st, C_EXPIRES);
	e->hits = (uint64_t)sqlite3_column_int64(st, C_HITS);
	e->compile_ns = (uint64_t)sqlite3_column_int64(st, C_COMPILE_NS);
	e->charge = (uint64_t)sqlite3_column_int64(st, C_CHARGE);
	rc = copy_hash(st, C_KEY, e->key);
	if (!rc)
		rc = copy_hash(st, C_OBJECT, e->object);
	for (size_t i = 0; !rc && i < sizeof(text_cols) / sizeof(text_cols[0]); i++)
		rc = copy_text(st, text_cols[i], text[i]);
	if (!rc)
		rc = decode_lowered(sqlite3_column_blob(st, C_LOWERED),
				    (size_t)sqlite3_column_bytes(st, C_LOWERED), e);
	if (rc)
		jc__entry_clear(e);
	return rc;
}

/* Steps a bound point lookup into *out, then resets it. */
static int get_row(struct jc_index *ix, sqlite3_stmt *st, struct jc_entry *out)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		rc = row_to_entry(st, out);
		if (rc == JC_ECORRUPT)
			snprintf(ix->msg, sizeof(ix->msg), "get: malformed entry row");
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : fail(ix, rc, "get");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_get(struct jc_index *ix, const uint8_t key[16], struct jc_entry *out)
{
	sqlite3_stmt *st = ix->st[ST_GET];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	return rc == SQLITE_OK ? get_row(ix, st, out) : fail(ix, rc, "get");
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

int jc__index_put(struct jc_index *ix, const struct jc_entry *e)
{
	sqlite3_stmt *st = ix->st[ST_PUT];
	const char *text[] = { e->arch, e->versions, e->options, e->source_name, e->app_abi,
			       e->log };
	static const int text_cols[] = { C_ARCH, C_VERSIONS, C_OPTIONS, C_SOURCE_NAME,
					 C_APP_ABI, C_LOG };
	const int64_t ints[][2] = {
		{ C_STATUS, e->status }, { C_ERROR, e->error }, { C_SIZE, (int64_t)e->size },
		{ C_OUTPUT, e->output }, { C_CREATED, e->created },
		{ C_LAST_ACCESS, e->last_access }, { C_EXPIRES, e->expires },
		{ C_HITS, (int64_t)e->hits }, { C_COMPILE_NS, (int64_t)e->compile_ns },
	};
	uint8_t *lowered;
	size_t n_lowered;
	int rc;

	if (e->status != JC_ENTRY_OK && e->status != JC_ENTRY_FAILED) {
		snprintf(ix->msg, sizeof(ix->msg), "put: bad status %d", e->status);
		return JC_EINVAL;
	}
	rc = encode_lowered(e, &lowered, &n_lowered);
	if (rc)
		return rc;
	/* Parameter ?N binds column N-1 of COLS. */
	rc = sqlite3_bind_blob(st, C_KEY + 1, e->key, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = e->status == JC_ENTRY_OK ?
			sqlite3_bind_blob(st, C_OBJECT + 1, e->object, 16, SQLITE_STATIC) :
			sqlite3_bind_null(st, C_OBJECT + 1);
	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(ints) / sizeof(ints[0]); i++)
		rc = sqlite3_bind_int64(st, (int)ints[i][0] + 1, ints[i][1]);
	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(text) / sizeof(text[0]); i++)
		rc = sqlite3_bind_text(st, text_cols[i] + 1, or_empty(text[i]), -1, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = lowered ? sqlite3_bind_blob64(st, C_LOWERED + 1, lowered, n_lowered,
						   SQLITE_STATIC) :
			       sqlite3_bind_null(st, C_LOWERED + 1);
	rc = rc == SQLITE_OK ? step_done(ix, st, "put") : fail(ix, rc, "put");
	sqlite3_clear_bindings(st);
	free(lowered);
	return rc;
}

int jc__index_put_many(struct jc_index *ix, const struct jc_entry *e, size_t n)
{
	int rc;

	if (!n)
		return 0;
	rc = tx(ix, ST_BEGIN);
	for (size_t i = 0; !rc && i < n; i++)
		rc = jc__index_put(ix, &e[i]);
	return tx_end(ix, rc);
}

int jc__index_delete(struct jc_index *ix, const uint8_t key[16])
{
	sqlite3_stmt *st = ix->st[ST_DELETE];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	rc = rc == SQLITE_OK ? step_done(ix, st, "delete") : fail(ix, rc, "delete");
	if (!rc && sqlite3_changes(ix->db) == 0)
		return JC_ENOTFOUND;
	return rc;
}

/* Records that uid used key (hits more) at now; nothing when key is gone. */
static int use(struct jc_index *ix, const uint8_t key[16], uint32_t uid, int64_t now,
	       uint32_t hits)
{
	sqlite3_stmt *st = ix->st[ST_USE];
	int b = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (b == SQLITE_OK)
		b = sqlite3_bind_int64(st, 2, uid);
	if (b == SQLITE_OK)
		b = sqlite3_bind_int64(st, 3, now);
	if (b == SQLITE_OK)
		b = sqlite3_bind_int64(st, 4, hits);
	return b == SQLITE_OK ? step_done(ix, st, "use") : fail(ix, b, "use");
}

int jc__index_touch(struct jc_index *ix, const uint8_t (*keys)[16], const uint32_t *hits,
		    const uint32_t *uids, size_t n, int64_t now)
{
	sqlite3_stmt *st = ix->st[ST_TOUCH];
	int rc;

	if (!n)
		return 0;
	rc = tx(ix, ST_BEGIN);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		int b = sqlite3_bind_blob(st, 1, keys[i], 16, SQLITE_STATIC);

		if (b == SQLITE_OK)
			b = sqlite3_bind_int64(st, 2, hits ? hits[i] : 0);
		if (b == SQLITE_OK)
			b = sqlite3_bind_int64(st, 3, now);
		rc = b == SQLITE_OK ? step_done(ix, st, "touch") : fail(ix, b, "touch");
		if (!rc && uids)
			rc = use(ix, keys[i], uids[i], now, hits ? hits[i] : 0);
	}
	return tx_end(ix, rc);
}

int jc__index_put_user(struct jc_index *ix, const struct jc_entry *e, uint32_t uid)
{
	int rc = tx(ix, ST_BEGIN);

	rc = rc ? rc : jc__index_put(ix, e);
	rc = rc ? rc : use(ix, e->key, uid, e->last_access, 0);
	return tx_end(ix, rc);
}

int jc__index_get_user(struct jc_index *ix, const uint8_t key[16], uint32_t uid,
		       struct jc_entry *out)
{
	sqlite3_stmt *st = ix->st[ST_GET_USER];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, uid);
	return rc == SQLITE_OK ? get_row(ix, st, out) : fail(ix, rc, "get");
}

int jc__index_unuse(struct jc_index *ix, const uint8_t key[16], uint32_t uid, uint64_t *left)
{
	sqlite3_stmt *st = ix->st[ST_UNUSE];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, uid);
	rc = rc == SQLITE_OK ? step_done(ix, st, "unuse") : fail(ix, rc, "unuse");
	if (rc)
		return rc;
	*left = 0;
	return jc__index_users_of(ix, key, NULL, left);
}

int jc__index_users_of(struct jc_index *ix, const uint8_t key[16], uint32_t *uids,
		       uint64_t *n)
{
	sqlite3_stmt *st = ix->st[ST_USERS_OF];
	uint64_t cap = *n, found = 0;
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc != SQLITE_OK)
		return fail(ix, rc, "users of");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (uids && found < cap)
			uids[found] = (uint32_t)sqlite3_column_int64(st, 0);
		found++;
	}
	rc = rc == SQLITE_DONE ? 0 : fail(ix, rc, "users of");
	sqlite3_reset(st);
	*n = found;
	return rc;
}

int jc__index_keys_with_prefix(struct jc_index *ix, const char *hex, int64_t uid, uint8_t (*keys)[16],
			       size_t *n)
{
	uint8_t lo[16], hi[16];
	size_t len = strlen(hex), cap = *n, found = 0;
	if (len == 0 || len > 32)
		return JC_EINVAL;
	memset(lo, 0, sizeof(lo));
	memset(hi, 0xff, sizeof(hi));
	for (size_t i = 0; i < len; i++) {
		char c = hex[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (v < 0)
			return JC_EINVAL;
		int shift = i % 2 ? 0 : 4;
		lo[i / 2] = (uint8_t)((lo[i / 2] & ~(0xf << shift)) | (v << shift));
		hi[i / 2] = (uint8_t)((hi[i / 2] & ~(0xf << shift)) | (v << shift));
	}
	sqlite3_stmt *st = ix->st[uid < 0 ? ST_PREFIX : ST_PREFIX_USER];
	int rc = sqlite3_bind_blob(st, 1, lo, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_blob(st, 2, hi, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, (int64_t)cap);
	if (rc == SQLITE_OK && uid >= 0)
		rc = sqlite3_bind_int64(st, 4, uid);
	if (rc != SQLITE_OK)
		return fail(ix, rc, "key prefix");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (found < cap && sqlite3_column_bytes(st, 0) == 16)
			memcpy(keys[found++], sqlite3_column_blob(st, 0), 16);
	}
	rc = rc == SQLITE_DONE ? 0 : fail(ix, rc, "key prefix");
	sqlite3_reset(st);
	*n = found;
	return rc;
}

static void user_totals_of(sqlite3_stmt *st, int col, struct jc_user_totals *t)
{
	t->entries = (uint64_t)sqlite3_column_int64(st, col);
	t->negative = (uint64_t)sqlite3_column_int64(st, col + 1);
	t->bytes = (uint64_t)sqlite3_column_int64(st, col + 2);
	t->hits = (uint64_t)sqlite3_column_int64(st, col + 3);
	t->stored = (uint64_t)sqlite3_column_int64(st, col + 4);
}

int jc__index_user_totals(struct jc_index *ix, uint32_t uid, struct jc_user_totals *t)
{
	sqlite3_stmt *st = ix->st[ST_USER_TOTALS];
	int rc = sqlite3_bind_int64(st, 1, uid);

	memset(t, 0, sizeof(*t));
	t->uid = uid;
	if (rc != SQLITE_OK)
		return fail(ix, rc, "user totals");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		user_totals_of(st, 0, t);
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(ix, rc, "user totals");
	sqlite3_reset(st);
	return rc;
}

int jc__index_foreach_user_totals(struct jc_index *ix,
				  int (*cb)(const struct jc_user_totals *t, void *ctx), void *ctx)
{
	sqlite3_stmt *st = ix->st[ST_ALL_USER_TOTALS];
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct jc_user_totals t;

		t.uid = (uint32_t)sqlite3_column_int64(st, 0);
		user_totals_of(st, 1, &t);
		rc = cb(&t, ctx);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : fail(ix, rc, "user totals");
out:
	sqlite3_reset(st);
	return rc;
}

/* Appends " AND <cond>" to the foreach SQL. */
#define ADD(cond) (len += (size_t)snprintf(sql + len, sizeof(sql) - len, " AND %s", (cond)))

int jc__index_foreach(struct jc_index *ix, const struct jc_filter *f,
		      int (*cb)(const struct jc_entry *e, void *ctx), void *ctx)
{
	static const struct jc_filter all;
	static const char from_all[] = "SELECT " COLS ", " CHARGE("e") " FROM entries e WHERE 1";
	/* One uid's view: its rows of users, in its own LRU order (users_lru). */
	static const char from_user[] = "SELECT " COLS_USER ", " CHARGE("e") " FROM users u CROSS JOIN entries e"
					" ON e.key = u.key WHERE u.uid = ?8";
	char sql[sizeof(from_user) + 512];
	size_t len;
	struct jc_entry e;
	sqlite3_stmt *st;
	int rc;

	f = f ? f : &all;
	len = (size_t)snprintf(sql, sizeof(sql), "%s", f->by_uid ? from_user : from_all);
	if (f->status < JC_FILTER_ANY || f->status > JC_FILTER_FAILED) {
		snprintf(ix->msg, sizeof(ix->msg), "foreach: bad status filter %d", f->status);
		return JC_EINVAL;
	}
	/* Numbered parameters: ?1 status, ?2 created, ?3 accessed, ?4 expired, ?5 arch,
	 * ?6 versions, ?7 key; only those of present conditions are bound. */
	if (f->status)
		ADD("e.status = ?1");
	if (f->created_before)
		ADD(f->by_uid ? "u.created < ?2" : "e.created < ?2");
	if (f->accessed_before)
		ADD(f->by_uid ? "u.last_access < ?3" : "e.last_access < ?3");
	if (f->expired_at)
		ADD("e.status = 1 AND e.expires <= ?4");
	if (f->arch)
		ADD("e.arch = ?5");
	if (f->versions_not)
		ADD("e.versions <> ?6");
	if (f->key)
		ADD(f->by_uid ? "u.key = ?7" : "e.key = ?7");
	snprintf(sql + len, sizeof(sql) - len, f->by_uid ? " ORDER BY u.last_access, u.key" :
			  " ORDER BY e.last_access, e.key");

	rc = sqlite3_prepare_v2(ix->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(ix, rc, "foreach");
	if (f->status)
		rc = sqlite3_bind_int(st, 1, f->status == JC_FILTER_OK ? 0 : 1);
	if (rc == SQLITE_OK && f->created_before)
		rc = sqlite3_bind_int64(st, 2, f->created_before);
	if (rc == SQLITE_OK && f->accessed_before)
		rc = sqlite3_bind_int64(st, 3, f->accessed_before);
	if (rc == SQLITE_OK && f->expired_at)
		rc = sqlite3_bind_int64(st, 4, f->expired_at);
	if (rc == SQLITE_OK && f->arch)
		rc = sqlite3_bind_text(st, 5, f->arch, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->versions_not)
		rc = sqlite3_bind_text(st, 6, f->versions_not, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->key)
		rc = sqlite3_bind_blob(st, 7, f->key, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->by_uid)
		rc = sqlite3_bind_int64(st, 8, f->uid);
	if (rc != SQLITE_OK) {
		rc = fail(ix, rc, "foreach");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = row_to_entry(st, &e);
		if (rc) {
			snprintf(ix->msg, sizeof(ix->msg), "foreach: malformed entry row");
			goto out;
		}
		rc = cb(&e, ctx);
		jc__entry_clear(&e);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : fail(ix, rc, "foreach");
out:
	sqlite3_finalize(st);
	return rc;
}
#undef ADD

int jc__index_totals(struct jc_index *ix, uint64_t *entries, uint64_t *negative_entries,
		     uint64_t *bytes)
{
	sqlite3_stmt *st = ix->st[ST_TOTALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		if (entries)
			*entries = (uint64_t)sqlite3_column_int64(st, 0);
		if (negative_entries)
			*negative_entries = (uint64_t)sqlite3_column_int64(st, 1);
		if (bytes)
			*bytes = (uint64_t)sqlite3_column_int64(st, 2);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ECORRUPT : fail(ix, rc, "totals");
		if (rc == JC_ECORRUPT)
			snprintf(ix->msg, sizeof(ix->msg), "totals: row missing");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_stored(struct jc_index *ix, uint64_t *stored)
{
	sqlite3_stmt *st = ix->st[ST_TOTALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*stored = (uint64_t)sqlite3_column_int64(st, 3);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ECORRUPT : fail(ix, rc, "totals");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_reclaim(struct jc_index *ix)
{
	/* The file shrinks when the WAL is copied back into it: now. */
	int rc = sqlite3_exec(ix->db, "PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(PASSIVE)",
			      NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : fail(ix, rc, "incremental vacuum");
}

int jc__index_object_refs(struct jc_index *ix, const uint8_t object[16], uint64_t *n)
{
	sqlite3_stmt *st = ix->st[ST_REFS];
	int rc = sqlite3_bind_blob(st, 1, object, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = fail(ix, rc, "object refs");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_counters_load(struct jc_index *ix,
			    int (*cb)(const char *name, uint64_t value, void *ctx), void *ctx)
{
	sqlite3_stmt *st = ix->st[ST_CNT_LOAD];
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(st, 0);

		rc = cb(name ? (const char *)name : "",
			(uint64_t)sqlite3_column_int64(st, 1), ctx);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : fail(ix, rc, "counters load");
out:
	sqlite3_reset(st);
	return rc;
}

int jc__index_counters_save(struct jc_index *ix, const char *const *names,
			    const uint64_t *values, size_t n)
{
	sqlite3_stmt *st = ix->st[ST_CNT_SAVE];
	int rc;

	if (!n)
		return 0;
	rc = tx(ix, ST_BEGIN);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		int b = sqlite3_bind_text(st, 1, names[i], -1, SQLITE_STATIC);

		if (b == SQLITE_OK)
			b = sqlite3_bind_int64(st, 2, (int64_t)values[i]);
		rc = b == SQLITE_OK ? step_done(ix, st, "counters save") :
				      fail(ix, b, "counters save");
	}
	return tx_end(ix, rc);
}

/* --- kept requests (schema 3) ---------------------------------------------- */

/* Steps st (bound) for no row, then resets it. */
static int bound_done(struct jc_index *ix, sqlite3_stmt *st, int rc, const char *what)
{
	if (rc != SQLITE_OK) {
		sqlite3_reset(st);
		return fail(ix, rc, what);
	}
	return step_done(ix, st, what);
}

int jc__index_request_data(struct jc_index *ix, int64_t id, uint8_t **data, size_t *len)
{
	sqlite3_stmt *st = ix->st[ST_REQ_DATA];
	int rc = sqlite3_bind_int64(st, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(st, 0);
		const void *p = sqlite3_column_blob(st, 0);
		*data = malloc(n ? n : 1);
		if (*data) {
			if (n)
				memcpy(*data, p, n);
			*len = n;
			rc = 0;
		} else {
			rc = JC_ENOMEM;
		}
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : fail(ix, rc, "request data");
	}
	sqlite3_reset(st);
	return rc;
}

/* ix->requests from the table, when it is not built yet or holds more ids
 * of removed rows than of rows (a request goes with its last entry). */
static int map_requests(struct jc_index *ix)
{
	uint64_t n = 0, bytes;
	int rc = ix->requests_mapped ? jc__index_request_totals(ix, &n, &bytes) : 0;
	if (rc != 0 || (ix->requests_mapped && ix->requests.n <= 2 * n + 64))
		return rc;
	jc__idmap_clear(&ix->requests);
	ix->requests_mapped = 0;
	sqlite3_stmt *st = ix->st[ST_REQ_SCAN];
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (jc__idmap_add(&ix->requests, (uint32_t)sqlite3_column_int64(st, 1),
				  sqlite3_column_int64(st, 0)) != 0)
			break;
	sqlite3_reset(st);
	if (rc == SQLITE_ROW) {
		jc__idmap_clear(&ix->requests);
		return JC_ENOMEM;
	}
	if (rc != SQLITE_DONE)
		return fail(ix, rc, "map requests");
	ix->requests_mapped = 1;
	return 0;
}

/* The id of the request of hash whose bytes are data (len), into *id;
 * JC_ENOTFOUND when there is none. */
static int find_request(struct jc_index *ix, uint32_t hash, const void *data, size_t len,
			int64_t *id)
{
	int rc = map_requests(ix);
	sqlite3_stmt *st = ix->st[ST_REQ_DATA];
	size_t pos = 0;
	int64_t cand;
	while (rc == 0 && jc__idmap_next(&ix->requests, hash, &pos, &cand)) {
		/* a row since removed, or its id taken by other bytes: skipped */
		rc = sqlite3_bind_int64(st, 1, cand);
		if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			int same = (size_t)sqlite3_column_bytes(st, 0) == len &&
				   memcmp(sqlite3_column_blob(st, 0), data, len) == 0;
			sqlite3_reset(st);
			if (same) {
				*id = cand;
				return 0;
			}
			rc = SQLITE_OK;
			continue;
		}
		sqlite3_reset(st);
		rc = rc == SQLITE_DONE ? 0 : fail(ix, rc, "find request");
	}
	return rc ? rc : JC_ENOTFOUND;
}

int jc__index_keep_request(struct jc_index *ix, const uint8_t key[16], uint32_t hash, uint32_t uid,
			   const void *data, size_t len)
{
	int64_t id = 0;
	int rc = tx(ix, ST_BEGIN);
	if (rc != 0)
		return rc;
	rc = find_request(ix, hash, data, len, &id);
	sqlite3_stmt *st = ix->st[ST_REQ_PUT];
	if (rc == JC_ENOTFOUND) {
		int b = sqlite3_bind_int64(st, 1, hash);
		b = b ?: sqlite3_bind_int64(st, 2, uid);
		b = b ?: sqlite3_bind_blob(st, 3, data, (int)len, SQLITE_STATIC);
		rc = bound_done(ix, st, b, "keep request");
		id = sqlite3_last_insert_rowid(ix->db);
		/* a rolled-back row's id stays mapped: find_request skips it */
		if (rc == 0 && jc__idmap_add(&ix->requests, hash, id) != 0)
			ix->requests_mapped = 0; /* rebuilt at the next keep */
	}
	st = ix->st[ST_REQ_LINK];
	if (rc == 0) {
		int b = sqlite3_bind_int64(st, 1, id);
		b = b ?: sqlite3_bind_blob(st, 2, key, 16, SQLITE_STATIC);
		rc = bound_done(ix, st, b, "keep request");
	}
	/* no entry (gone meanwhile), or it names another: none left unnamed */
	st = ix->st[ST_REQ_UNUSED];
	if (rc == 0)
		rc = bound_done(ix, st, sqlite3_bind_int64(st, 1, id), "keep request");
	return tx_end(ix, rc);
}

int jc__index_get_request(struct jc_index *ix, const uint8_t key[16], struct jc_kept *out)
{
	sqlite3_stmt *st = ix->st[ST_REQ_GET];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memcpy(out->key, key, 16);
		out->id = sqlite3_column_int64(st, 0);
		out->size = (uint64_t)sqlite3_column_int64(st, 1);
		out->uid = (uint32_t)sqlite3_column_int64(st, 2);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : fail(ix, rc, "get request");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_request_totals(struct jc_index *ix, uint64_t *requests, uint64_t *bytes)
{
	sqlite3_stmt *st = ix->st[ST_REQ_TOTALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*requests = (uint64_t)sqlite3_column_int64(st, 0);
		*bytes = (uint64_t)sqlite3_column_int64(st, 1);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ECORRUPT : fail(ix, rc, "request totals");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_meta_get(struct jc_index *ix, const char *name, char *out, size_t cap)
{
	sqlite3_stmt *st = ix->st[ST_META_GET];
	int rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 0);
		snprintf(out, cap, "%s", v ? v : "");
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : fail(ix, rc, "meta");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_meta_set(struct jc_index *ix, const char *name, const char *value)
{
	sqlite3_stmt *st = ix->st[ST_META_SET];
	int rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);

	rc = rc ?: sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
	if (rc != SQLITE_OK) {
		sqlite3_reset(st);
		return fail(ix, rc, "meta");
	}
	return step_done(ix, st, "meta");
}

int jc__index_foreach_request(struct jc_index *ix, const struct jc_kept_filter *f,
			      int (*cb)(const struct jc_kept *k, void *ctx), void *ctx)
{
	/* Value: hits (the first use counts as one) over days since the last
	 * use plus one: a kernel used daily outranks one used a lot, once. */
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "SELECT e.key, r.id, length(r.data), r.uid, e.versions, e.source_name, e.hits,"
		 " e.last_access FROM entries e CROSS JOIN requests r ON r.id = e.request"
		 " WHERE 1%s%s%s"
		 " ORDER BY (e.hits + 1.0) / (1.0 + max(0, ?1 - e.last_access) / 86400.0) DESC,"
		 " e.key LIMIT ?5",
		 /* ... and not made for that identity already (its request is
		  * shared): the subquery runs once */
		 f->versions_not ? " AND e.versions <> ?2 AND r.id NOT IN (SELECT request FROM entries"
				   " WHERE versions = ?2 AND request IS NOT NULL)" : "",
		 f->accessed_since ? " AND e.last_access >= ?3" : "",
		 f->by_uid ? " AND r.uid = ?4" : "");
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(ix->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(ix, rc, "foreach request");
	rc = sqlite3_bind_int64(st, 1, f->now);
	if (rc == SQLITE_OK && f->versions_not)
		rc = sqlite3_bind_text(st, 2, f->versions_not, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->accessed_since)
		rc = sqlite3_bind_int64(st, 3, f->accessed_since);
	if (rc == SQLITE_OK && f->by_uid)
		rc = sqlite3_bind_int64(st, 4, f->uid);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, f->top ? (sqlite3_int64)f->top : -1);
	if (rc != SQLITE_OK) {
		rc = fail(ix, rc, "foreach request");
		sqlite3_finalize(st);
		return rc;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct jc_kept k = {0};
		if (sqlite3_column_bytes(st, 0) != 16) {
			snprintf(ix->msg, sizeof(ix->msg), "entry row: bad key column");
			rc = JC_ECORRUPT;
			break;
		}
		memcpy(k.key, sqlite3_column_blob(st, 0), 16);
		k.id = sqlite3_column_int64(st, 1);
		k.size = (uint64_t)sqlite3_column_int64(st, 2);
		k.uid = (uint32_t)sqlite3_column_int64(st, 3);
		const char *v = (const char *)sqlite3_column_text(st, 4);
		const char *n = (const char *)sqlite3_column_text(st, 5);
		k.versions = v ? v : "";
		k.source_name = n ? n : "";
		k.hits = (uint64_t)sqlite3_column_int64(st, 6);
		k.last_access = sqlite3_column_int64(st, 7);
		if ((rc = cb(&k, ctx)) != 0)
			break;
	}
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0 && rc != SQLITE_ROW)
		rc = fail(ix, rc, "foreach request");
	sqlite3_finalize(st);
	return rc;
}

int jc__index_count_versions(struct jc_index *ix, const char *versions, uint64_t *n)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(ix->db, "SELECT count(*) FROM entries WHERE versions = ?1", -1,
				    &st, NULL);
	if (rc != SQLITE_OK)
		return fail(ix, rc, "count versions");
	rc = sqlite3_bind_text(st, 1, versions, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = fail(ix, rc, "count versions");
	}
	sqlite3_finalize(st);
	return rc;
}
