/* SPDX-License-Identifier: MIT */
/*
 * The client handle's settings (handle.h): jc_options and its setters,
 * their resolution against the environment and the defaults at open
 * (jitcache.h lists the variables), `jitcachectl config`'s listing of them
 * with where each came from, and the log callback they name.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/handle.h"
#include "common/util.h"
#include "config.h"

#define RETRIES_DEFAULT	  5
#define IDLE_EXIT_DEFAULT 600

void jc__client_say(const jc_client *c, int level, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	if (!c->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->log(c->log_ctx, level, msg);
}

/*
 * $JITCACHE_FALLBACK: "error" is JC_FALLBACK_ERROR; unset, empty and
 * "compile" are JC_FALLBACK_COMPILE; anything else is JC_FALLBACK_COMPILE
 * too (the default: the library does not fail the application over a
 * setting), with a warning naming the variable, the value and the accepted
 * ones in warn (else warn is ""). The value is shown printable.
 */
static int fallback_env(char *warn, size_t len)
{
	const char *v = secure_getenv("JITCACHE_FALLBACK");
	char shown[48];
	size_t i = 0;
	*warn = '\0';
	if (!v || !*v || strcmp(v, "compile") == 0)
		return JC_FALLBACK_COMPILE;
	if (strcmp(v, "error") == 0)
		return JC_FALLBACK_ERROR;
	for (; v[i] && i < sizeof(shown) - 4; i++)
		shown[i] = v[i] > 0x20 && v[i] < 0x7f ? v[i] : '?';
	snprintf(shown + i, sizeof(shown) - i, "%s", v[i] ? "..." : "");
	snprintf(warn, len,
		 "jitcache: JITCACHE_FALLBACK=%s is neither \"compile\" nor \"error\" (lower "
		 "case): using compile, the default",
		 shown);
	return JC_FALLBACK_COMPILE;
}

/* $NAME as 0 or 1; def when unset or anything else. */
static int env_bool(const char *name, int def)
{
	const char *v = secure_getenv(name);
	return v && (!strcmp(v, "0") || !strcmp(v, "1")) ? v[0] == '1' : def;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int jc__client_resolve(jc_client *c, const jc_options *o, char *err, size_t errlen)
{
	static const jc_options none = {.autostart = -1, .retries = -1};
	const char *v;
	char cwd[4096];
	if (!o)
		o = &none;
	c->socket = dup_or_null(o->socket);
	if (o->cache_dir && o->cache_dir[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return jc__fail(err, errlen, JC_EINVAL,
					"cannot resolve cache directory %s: %s", o->cache_dir,
					strerror(errno));
		if (asprintf(&c->cache_dir, "%s/%s", cwd, o->cache_dir) < 0)
			c->cache_dir = NULL;
	} else {
		c->cache_dir = dup_or_null(o->cache_dir);
	}
	if (o->system_socket_set)
		v = o->system_socket;
	else if (!(v = secure_getenv("JITCACHE_SYSTEM_SOCKET")))
		v = JC_SYSTEM_SOCKET;
	c->system_socket = v && *v ? strdup(v) : NULL;
	c->autostart = o->autostart >= 0 ? o->autostart : env_bool("JITCACHE_AUTOSTART", 1);
	c->send_trees = env_bool("JITCACHE_SEND_HEADERS", 0);
	c->fallback =
	    o->fallback ? o->fallback : fallback_env(c->fallback_warn, sizeof(c->fallback_warn));
	c->retries = o->retries >= 0 ? o->retries : RETRIES_DEFAULT;
	v = secure_getenv("JITCACHE_AUTOSTART_IDLE_EXIT");
	c->idle_exit_s = o->idle_exit_s	    ? o->idle_exit_s
			 : v && atoi(v) > 0 ? atoi(v)
					    : IDLE_EXIT_DEFAULT;
	c->daemon = dup_or_null(o->daemon);
	c->nvrtc = dup_or_null(o->nvrtc ? o->nvrtc : secure_getenv("JITCACHE_REAL_NVRTC"));
	c->log = o->log;
	c->log_ctx = o->log_ctx;
	if (c->fallback_warn[0])
		jc__client_say(c, JC_LOG_WARNING, "%s", c->fallback_warn);
	if ((o->socket && !c->socket) || (o->cache_dir && !c->cache_dir) ||
	    (o->daemon && !c->daemon))
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	if (c->cache_dir) {
		struct stat st;
		/* A directory not there yet has no daemon; auto-start makes it. */
		if (stat(c->cache_dir, &st) == 0) {
			c->dir_dev = (uint64_t)st.st_dev;
			c->dir_ino = (uint64_t)st.st_ino;
		}
	}
	return 0;
}

/* The source of an environment-or-default value. */
static const char *env_src(const char *name, int given)
{
	const char *v = secure_getenv(name);
	return given ? "option" : v ? name : "default";
}

void jc__client_config(const jc_options *o, jc_client *c, jc__config_fn emit, void *ctx)
{
	char buf[4200], dir[4096];
	const char *v, *xdg = secure_getenv("XDG_RUNTIME_DIR");
	emit("socket", c->socket ? c->socket : "(none: search)", c->socket ? "--socket" : "default",
	     ctx);
	if (c->cache_dir)
		emit("cache_dir", c->cache_dir, "--cache-dir", ctx);
	else if (jc__default_cache_dir(dir, sizeof(dir)) == 0)
		emit("cache_dir", dir,
		     secure_getenv("JITCACHE_DIR") && *secure_getenv("JITCACHE_DIR")
			 ? "JITCACHE_DIR"
		     : secure_getenv("XDG_CACHE_HOME") && *secure_getenv("XDG_CACHE_HOME")
			 ? "XDG_CACHE_HOME"
			 : "HOME",
		     ctx);
	v = secure_getenv("JITCACHE_SOCKET");
	emit("search.env_socket", v && *v ? v : "(unset)", "JITCACHE_SOCKET", ctx);
	snprintf(buf, sizeof(buf), "%s%s", xdg && *xdg ? xdg : "(unset XDG_RUNTIME_DIR)",
		 xdg && *xdg ? "/jitcached.sock" : "");
	emit("search.user_socket", buf, "XDG_RUNTIME_DIR", ctx);
	emit("search.system_socket", c->system_socket ? c->system_socket : "(skipped)",
	     env_src("JITCACHE_SYSTEM_SOCKET", o && o->system_socket_set), ctx);
	emit("autostart", c->autostart ? "1" : "0",
	     env_src("JITCACHE_AUTOSTART", o && o->autostart >= 0), ctx);
	v = secure_getenv("JITCACHED");
	emit("autostart.daemon",
	     c->daemon ? c->daemon
	     : v && *v ? v
		       : JC_SBINDIR "/jitcached, else PATH",
	     c->daemon ? "option"
	     : v && *v ? "JITCACHED"
		       : "default",
	     ctx);
	snprintf(buf, sizeof(buf), "%d s", c->idle_exit_s);
	emit("autostart.idle_exit", buf,
	     env_src("JITCACHE_AUTOSTART_IDLE_EXIT", o && o->idle_exit_s), ctx);
	snprintf(buf, sizeof(buf), "%s%s%s",
		 c->fallback == JC_FALLBACK_COMPILE ? "compile" : "error",
		 c->fallback_warn[0] ? " -- " : "", c->fallback_warn);
	emit("fallback", buf, env_src("JITCACHE_FALLBACK", o && o->fallback), ctx);
	emit("fallback.nvrtc",
	     c->nvrtc ? c->nvrtc
		      : "libnvrtc.so (the toolkit's soname), search path, then " JC_CUDA_LIBDIR,
	     c->nvrtc ? env_src("JITCACHE_REAL_NVRTC", o && o->nvrtc) : "default", ctx);
	snprintf(buf, sizeof(buf), "%d", c->retries);
	emit("retries", buf, o && o->retries >= 0 ? "option" : "default", ctx);
	snprintf(buf, sizeof(buf), "%llu us", (unsigned long long)(c->spin_ns / 1000));
	emit("spin", buf, env_src("JITCACHE_CLIENT_SPIN_US", 0), ctx);
	if (c->fd >= 0) {
		snprintf(buf, sizeof(buf), "%s (pid %u, serving %s)", c->sock, c->daemon_pid,
			 c->daemon_dir ? c->daemon_dir : "?");
		emit("daemon", buf, "answered", ctx);
	} else {
		emit("daemon", c->why_none[0] ? c->why_none : c->errmsg, "none answers", ctx);
	}
}

/* --- options ------------------------------------------------------------------------ */

JC_API int jc_options_new(jc_options **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return JC_ENOMEM;
	(*out)->autostart = -1;
	(*out)->retries = -1;
	return 0;
}

JC_API void jc_options_free(jc_options *o)
{
	if (!o)
		return;
	free(o->socket);
	free(o->cache_dir);
	free(o->system_socket);
	free(o->daemon);
	free(o->nvrtc);
	free(o);
}

/* Replaces *dst with a copy of s (NULL: unset). */
static int set_opt_str(char **dst, const char *s)
{
	char *copy = s ? strdup(s) : NULL;
	if (s && !copy)
		return JC_ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

JC_API int jc_options_set_socket(jc_options *o, const char *path)
{
	return path && !*path ? JC_EINVAL : set_opt_str(&o->socket, path);
}

JC_API int jc_options_set_cache_dir(jc_options *o, const char *dir)
{
	return dir && !*dir ? JC_EINVAL : set_opt_str(&o->cache_dir, dir);
}

JC_API int jc_options_set_system_socket(jc_options *o, const char *path)
{
	int rc = set_opt_str(&o->system_socket, path && *path ? path : NULL);
	o->system_socket_set = rc == 0 && path != NULL;
	return rc;
}

JC_API int jc_options_set_autostart(jc_options *o, int on)
{
	if (on < -1 || on > 1)
		return JC_EINVAL;
	o->autostart = on;
	return 0;
}

JC_API int jc_options_set_daemon(jc_options *o, const char *path)
{
	return path && !*path ? JC_EINVAL : set_opt_str(&o->daemon, path);
}

JC_API int jc_options_set_idle_exit(jc_options *o, int seconds)
{
	if (seconds < 0)
		return JC_EINVAL;
	o->idle_exit_s = seconds;
	return 0;
}

JC_API int jc_options_set_fallback(jc_options *o, jc_fallback f)
{
	if ((int)f != 0 && f != JC_FALLBACK_COMPILE && f != JC_FALLBACK_ERROR)
		return JC_EINVAL;
	o->fallback = (int)f;
	return 0;
}

JC_API int jc_options_set_nvrtc(jc_options *o, const char *path)
{
	return path && !*path ? JC_EINVAL : set_opt_str(&o->nvrtc, path);
}

JC_API int jc_options_set_retries(jc_options *o, int tries)
{
	if (tries < -1 || tries > 20)
		return JC_EINVAL;
	o->retries = tries;
	return 0;
}

JC_API int jc_options_set_log(jc_options *o, jc_log_cb cb, void *ctx)
{
	o->log = cb;
	o->log_ctx = ctx;
	return 0;
}
