/* SPDX-License-Identifier: MIT */
/* The SQLite index: see index.h for the contract. This file: the schema and
 * its upgrades, opening and closing, the WAL budget, the statements every
 * part uses, counters. Entries and their users: index_entries.c; kept
 * requests and named strings: index_kept.c. */
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

#include "common/log.h"
#include "common/util.h"
#include "core/index_db.h"
#include "jitcache/jitcache.h"

#define APP_ID	       0x4A434348 /* "JCCH" */
#define SCHEMA_VERSION 5
#define FOREIGN	       1 /* internal: the file is not our current schema */

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
 * Schema 3: what each entry costs on disk, its charge (CHARGE, index_db.h: its
 * object in whole 4 KiB blocks, its compile log, lowered names and other
 * text, and ROW_BYTES for the row and its index entries), summed over every
 * entry, ok or failed, into totals.stored and user_totals.stored by the same
 * triggers: the budgets count logs and negative entries (index.h). New
 * indexes use auto_vacuum=INCREMENTAL, so pages that removals free go back
 * to the file system (jc__index_reclaim); schema 2 is upgraded in place
 * (step_2_3) and then vacuumed once into that mode.
 */
#define CHARGE_OF_KEY(k) "coalesce((SELECT " CHARGE("x") " FROM entries x WHERE x.key = " k "), 0)"
#define OK_SIZE_OF_KEY(k)                                                                          \
	"coalesce((SELECT CASE WHEN status = 0 THEN size ELSE 0 END FROM entries WHERE key = " k   \
	"), 0)"
/* The columns CHARGE reads: an update of any of them moves the totals. */
#define CHARGE_COLS "status, size, log, lowered, options, versions, source_name, arch, app_abi"

#define USERS_TABLES_SQL(stored)                                                                   \
	"CREATE TABLE users(key BLOB NOT NULL, uid INTEGER NOT NULL, created INTEGER NOT NULL,"    \
	" last_access INTEGER NOT NULL, hits INTEGER NOT NULL, PRIMARY KEY (key, uid)) WITHOUT "   \
	"ROWID;"                                                                                   \
	"CREATE INDEX users_lru ON users(uid, last_access, key);"                                  \
	"CREATE TABLE user_totals(uid INTEGER PRIMARY KEY, entries INTEGER NOT NULL,"              \
	" negative INTEGER NOT NULL, bytes INTEGER NOT NULL, hits INTEGER NOT NULL" stored ");"

#define DROP_TRIGGERS_SQL                                                                          \
	"DROP TRIGGER IF EXISTS entries_ins; DROP TRIGGER IF EXISTS entries_del;"                  \
	" DROP TRIGGER IF EXISTS entries_upd; DROP TRIGGER IF EXISTS users_ins;"                   \
	" DROP TRIGGER IF EXISTS users_del; DROP TRIGGER IF EXISTS users_upd;"                     \
	" DROP TRIGGER IF EXISTS entries_del_users; DROP TRIGGER IF EXISTS entries_upd_users;"

/* O(1) totals, kept by triggers (put is an upsert, so UPDATE fires). */
#define TRIGGERS_SQL                                                                                                                                                                    \
	"CREATE TRIGGER entries_ins AFTER INSERT ON entries BEGIN"                                                                                                                      \
	" UPDATE totals SET entries = entries + 1, negative = negative + (NEW.status <> 0),"                                                                                            \
	" bytes = bytes + CASE WHEN NEW.status = 0 THEN NEW.size ELSE 0 END,"                                                                                                           \
	" stored = stored + " CHARGE(                                                                                                                                                   \
	    "NEW") "; END;"                                                                                                                                                             \
		   "CREATE TRIGGER entries_del AFTER DELETE ON entries BEGIN"                                                                                                           \
		   " UPDATE totals SET entries = entries - 1, negative = negative - (OLD.status "                                                                                       \
		   "<> 0),"                                                                                                                                                             \
		   " bytes = bytes - CASE WHEN OLD.status = 0 THEN OLD.size ELSE 0 END,"                                                                                                \
		   " stored = stored - " CHARGE(                                                                                                                                        \
		       "OLD") "; END;"                                                                                                                                                  \
			      "CREATE TRIGGER entries_upd AFTER UPDATE OF " CHARGE_COLS                                                                                                 \
			      " ON entries BEGIN"                                                                                                                                       \
			      " UPDATE totals SET negative = negative - (OLD.status <> 0) + "                                                                                           \
			      "(NEW.status <> 0),"                                                                                                                                      \
			      " bytes = bytes - CASE WHEN OLD.status = 0 THEN OLD.size ELSE 0 END"                                                                                      \
			      " + CASE WHEN NEW.status = 0 THEN NEW.size ELSE 0 END,"                                                                                                   \
			      " stored = stored - " CHARGE("OLD") " + " CHARGE(                                                                                                         \
				  "NEW") "; END;"                                                                                                                                       \
					 "CREATE TRIGGER users_ins AFTER INSERT ON users BEGIN"                                                                                         \
					 " INSERT OR IGNORE INTO user_totals VALUES (NEW.uid, 0, "                                                                                      \
					 "0, 0, 0, 0);"                                                                                                                                 \
					 " UPDATE user_totals SET entries = entries + 1, hits = "                                                                                       \
					 "hits + NEW.hits,"                                                                                                                             \
					 " negative = negative + coalesce((SELECT status <> 0 "                                                                                         \
					 "FROM entries WHERE key = NEW.key), 0),"                                                                                                       \
					 " bytes = bytes + " OK_SIZE_OF_KEY(                                                                                                            \
					     "NEW.key") ","                                                                                                                             \
							" stored = stored + " CHARGE_OF_KEY(                                                                                            \
							    "NEW.key") " WHERE uid = NEW.uid; "                                                                                         \
								       "END;"                                                                                                           \
								       "CREATE TRIGGER users_del "                                                                                      \
								       "AFTER DELETE ON users "                                                                                         \
								       "BEGIN"                                                                                                          \
								       " UPDATE user_totals SET "                                                                                       \
								       "entries = entries - 1, "                                                                                        \
								       "hits = hits - OLD.hits,"                                                                                        \
								       " negative = negative - "                                                                                        \
								       "coalesce((SELECT status "                                                                                       \
								       "<> 0 FROM entries WHERE "                                                                                       \
								       "key = OLD.key), 0),"                                                                                            \
								       " bytes = bytes "                                                                                                \
								       "- " OK_SIZE_OF_KEY(                                                                                             \
									   "OLD.key") ","                                                                                               \
										      " stored = "                                                                                      \
										      "stored "                                                                                         \
										      "-"                                                                                               \
										      " " CHARGE_OF_KEY(                                                                                \
											  "OLD."                                                                                        \
											  "key") " WHERE uid = OLD.uid;"                                                                \
												 " DELETE FROM user_totals WHERE uid = OLD.uid AND entries = 0; END;"                   \
												 "CREATE TRIGGER users_upd AFTER UPDATE OF hits ON users BEGIN"                         \
												 " UPDATE user_totals SET hits = hits - OLD.hits + NEW.hits WHERE uid = NEW.uid; END;"  \
												 "CREATE TRIGGER entries_del_users BEFORE DELETE ON entries BEGIN"                      \
												 " DELETE FROM users WHERE key = OLD.key; END;"                                         \
												 "CREATE TRIGGER entries_upd_users AFTER UPDATE OF " CHARGE_COLS                        \
												 " ON entries BEGIN"                                                                    \
												 " UPDATE user_totals SET negative = negative - (OLD.status <> 0) + (NEW.status <> 0)," \
												 " bytes = bytes - CASE WHEN OLD.status = 0 THEN OLD.size ELSE 0 END"                   \
												 " + CASE WHEN NEW.status = 0 THEN NEW.size ELSE 0 END,"                                \
												 " stored = stored - " CHARGE(                                                          \
												     "OLD") " + " CHARGE("NEW") " WHERE uid IN (SELECT uid FROM users WHERE key = NEW.key); END;"

/* Schema 1 -> 2 (%u: the uid existing entries are attributed to), its
 * totals summed here; the triggers are step_2_3's, which follows. */
static const char step_1_2[] = USERS_TABLES_SQL(
    "") "INSERT INTO users SELECT key, %u, created, last_access, hits FROM entries;"
	"INSERT INTO user_totals SELECT u.uid, count(*), sum(e.status <> 0),"
	" sum(CASE WHEN e.status = 0 THEN e.size ELSE 0 END), sum(u.hits)"
	" FROM users u CROSS JOIN entries e ON e.key = u.key GROUP BY u.uid;";

/* Schema 2 -> 3: the stored columns, the triggers that keep them, and
 * their sums. */
static const char step_2_3[] =
    "ALTER TABLE totals ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE user_totals ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;" DROP_TRIGGERS_SQL
	TRIGGERS_SQL "UPDATE totals SET stored = (SELECT coalesce(sum(" CHARGE(
	    "e") "), 0) FROM entries e);"
		 "UPDATE user_totals SET stored = (SELECT coalesce(sum(" CHARGE(
		     "e") "), 0)"
			  " FROM users u CROSS JOIN entries e ON e.key = u.key WHERE u.uid = "
			  "user_totals.uid);";

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
#define REQUESTS_SQL                                                                               \
	"CREATE TABLE requests(id INTEGER PRIMARY KEY, hash INTEGER NOT NULL,"                     \
	" uid INTEGER NOT NULL, refs INTEGER NOT NULL, data BLOB NOT NULL);"                       \
	"ALTER TABLE entries ADD COLUMN request INTEGER;"                                          \
	"CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;"    \
	"ALTER TABLE totals ADD COLUMN requests INTEGER NOT NULL DEFAULT 0;"                       \
	"ALTER TABLE totals ADD COLUMN request_bytes INTEGER NOT NULL DEFAULT 0;"                  \
	"CREATE TRIGGER requests_ins AFTER INSERT ON requests BEGIN"                               \
	" UPDATE totals SET requests = requests + 1, request_bytes = request_bytes +"              \
	" length(NEW.data); END;"                                                                  \
	"CREATE TRIGGER requests_del AFTER DELETE ON requests BEGIN"                               \
	" UPDATE totals SET requests = requests - 1, request_bytes = request_bytes -"              \
	" length(OLD.data); END;"                                                                  \
	"CREATE TRIGGER entries_upd_request AFTER UPDATE OF request ON entries BEGIN"              \
	" UPDATE requests SET refs = refs + 1 WHERE id = NEW.request;"                             \
	" UPDATE requests SET refs = refs - 1 WHERE id = OLD.request;"                             \
	" DELETE FROM requests WHERE id = OLD.request AND refs <= 0; END;"                         \
	"CREATE TRIGGER entries_del_request AFTER DELETE ON entries"                               \
	" WHEN OLD.request IS NOT NULL BEGIN"                                                      \
	" UPDATE requests SET refs = refs - 1 WHERE id = OLD.request;"                             \
	" DELETE FROM requests WHERE id = OLD.request AND refs <= 0; END;"

static const char step_3_4[] = REQUESTS_SQL;
static const char step_4_5[] = "DROP INDEX IF EXISTS requests_hash;";

static const char schema_sql[] =
    "CREATE TABLE entries("
    " key BLOB PRIMARY KEY NOT NULL,"
    " status INTEGER NOT NULL CHECK (status IN (0, 1)),"
    " error INTEGER NOT NULL,"
    " object BLOB," /* NULL for failures */
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
    " lowered BLOB);" /* (u32le len, expr, u32le len, lowered)* */
    "CREATE INDEX entries_lru ON entries(last_access, key);"
    "CREATE INDEX entries_object ON entries(object) WHERE object IS NOT NULL;"
    "CREATE TABLE counters(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)"
    " WITHOUT ROWID;"
    "CREATE TABLE totals(id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL,"
    " negative INTEGER NOT NULL, bytes INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0);"
    "INSERT INTO totals VALUES (0, 0, 0, 0, 0);" USERS_TABLES_SQL(
	", stored INTEGER NOT NULL DEFAULT 0") TRIGGERS_SQL REQUESTS_SQL;

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
    [ST_TOTALS] =
	"SELECT entries, negative, bytes, stored + request_bytes FROM totals WHERE id = 0",
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
    [ST_GET_USER] =
	"SELECT " COLS_USER ", " CHARGE("e") " FROM users u CROSS JOIN entries e ON e.key = u.key"
					     " WHERE u.key = ?1 AND u.uid = ?2",
    [ST_UNUSE] = "DELETE FROM users WHERE key = ?1 AND uid = ?2",
    [ST_USERS_OF] = "SELECT uid FROM users WHERE key = ?1 ORDER BY uid",
    /* keys between two 16-byte bounds (a hex prefix padded with 0s, with fs) */
    [ST_PREFIX] = "SELECT key FROM entries WHERE key BETWEEN ?1 AND ?2 ORDER BY key LIMIT ?3",
    [ST_PREFIX_USER] = "SELECT key FROM users WHERE key BETWEEN ?1 AND ?2 AND uid = ?4"
		       " ORDER BY key LIMIT ?3",
    [ST_USER_TOTALS] =
	"SELECT entries, negative, bytes, hits, stored FROM user_totals WHERE uid = ?1",
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

int jc__index_fail(struct jc_index *ix, int rc, const char *what)
{
	snprintf(ix->msg, sizeof(ix->msg), "%s: %s (SQLite code %d)", what, sqlite3_errmsg(ix->db),
		 rc);
	return map_rc(ix->db, rc);
}

int jc__index_step_done(struct jc_index *ix, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st), out = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, what);

	sqlite3_reset(st);
	return out;
}

int jc__index_tx(struct jc_index *ix, enum stmt which)
{
	return jc__index_step_done(ix, ix->st[which], stmt_sql[which]);
}

int jc__index_tx_end(struct jc_index *ix, int rc)
{
	if (rc == 0)
		rc = jc__index_tx(ix, ST_COMMIT);
	if (rc && !sqlite3_get_autocommit(ix->db)) {
		char keep[sizeof(ix->msg)];

		memcpy(keep, ix->msg, sizeof(keep));
		jc__index_tx(ix, ST_ROLLBACK);
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

		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d; COMMIT",
			 SCHEMA_VERSION);
		rc = sqlite3_exec(db, pragma, NULL, NULL, msg);
	}
	if (rc != SQLITE_OK)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_free(step);
	/* Pages freed later go back to the file system (jc__index_reclaim): the
	 * mode takes one VACUUM, which needs room for a copy of the file. */
	if (rc == SQLITE_OK && from <= 2 &&
	    sqlite3_exec(db, "PRAGMA auto_vacuum = INCREMENTAL; VACUUM", NULL, NULL, NULL) !=
		SQLITE_OK)
		jc_log_warn(INDEX,
			    "%s: not vacuumed into incremental mode (%s): freed pages stay in "
			    "the file until a later start manages it",
			    path, sqlite3_errmsg(db));
	return rc;
}

/*
 * Opens the connection, checks the schema (creating it in an empty writable
 * file), sets WAL and prepares every statement. Returns 0, FOREIGN (err says
 * why) or a JC_E* code. The caller detaches on failure.
 */
static int attach(struct jc_index *ix, const char *path, int readonly, char *err, size_t errlen)
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
			const char *then =
			    !readonly ? ""
			    : app == APP_ID && ver >= 1 && ver < SCHEMA_VERSION
				? " (jitcached upgrades it in place, keeping its entries)"
				: " (jitcached moves it aside and starts afresh)";
			if (app == APP_ID)
				jc__fail(err, errlen, 0,
					 "%s has index schema version %lld; this "
					 "jitcached uses %d%s",
					 path, (long long)ver, SCHEMA_VERSION, then);
			else
				jc__fail(err, errlen, 0,
					 "%s is not a jitcache index (application_id "
					 "%lld)%s",
					 path, (long long)app, then);
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
		if (!tables && (rc = sqlite3_exec(ix->db, "PRAGMA auto_vacuum = INCREMENTAL", NULL,
						  NULL, NULL)) != SQLITE_OK)
			goto sqlite_fail;
		rc = sqlite3_exec(ix->db,
				  "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
				  " PRAGMA journal_size_limit=4194304; PRAGMA cache_size=-65536",
				  NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			goto sqlite_fail;
		if (pragma_int(ix->db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode",
			       &wal) != SQLITE_OK ||
		    !wal) {
			jc__fail(err, errlen, 0,
				 "%s: SQLite cannot use WAL mode here (a network or "
				 "unusual filesystem?)",
				 path);
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
		jc_log_notice(INDEX, "upgraded index %s from schema %lld to %d%s", path,
			      (long long)ver, SCHEMA_VERSION,
			      ver == 1 ? ": existing entries belong to its owner's uid" : "");
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

int jc__index_open(const char *path, int readonly, struct jc_index **out, char *err, size_t errlen)
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
		jc_log_warn(INDEX,
			    "%s; moved it to %s and started an empty index (the cache "
			    "starts cold)",
			    why, aside);
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
	snprintf(sql, sizeof(sql), "PRAGMA wal_autocheckpoint=%d; PRAGMA journal_size_limit=%d",
		 pages, pages * 4096);
	int rc = sqlite3_exec(ix->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "set budget");
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

int jc__index_counters_load(struct jc_index *ix,
			    int (*cb)(const char *name, uint64_t value, void *ctx), void *ctx)
{
	sqlite3_stmt *st = ix->st[ST_CNT_LOAD];
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(st, 0);

		rc = cb(name ? (const char *)name : "", (uint64_t)sqlite3_column_int64(st, 1), ctx);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "counters load");
out:
	sqlite3_reset(st);
	return rc;
}

int jc__index_counters_save(struct jc_index *ix, const char *const *names, const uint64_t *values,
			    size_t n)
{
	sqlite3_stmt *st = ix->st[ST_CNT_SAVE];
	int rc;

	if (!n)
		return 0;
	rc = jc__index_tx(ix, ST_BEGIN);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		int b = sqlite3_bind_text(st, 1, names[i], -1, SQLITE_STATIC);

		if (b == SQLITE_OK)
			b = sqlite3_bind_int64(st, 2, (int64_t)values[i]);
		rc = b == SQLITE_OK ? jc__index_step_done(ix, st, "counters save")
				    : jc__index_fail(ix, b, "counters save");
	}
	return jc__index_tx_end(ix, rc);
}
