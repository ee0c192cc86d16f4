/* SPDX-License-Identifier: MIT */
#include "proto/io.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* Reads exactly len bytes; keeps the first descriptor passed, closes others. */
static int read_full(int fd, uint8_t *buf, size_t len, int *passed_fd, int timeout_ms)
{
	while (len > 0) {
		int rc = wait_readable(fd, timeout_ms);
		if (rc)
			return rc;
		union {
			struct cmsghdr hdr;
			char space[CMSG_SPACE(sizeof(int) * 4)];
		} ctl;
		struct iovec iov = {.iov_base = buf, .iov_len = len};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = ctl.space, .msg_controllen = sizeof(ctl.space)};
		ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == ENOTSOCK)
			n = read(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
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
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int jc__io_read_frame(int fd, struct jc_buf *payload, uint16_t *type, int *passed_fd,
		      int timeout_ms)
{
	uint8_t hdr[JC_FRAME_HDR];
	uint32_t len;
	int got_fd = -1;
	jc__buf_reset(payload);
	int rc = read_full(fd, hdr, sizeof(hdr), &got_fd, timeout_ms);
	if (rc == 0)
		rc = jc__frame_header_decode(hdr, type, &len);
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
		rc = read_full(fd, payload->data, len, &got_fd, timeout_ms);
	if (rc == 0)
		payload->len = len;
	if (passed_fd && rc == 0)
		*passed_fd = got_fd;
	else if (got_fd >= 0)
		close(got_fd);
	return rc;
}
