/*
 * user_events.h - the Linux user_events ABI for programs that emit events.
 *
 * Written for tracefs-fuse from the kernel's definition of the ABI (Linux 6.4
 * and later; the kernel's include/uapi/linux/user_events.h is the
 * specification), for systems that ship no <linux/user_events.h>, Debian 12
 * among them. Programs built with it run unchanged against the kernel's own
 * user_events and against tracefs-fuse. Copy it into your project.
 *
 * How a program emits events (docs/examples/hello.c does exactly this):
 *
 *   1. open("/sys/kernel/tracing/user_events_data", O_RDWR)
 *   2. ioctl(fd, DIAG_IOCSREG, &reg) with reg.name_args pointing to
 *      "name type field; type field; ...": the kernel writes the event's
 *      write index into reg.write_index, and from then on keeps bit
 *      reg.enable_bit of the 32- or 64-bit value at reg.enable_addr set while
 *      a tracer has the event enabled.
 *   3. when that bit is set: writev(fd, { &write_index, 4 }, { fields... })
 *      with the fields packed back to back, no padding, in declared order.
 *   4. ioctl(fd, DIAG_IOCSUNREG, &unreg) when the bit's variable goes away
 *      (the kernel would otherwise keep writing to it).
 *
 * Field types: s8/u8, s16/u16, s32/u32, s64/u64, char, short, int and their
 * unsigned forms, char[N], unsigned char[N], "struct name field size" and
 * the dynamic __data_loc/__rel_loc arrays, e.g. "__rel_loc char[] path".
 * A dynamic field is a 32-bit slot holding DYN_LOC(offset, size): for
 * __data_loc the offset counts from the start of the record (the 8-byte
 * common header included, i.e. 8 + the offset in what you write after the
 * write index); for __rel_loc it counts from the end of the slot itself.
 * Strings carry their terminating NUL in size.
 */
#ifndef TRACEFS_FUSE_USER_EVENTS_H
#define TRACEFS_FUSE_USER_EVENTS_H

#include <stdint.h>
#include <sys/ioctl.h>

/* Where tracefs is; tracefs-fuse run puts it there. */
#define USER_EVENTS_DATA_PATH "/sys/kernel/tracing/user_events_data"
/* The system of single-format user events (events/user_events/<name>/). */
#define USER_EVENTS_SYSTEM "user_events"
/* The system of multi-format ones (events/user_events_multi/<name>.<id>/). */
#define USER_EVENTS_MULTI_SYSTEM "user_events_multi"
/* dynamic_events lines that create user events start with this. */
#define USER_EVENTS_PREFIX "u:"

/* A dynamic field's slot: the data's size in the high 16 bits. */
#define DYN_LOC(offset, size) ((uint32_t)(size) << 16 | (uint32_t)(offset))

/*
 * The kernel's installed header uses this guard: where it exists and was
 * included first, its definitions stand and the ones below would clash; and
 * where ours come first, it is skipped.
 */
#ifndef _LINUX_USER_EVENTS_H
#define _LINUX_USER_EVENTS_H

/* Registration flags (struct user_reg.flags). */
enum user_reg_flag {
	/* The event outlives its last user (needs CAP_PERFMON). */
	USER_EVENT_REG_PERSIST = 1U << 0,
	/* Linux 6.9+: same name, other fields: another tracepoint, name.<id>. */
	USER_EVENT_REG_MULTI_FORMAT = 1U << 1,
	/* This value and above are not (yet) ABI. */
	USER_EVENT_REG_MAX = 1U << 2,
};

/* DIAG_IOCSREG's argument: set size and name_args at least. */
struct user_reg {
	uint32_t size;        /* in: sizeof(struct user_reg) */
	uint8_t enable_bit;   /* in: the bit of *enable_addr to keep up to date */
	uint8_t enable_size;  /* in: 4 or 8, the size of *enable_addr */
	uint16_t flags;       /* in: enum user_reg_flag */
	uint64_t enable_addr; /* in: the address of the enable value */
	uint64_t name_args;   /* in: the address of "name fields..." */
	uint32_t write_index; /* out: the first 4 bytes of every write */
} __attribute__((__packed__));

/* DIAG_IOCSUNREG's argument: stop updating (disable_addr, disable_bit). */
struct user_unreg {
	uint32_t size;         /* in: sizeof(struct user_unreg) */
	uint8_t disable_bit;   /* in: the bit given at registration */
	uint8_t __reserved;    /* in: 0 */
	uint16_t __reserved2;  /* in: 0 */
	uint64_t disable_addr; /* in: the address given at registration */
} __attribute__((__packed__));

#define DIAG_IOC_MAGIC '*'
/*
 * The size encoded in these numbers is a pointer's, not the struct's: the
 * kernel defines them that way, and the numbers are the ABI.
 */
/* Register an event (or look it up); fills write_index. */
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)
/* Delete an unused event by name (a char * argument). */
#define DIAG_IOCSDEL _IOW(DIAG_IOC_MAGIC, 1, char *)
/* Stop updating an enable bit. */
#define DIAG_IOCSUNREG _IOW(DIAG_IOC_MAGIC, 2, struct user_unreg *)

#endif /* _LINUX_USER_EVENTS_H */
#endif /* TRACEFS_FUSE_USER_EVENTS_H */
