/*
 * EventHeader events a C program writes, for the captured fixtures of the
 * decoder (tests/eventheader/capture.py): an activity's start and stop with
 * related ids, formats of every kind, an array of structs, a UTF-16 string,
 * and an event without metadata. The layouts are the spec's (eventheader.h).
 *
 * usage: eh_emit          (the events must be enabled at registration)
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

#include "../../docs/examples/user_events.h"

#define FIELDS "u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode;u8 level"

static uint8_t event[1024];
static size_t len;

static void bytes(const void *p, size_t n)
{
	if (len + n > sizeof(event))
		exit(3);
	memcpy(event + len, p, n);
	len += n;
}

#define U8(v) bytes(&(uint8_t){ (v) }, 1)
#define U16(v) bytes(&(uint16_t){ (v) }, 2)
#define U32(v) bytes(&(uint32_t){ (v) }, 4)
#define STR(s) bytes((s), sizeof(s)) /* a literal, NUL included */

/* Header, then (optionally) activity ids, then the metadata block, whose
 * length is patched once it is written. */
static size_t begin(uint8_t opcode, uint8_t level, uint16_t id, uint8_t version,
		    const uint8_t *activity, const uint8_t *related)
{
	len = 0;
	U8(0x07); /* pointer64 | little_endian | extension */
	U8(version);
	U16(id);
	U16(0);
	U8(opcode);
	U8(level);
	if (activity) {
		U16(related ? 32 : 16);
		U16(2 | 0x8000); /* activity id, chained */
		bytes(activity, 16);
		if (related)
			bytes(related, 16);
	}
	size_t size_at = len;
	U16(0);
	U16(1); /* metadata, last block */
	return size_at;
}

static void end_metadata(size_t size_at)
{
	uint16_t size = (uint16_t)(len - size_at - 4);
	memcpy(event + size_at, &size, 2);
}

static uint32_t enabled[2];

static int reg(int fd, const char *command, int k, uint32_t *index)
{
	struct user_reg r = {
		.size = sizeof(r), .enable_size = 4,
		.enable_addr = (uint64_t)(uintptr_t)&enabled[k],
		.name_args = (uint64_t)(uintptr_t)command,
	};
	if (ioctl(fd, DIAG_IOCSREG, &r) < 0 || !(enabled[k] & 1)) {
		fprintf(stderr, "eh_emit: %s not registered and enabled\n", command);
		return -1;
	}
	*index = r.write_index;
	return 0;
}

static int emit(int fd, uint32_t index)
{
	struct iovec io[] = { { &index, 4 }, { event, len } };
	if (writev(fd, io, 2) < 0) {
		perror("writev");
		return -1;
	}
	return 0;
}

int main(void)
{
	static const uint8_t activity[16] = { 0xa1, 0xa2, 0xa3, 0xa4, 0xb1, 0xb2, 0xc1, 0xc2,
					      0xd1, 0xd2, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6 };
	static const uint8_t parent[16] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
					    0x99, 0x00, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff };
	static const uint8_t peer[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x07 };
	uint32_t svc, plain;
	int fd = open(USER_EVENTS_DATA_PATH, O_RDWR);
	if (fd < 0 || reg(fd, "Corp_Svc_L5K2Gops " FIELDS, 0, &svc) ||
	    reg(fd, "Corp_Svc_L4K1 " FIELDS, 1, &plain))
		return 1;

	/* 1. RequestStart: activity start with its parent; hex, ipv6, port. */
	size_t m = begin(1, 5, 0, 0, activity, parent);
	STR("RequestStart;owner=ops");
	STR("path"); U8(7);                   /* zstring_char8 */
	STR("attempt"); U8(2 | 0x80); U8(3);  /* value8, hex_int */
	STR("peer"); U8(6 | 0x80); U8(18);    /* value128, ipv6 */
	STR("port"); U8(3 | 0x80); U8(16);    /* value16, port */
	end_metadata(m);
	STR("/api/v1/items");
	U8(0x2a);
	bytes(peer, 16);
	U8(0x1f); U8(0x90);                   /* 8080, network order */
	if (emit(fd, svc))
		return 1;

	/* 2. RequestStop: errno, a double, a boolean; tagged field. */
	m = begin(2, 5, 0, 0, activity, NULL);
	STR("RequestStop");
	STR("status"); U8(4 | 0x80); U8(4);   /* value32, errno */
	STR("elapsed"); U8(5 | 0x80); U8(8);  /* value64, float */
	STR("ok"); U8(2 | 0x80); U8(7 | 0x80); U16(0x77); /* value8, boolean, tag */
	end_metadata(m);
	U32((uint32_t)-110);                  /* -ETIMEDOUT */
	double elapsed = 0.25;
	bytes(&elapsed, 8);
	U8(0);
	if (emit(fd, svc))
		return 1;

	/* 3. Batch: an array of structs and a UTF-16 string, on another tracepoint. */
	m = begin(0, 4, 9, 1, NULL, NULL);
	STR("Batch");
	STR("items"); U8(1 | 0x40 | 0x80); U8(2); /* struct, varray, 2 fields */
	STR("name"); U8(10);                  /* string_length16_char8 */
	STR("weights"); U8(4 | 0x20); U16(2); /* value32 carray[2] */
	STR("wide"); U8(8);                   /* zstring_char16 */
	end_metadata(m);
	U16(2);
	U16(3); bytes("abc", 3); U32(1); U32(2);
	U16(0); U32(3); U32(4);
	U16('h'); U16(0x00e9); U16(0);
	if (emit(fd, plain))
		return 1;

	/* 4. No metadata: only the id and version say what the payload is. */
	len = 0;
	U8(0x03); U8(3); U16(100); U16(0); U8(0); U8(4);
	U32(0xdeadbeef);
	if (emit(fd, plain))
		return 1;
	printf("eh_emit: 4 events\n");
	return 0;
}
