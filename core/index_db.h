/* SPDX-License-Identifier: MIT */
/* What index.c, index_entries.c and index_kept.c share: the connection, its
 * prepared statements and the SQL they are made of. Private to the index
 * (core/index.h is its interface). */
#ifndef JC_INDEX_DB_H
#define JC_INDEX_DB_H

#include <sqlite3.h>
#include <stdint.h>

#include "core/idmap.h"
#include "core/index.h"

/* What an entry costs on disk, its charge (schema 3, index.c): its object
 * in whole 4 KiB blocks, its compile log, lowered names and other text, and
 * ROW_BYTES for the row and its index entries. */
#define ROW_BYTES "256"
#define CHARGE(t)                                                                                  \
	"(CASE WHEN " t ".status = 0 THEN (" t ".size + 4095) / 4096 * 4096 ELSE 0 END"            \
	" + length(CAST(" t ".log AS BLOB)) + coalesce(length(" t ".lowered), 0)"                  \
	" + length(CAST(" t ".options AS BLOB)) + length(CAST(" t ".versions AS BLOB))"            \
	" + length(CAST(" t ".source_name AS BLOB)) + length(CAST(" t ".arch AS BLOB))"            \
	" + length(CAST(" t ".app_abi AS BLOB)) + " ROW_BYTES ")"

/* Entry columns, in the order of enum col (key first, large values last). */
#define COLS                                                                                       \
	"key, status, error, object, size, output, arch, versions, options, "                      \
	"source_name, app_abi, created, last_access, expires, hits, compile_ns, log, lowered"
enum col {
	C_KEY,
	C_STATUS,
	C_ERROR,
	C_OBJECT,
	C_SIZE,
	C_OUTPUT,
	C_ARCH,
	C_VERSIONS,
	C_OPTIONS,
	C_SOURCE_NAME,
	C_APP_ABI,
	C_CREATED,
	C_LAST_ACCESS,
	C_EXPIRES,
	C_HITS,
	C_COMPILE_NS,
	C_LOG,
	C_LOWERED,
	C_CHARGE, /* selected, not stored: CHARGE of the row */
};

/* The same columns for one uid's view (users u CROSS JOIN entries e): that
 * uid's own created, last_access and hits in place of the entry's. */
#define COLS_USER                                                                                  \
	"e.key, e.status, e.error, e.object, e.size, e.output, e.arch, e.versions,"                \
	" e.options, e.source_name, e.app_abi, u.created, u.last_access, e.expires,"               \
	" u.hits, e.compile_ns, e.log, e.lowered"

enum stmt {
	ST_GET,
	ST_PUT,
	ST_DELETE,
	ST_TOUCH,
	ST_TOTALS,
	ST_REFS,
	ST_CNT_LOAD,
	ST_CNT_SAVE,
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_USE,
	ST_GET_USER,
	ST_UNUSE,
	ST_USERS_OF,
	ST_USER_TOTALS,
	ST_ALL_USER_TOTALS,
	ST_PREFIX,
	ST_PREFIX_USER,
	ST_REQ_SCAN,
	ST_REQ_PUT,
	ST_REQ_LINK,
	ST_REQ_UNUSED,
	ST_REQ_DATA,
	ST_REQ_GET,
	ST_REQ_TOTALS,
	ST_META_GET,
	ST_META_SET,
	ST__N
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

/* Records "what: sqlite message" in ix (jc__index_errmsg) and returns rc
 * mapped to a JC_E* code (index.h, "Errors"). */
int jc__index_fail(struct jc_index *ix, int rc, const char *what);

/* Steps a statement that returns no row, then resets it: 0 or
 * jc__index_fail's code. */
int jc__index_step_done(struct jc_index *ix, sqlite3_stmt *st, const char *what);

/* Steps the transaction statement which (ST_BEGIN, ST_COMMIT, ST_ROLLBACK). */
int jc__index_tx(struct jc_index *ix, enum stmt which);

/* Commits, or rolls back after an earlier failure rc (the message of rc
 * kept); returns rc or the commit's. */
int jc__index_tx_end(struct jc_index *ix, int rc);

#endif
