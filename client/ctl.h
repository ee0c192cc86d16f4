/* SPDX-License-Identifier: MIT */
/*
 * What jitcachectl's files share (ctl.c: main, inspect, config, stop;
 * ctl_common.c: help, messages, connections and the admin round trip;
 * ctl_io.c: files in and out; ctl_compile.c; ctl_admin.c; ctl_rewarm.c).
 * Private to jitcachectl; single-threaded.
 */
#ifndef JC_CTL_H
#define JC_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client/client_internal.h"
#include "proto/proto.h"

/* --socket and --cache-dir as given (NULL: not given); set once by main. */
extern const char *jc__ctl_socket;
extern const char *jc__ctl_cache_dir;

/* "jitcachectl: " and the message on stderr; returns code (the exit status). */
int jc__ctl_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* COMMAND's usage (the help table in ctl_common.c, the daemon's commands'
 * from the admin table) to f. */
void jc__ctl_sub_usage(FILE *f, const char *name);
/* jitcachectl's usage: the options and every command's synopsis, to f. */
void jc__ctl_usage(FILE *f);
/* COMMAND's help text, NULL for an unknown command. */
const char *jc__ctl_find_sub(const char *name);

/* A client for: 0 an admin command (a running daemon only), 1 a compile (a
 * daemon found or started, else in-process unless a daemon was named), 2 an
 * import (a daemon found or started, never in-process). 0 or the client
 * library's code (its message in jc_client_errmsg(NULL)). */
int jc__ctl_open_client(int compile, jc_client **c);
/* jc__ctl_open_client(1): the client, or NULL with *rc set and the reason printed. */
jc_client *jc__ctl_connect_or_die(int *rc);
/* Sends an admin command (args may be NULL), falling back to the cache
 * directory offline when offline_ok; *out filled (free with
 * jc__admin_reply_clear). 0, or an exit status with the reason printed. */
int jc__ctl_admin(const char *command, const struct jc_strv *args, int offline_ok,
		  struct jc_admin_reply *out);

/* A record's field: an integer (0 when absent), an unsigned one, a string ("" when absent). */
int64_t jc__ctl_geti(const struct jc_record *r, const char *name);
uint64_t jc__ctl_getu(const struct jc_record *r, const char *name);
const char *jc__ctl_gets(const struct jc_record *r, const char *name);

/* The bytes of path, malloc'd; -1 with errno (EFBIG past JC_FRAME_MAX). */
int jc__ctl_read_file(const char *path, uint8_t **data, size_t *size);
/* Writes an artifact to path ("-": stdout) by -o's rules (ctl_io.c); 0, or -1
 * with the reason in why. */
int jc__ctl_write_output(const char *path, const void *data, size_t size, char *why, size_t len);

/* The subcommands: argc/argv from the command's name on; each returns the exit status. */
int jc__ctl_cmd_compile(int argc, char **argv);
int jc__ctl_cmd_link(int argc, char **argv);
int jc__ctl_cmd_admin(const char *command, int argc, char **argv);
int jc__ctl_cmd_warm(int argc, char **argv);
int jc__ctl_cmd_export(int argc, char **argv);
int jc__ctl_cmd_import(int argc, char **argv);

#endif
