/* SPDX-License-Identifier: MIT */
#include "proto/io.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "jitcache/jitcache.h"

int jc__io_write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return JC_EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int wait_readable(int fd, int timeout_ms)
{
	if (timeout_ms < 0)
		return 0;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	for (;;) {
		int r = poll(&pfd, 1, timeout_ms);
		if (r > 0)
			return 0;
		if (r == 0)
			return JC_ETIMEOUT;
		if (errno != EINTR)
			return JC_EIO;
	}
}

/* One read of up to the iov's bytes (at least one byte: else JC_EIO with
 * ECONNRESET); keeps the first descriptor passed, closes others. Returns
 * the bytes read, or a negative JC_E* code. With a timeout (timeout_ms >=
 * 0) a socket is read without waiting and polled only when nothing is
 * there yet, so an answer its caller spun for (client.c) takes one call,
 * not two; any other descriptor is polled, then read. */
static ssize_t read_some(int fd, struct iovec *iov, int n_iov, int *passed_fd, int timeout_ms)
{
	int rc, wait = 0;
	for (;;) {
		if (wait && (rc = wait_readable(fd, timeout_ms)))
			return rc;
		union {
			struct cmsghdr hdr;
			char space[CMSG_SPACE(sizeof(int) * 4)];
		} ctl;
		struct msghdr msg = {.msg_iov = iov,
				     .msg_iovlen = (size_t)n_iov,
				     .msg_control = ctl.space,
				     .msg_controllen = sizeof(ctl.space)};
		ssize_t n =
		    recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | (timeout_ms < 0 ? 0 : MSG_DONTWAIT));
		if (n < 0 && errno == ENOTSOCK) {
			if ((rc = wait_readable(fd, timeout_ms)))
				return rc;
			n = readv(fd, iov, n_iov);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && timeout_ms >= 0) {
				wait = 1;
				continue;
			}
			return JC_EIO;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return JC_EIO;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfd; i++) {
				int got;
				memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (passed_fd && *passed_fd < 0)
					*passed_fd = got;
				else
					close(got);
			}
		}
		return n;
	}
}

/* Reads exactly len bytes; keeps the first descriptor passed, closes others. */
static int read_full(int fd, uint8_t *buf, size_t len, int *passed_fd, int timeout_ms)
{
	while (len > 0) {
		struct iovec iov = {.iov_base = buf, .iov_len = len};
		ssize_t n = read_some(fd, &iov, 1, passed_fd, timeout_ms);
		if (n < 0)
			return (int)n;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * One frame into payload. With answer, the first reads also take up to
 * payload's capacity of what follows the header (at least JC_ANSWER_BUF):
 * bytes past the frame are then JC_EPROTO (jc__io_read_answer).
 */
static int read_frame(int fd, struct jc_buf *payload, uint16_t *type, int *passed_fd,
		      int timeout_ms, int answer)
{
	uint8_t hdr[JC_FRAME_HDR];
	uint32_t len = 0;
	size_t have = 0, extra = 0;
	int got_fd = -1, rc = 0;
	jc__buf_reset(payload);
	if (answer && payload->cap < JC_ANSWER_BUF) {
		uint8_t *p = realloc(payload->data, JC_ANSWER_BUF);
		if (!p)
			return JC_ENOMEM;
		payload->data = p;
		payload->cap = JC_ANSWER_BUF;
	}
	while (rc == 0 && have < sizeof(hdr)) {
		struct iovec iov[2] = {{.iov_base = hdr + have, .iov_len = sizeof(hdr) - have},
				       {.iov_base = payload->data, .iov_len = payload->cap}};
		ssize_t n = read_some(fd, iov, answer ? 2 : 1, &got_fd, timeout_ms);
		if (n < 0)
			rc = (int)n;
		else if ((size_t)n > sizeof(hdr) - have)
			extra = (size_t)n - (sizeof(hdr) - have), have = sizeof(hdr);
		else
			have += (size_t)n;
	}
	if (rc == 0)
		rc = jc__frame_header_decode(hdr, type, &len);
	if (rc == 0 && extra > len)
		rc = JC_EPROTO; /* bytes after the answer: the peer broke the protocol */
	if (rc == 0 && len > payload->cap) {
		uint8_t *p = realloc(payload->data, len);
		if (!p)
			rc = JC_ENOMEM;
		else {
			payload->data = p;
			payload->cap = len;
		}
	}
	if (rc == 0)
		rc = read_full(fd, payload->data + extra, len - extra, &got_fd, timeout_ms);
	if (rc == 0)
		payload->len = len;
	if (passed_fd && rc == 0)
		*passed_fd = got_fd;
	else if (got_fd >= 0)
		close(got_fd);
	return rc;
}

int jc__io_read_frame(int fd, struct jc_buf *payload, uint16_t *type, int *passed_fd,
		      int timeout_ms)
{
	return read_frame(fd, payload, type, passed_fd, timeout_ms, 0);
}

int jc__io_read_answer(int fd, struct jc_buf *payload, uint16_t *type, int *passed_fd,
		       int timeout_ms)
{
	return read_frame(fd, payload, type, passed_fd, timeout_ms, 1);
}
