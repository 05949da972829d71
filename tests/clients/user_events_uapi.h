/*
 * The mainline (6.4+) user_events uapi, spelled out for the test clients
 * rather than taken from <linux/user_events.h>: the tests pin the ABI itself.
 */
#ifndef TRACEFS_FUSE_TESTS_USER_EVENTS_UAPI_H
#define TRACEFS_FUSE_TESTS_USER_EVENTS_UAPI_H

#include <stdint.h>
#include <sys/ioctl.h>

struct user_reg {
	uint32_t size;
	uint8_t enable_bit;
	uint8_t enable_size;
	uint16_t flags;
	uint64_t enable_addr;
	uint64_t name_args;
	uint32_t write_index;
} __attribute__((__packed__));

struct user_unreg {
	uint32_t size;
	uint8_t disable_bit;
	uint8_t __reserved;
	uint16_t __reserved2;
	uint64_t disable_addr;
} __attribute__((__packed__));

/* The size in these numbers is that of a pointer, as in the kernel's macros. */
#define DIAG_IOCSREG _IOWR('*', 0, struct user_reg *)
#define DIAG_IOCSDEL _IOW('*', 1, char *)
#define DIAG_IOCSUNREG _IOW('*', 2, struct user_unreg *)

#define USER_EVENT_REG_PERSIST (1 << 0)
#define USER_EVENT_REG_MULTI_FORMAT (1 << 1)

#endif
