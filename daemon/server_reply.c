/* SPDX-License-Identifier: MIT */
/*
 * The server's results (server_int.h): a RESULT frame, and for a hit the
 * object's read-only descriptor beside it (SCM_RIGHTS) instead of its
 * bytes; the bytes inline when the descriptor cannot be passed now.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/server_int.h"

/* b (taken): a RESULT frame without the object's bytes, served by objfd
 * (taken). When the descriptor cannot be passed now, the frame is sent
 * again with the bytes read from objfd inline; 0 or a JC_E* code (b freed). */
static int inline_bytes(struct jc_buf *b, int objfd)
{
	struct jc_res res;
	int rc = b->len >= JC_FRAME_HDR
		     ? jc__decode_res(b->data + JC_FRAME_HDR, b->len - JC_FRAME_HDR, &res)
		     : JC_EPROTO;
	jc__buf_reset(b);
	if (rc == 0) {
		res.data = malloc(res.size ? res.size : 1);
		ssize_t got = res.data ? pread(objfd, res.data, res.size, 0) : -1;
		rc = got == (ssize_t)res.size ? jc__encode_res(b, &res) : JC_EIO;
		jc__res_clear(&res);
	}
	close(objfd);
	if (rc != 0)
		jc__buf_free(b);
	return rc;
}

/* Sends frame b (taken) on c with objfd (taken; -1: none) beside it. */
void jc__srv_conn_send_frame(struct jc_conn *c, struct jc_buf *b, int objfd)
{
	if (objfd < 0) {
		jc__srv_conn_write(c, b, 0);
		return;
	}
	/* Dropped while the rest of a reply the loop began is still to go
	 * (jc__srv_conn_write would drop it too, after reading the object). */
	if (!jc__srv_direct_end(c) || !jc__srv_reply_fits(c, b->len)) {
		jc__buf_free(b);
		close(objfd);
		return;
	}
	/* libuv passes only its own handles: sendmsg when nothing is queued
	 * (the descriptor goes with the first byte); else the bytes inline. */
	ssize_t n = jc__srv_conn_send_now(c, b->data, b->len, objfd);
	if (n > 0) {
		close(objfd);
		if (n == (ssize_t)b->len)
			jc__buf_free(b);
		else
			jc__srv_conn_write(c, b, (size_t)n);
		return;
	}
	/* Could not pass the descriptor now: send the bytes inline. */
	if (inline_bytes(b, objfd) != 0) {
		jc__srv_conn_send_error(c, JC_EIO, "could not read the cached object");
		return;
	}
	jc__srv_conn_write(c, b, 0);
}

void jc__srv_conn_send_result(struct jc_conn *c, const struct jc_res *res, int objfd)
{
	struct jc_buf b = {0};
	if (c->sink) {
		c->sink(c->sink_ctx, res, objfd, 0, NULL);
		return;
	}
	if (c->closing) {
		if (objfd >= 0)
			close(objfd);
		return;
	}
	/* Served by descriptor: the frame carries no bytes. */
	struct jc_res view = *res;
	if (objfd >= 0)
		view.data = NULL;
	if (jc__encode_res(&b, &view) != 0) {
		jc__buf_free(&b);
		if (objfd >= 0)
			close(objfd);
		jc__srv_conn_send_error(c, JC_ENOMEM, "could not encode the result");
		return;
	}
	if (c->real)
		jc__srv_proxy_post(c, MSG_REPLY, &b, objfd);
	else
		jc__srv_conn_send_frame(c, &b, objfd);
}
