/* SPDX-License-Identifier: MIT */
/*
 * Blocking frame I/O over a stream socket, for the client library, the
 * compile worker and tests (the daemon's loop uses libuv instead).
 * Descriptors passed with SCM_RIGHTS beside a frame are collected.
 * Thread-safety: functions are reentrant; one socket must not be read or
 * written by two threads at once.
 */
#ifndef JC_IO_H
#define JC_IO_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/*
 * Writes len bytes, retrying on EINTR and short writes (MSG_NOSIGNAL: a
 * closed peer gives JC_EIO, never SIGPIPE). Returns 0 or JC_EIO (errno set).
 */
int jc__io_write_all(int fd, const void *data, size_t len);

/*
 * Reads one frame. payload (borrowed, reset first) receives the payload,
 * *type its message type. If passed_fd is not NULL it receives a descriptor
 * that came with the frame (O_CLOEXEC) or -1; without passed_fd any passed
 * descriptor is closed. timeout_ms < 0 waits forever.
 * Returns 0, JC_EIO (peer closed: errno = ECONNRESET, or a read error),
 * JC_ETIMEOUT, JC_EPROTO / JC_ETOOBIG (bad header), JC_ENOMEM.
 */
int jc__io_read_frame(int fd, struct jc_buf *payload, uint16_t *type, int *passed_fd,
		      int timeout_ms);

/* Payload room jc__io_read_answer keeps (bytes): a hit's answer with its
 * bytes inline (daemon/memcache.c: objects under 64 KiB) comes in one read,
 * the first one of a fresh process too. */
#define JC_ANSWER_BUF (68u << 10)

/*
 * jc__io_read_frame for the answer to a request, when the peer sends nothing
 * after it until we write again: the header and up to JC_ANSWER_BUF bytes
 * of payload (payload's capacity, grown to that first) in one read. Bytes
 * read past the frame are JC_EPROTO. Same returns as jc__io_read_frame.
 */
int jc__io_read_answer(int fd, struct jc_buf *payload, uint16_t *type, int *passed_fd,
		       int timeout_ms);

#endif
