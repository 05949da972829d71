/*
 * eventheader: an EventHeader event, byte by byte, from the convention's
 * specification (eventheader.h in microsoft/LinuxTracepoints). Libraries
 * such as TraceLoggingProvider.h, EventHeaderDynamic.h or the Rust and Go
 * eventheader crates build these for you; this shows what they write.
 *
 * One tracepoint carries every event of a provider at one level and keyword:
 *
 *     MyCompany_Greeter_L4K1 u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode;u8 level
 *
 * ("L4": level 4, information; "K1": keyword 0x1). Each write is
 *
 *     eventheader           8 bytes: flags, version, id, tag, opcode, level
 *     extension blocks      4-byte header (size, kind | 0x8000 if another
 *                           follows) and size bytes: here an activity id
 *                           (kind 2, 16 bytes), then the metadata (kind 1)
 *     payload               the fields, as the metadata describes them
 *
 * and the metadata names the event and its fields:
 *
 *     "Greeting\0"
 *     "message\0" 0x07                 zstring_char8
 *     "count\0"   0x84 0x02            value32 | chain, format signed_int
 *     "origin\0"  0x81 0x02            struct | chain, 2 fields follow:
 *       "x\0"     0x84 0x02              value32, signed_int
 *       "y\0"     0x84 0x02              value32, signed_int
 *     "scores\0"  0x43                 value16 | varray (u16 count first)
 *
 * usage: eventheader MESSAGE COUNT     one Greeting; its scores are 1..3
 * build: cc -Wall -o eventheader eventheader.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "user_events.h"

/* The spec's field list for every EventHeader tracepoint. */
#define EVENTHEADER_FIELDS \
	"u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode;u8 level"

enum {
	FLAG_POINTER64 = 0x01, FLAG_LITTLE_ENDIAN = 0x02, FLAG_EXTENSION = 0x04,
	EXT_METADATA = 1, EXT_ACTIVITY_ID = 2, EXT_CHAIN = 0x8000,
	ENC_STRUCT = 1, ENC_VALUE16 = 3, ENC_VALUE32 = 4, ENC_ZSTRING_CHAR8 = 7,
	ENC_VARRAY = 0x40, ENC_CHAIN = 0x80,
	FMT_SIGNED_INT = 2,
	LEVEL_INFORMATION = 4,
};

struct buffer {
	uint8_t data[512];
	size_t len;
};

static void put(struct buffer *b, const void *p, size_t n)
{
	if (b->len + n > sizeof(b->data)) {
		fprintf(stderr, "eventheader: event too large\n");
		exit(1);
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void put_u8(struct buffer *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(struct buffer *b, uint16_t v) { put(b, &v, 2); }
static void put_i32(struct buffer *b, int32_t v) { put(b, &v, 4); }
static void put_str(struct buffer *b, const char *s) { put(b, s, strlen(s) + 1); }

/* The metadata block: the same for every Greeting. */
static void greeting_metadata(struct buffer *m)
{
	put_str(m, "Greeting");
	put_str(m, "message");
	put_u8(m, ENC_ZSTRING_CHAR8);
	put_str(m, "count");
	put_u8(m, ENC_VALUE32 | ENC_CHAIN);
	put_u8(m, FMT_SIGNED_INT);
	put_str(m, "origin");
	put_u8(m, ENC_STRUCT | ENC_CHAIN);
	put_u8(m, 2); /* for a struct, the format byte counts its fields */
	put_str(m, "x");
	put_u8(m, ENC_VALUE32 | ENC_CHAIN);
	put_u8(m, FMT_SIGNED_INT);
	put_str(m, "y");
	put_u8(m, ENC_VALUE32 | ENC_CHAIN);
	put_u8(m, FMT_SIGNED_INT);
	put_str(m, "scores");
	put_u8(m, ENC_VALUE16 | ENC_VARRAY);
}

static uint32_t greeter_enabled;

int main(int argc, char **argv)
{
	const char *message = argc > 1 ? argv[1] : "hello";
	int32_t count = argc > 2 ? atoi(argv[2]) : 1;

	int fd = open(USER_EVENTS_DATA_PATH, O_RDWR);
	if (fd < 0) {
		perror(USER_EVENTS_DATA_PATH);
		return 1;
	}
	struct user_reg reg = {
		.size = sizeof(reg),
		.enable_bit = 0,
		.enable_size = sizeof(greeter_enabled),
		.enable_addr = (uint64_t)(uintptr_t)&greeter_enabled,
		.name_args = (uint64_t)(uintptr_t)"MyCompany_Greeter_L4K1 " EVENTHEADER_FIELDS,
	};
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		perror("DIAG_IOCSREG");
		return 1;
	}
	if (!(greeter_enabled & 1))
		return 0;

	struct buffer metadata = {0}, event = {0};
	greeting_metadata(&metadata);

	/* eventheader: flags, version, id, tag, opcode, level. */
	put_u8(&event, FLAG_POINTER64 | FLAG_LITTLE_ENDIAN | FLAG_EXTENSION);
	put_u8(&event, 0);
	put_u16(&event, 0);
	put_u16(&event, 0);
	put_u8(&event, 0); /* opcode: info */
	put_u8(&event, LEVEL_INFORMATION);
	/* Activity id extension, chained to the next block. */
	static const uint8_t activity[16] = {
		0x6f, 0x2a, 0x1c, 0x3e, 0x47, 0x4d, 0x4b, 0x5a,
		0x8e, 0x11, 0x02, 0x9c, 0x0d, 0x5e, 0x77, 0x01,
	};
	put_u16(&event, sizeof(activity));
	put_u16(&event, EXT_ACTIVITY_ID | EXT_CHAIN);
	put(&event, activity, sizeof(activity));
	/* Metadata extension: the last block. */
	put_u16(&event, (uint16_t)metadata.len);
	put_u16(&event, EXT_METADATA);
	put(&event, metadata.data, metadata.len);
	/* Payload, in the metadata's order. */
	put_str(&event, message);
	put_i32(&event, count);
	put_i32(&event, -3); /* origin.x */
	put_i32(&event, 7);  /* origin.y */
	put_u16(&event, 3);  /* scores: count, then the elements */
	for (uint16_t score = 1; score <= 3; score++)
		put_u16(&event, score);

	struct iovec io[] = {
		{ &reg.write_index, sizeof(reg.write_index) },
		{ event.data, event.len },
	};
	if (writev(fd, io, 2) < 0 && errno != EBADF) {
		perror("writev");
		return 1;
	}
	close(fd);
	return 0;
}
