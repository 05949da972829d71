/*
 * What the calling user may do in a tracefs: one line per attempt,
 * "<what>: ok" or "<what>: <errno name>".  Changes nothing it is refused
 * and undoes what it is allowed (a registration is unregistered, a chmod
 * sets the mode it found).
 *
 * usage: adv_perms TRACEFS_DIR PERSISTENT_EVENT
 *   PERSISTENT_EVENT: a user event root created with the PERSIST flag.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;

static const char *path(const char *rel)
{
	static char buf[4][512];
	static int next;
	char *p = buf[next++ % 4];
	snprintf(p, 512, "%s/%s", dir, rel);
	return p;
}

static void report(const char *what, int ok)
{
	printf("%s: %s\n", what, ok ? "ok" : strerrorname_np(errno));
}

static int open_read(const char *rel)
{
	int fd = open(path(rel), O_RDONLY);
	char c;
	int ok = fd >= 0 && read(fd, &c, 1) >= 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static int open_only(const char *rel, int flags)
{
	int fd = open(path(rel), flags);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

static int reg(int fd, const char *name, uint16_t flags, volatile uint32_t *word)
{
	struct user_reg r = {.size = sizeof r, .enable_bit = 0, .enable_size = 4, .flags = flags,
			     .enable_addr = (uint64_t)(uintptr_t)word,
			     .name_args = (uint64_t)(uintptr_t)name};
	return ioctl(fd, DIAG_IOCSREG, &r) == 0 ? (int)r.write_index : -1;
}

int main(int argc, char **argv)
{
	static volatile uint32_t word, persist_word;
	char name[64];
	if (argc != 3) {
		fprintf(stderr, "usage: %s TRACEFS_DIR PERSISTENT_EVENT\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	snprintf(name, sizeof name, "adv_perm_%u u32 x", (unsigned)getuid());

	DIR *d = opendir(dir);
	report("readdir", d != NULL);
	if (d)
		closedir(d);
	report("read_tracing_on", open_read("tracing_on"));
	report("read_trace", open_read("trace"));
	report("read_status", open_read("user_events_status"));
	report("write_tracing_on", open_only("tracing_on", O_WRONLY));
	report("write_buffer_size_kb", open_only("buffer_size_kb", O_WRONLY));
	report("write_dynamic_events", open_only("dynamic_events", O_WRONLY));
	report("open_data_rw", open_only("user_events_data", O_RDWR));

	report("open_data_ro", open_only("user_events_data", O_RDONLY));
	/* Registering needs any descriptor; writing a writable one. */
	int fd = open(path("user_events_data"), O_RDWR);
	if (fd < 0)
		fd = open(path("user_events_data"), O_RDONLY);
	if (fd >= 0) {
		int index = reg(fd, name, 0, &word);
		report("register", index >= 0);
		if (index >= 0) {
			uint32_t payload[2] = {(uint32_t)index, 7};
			report("write_event", write(fd, payload, sizeof payload) >= 0);
			struct user_unreg u = {.size = sizeof u, .disable_bit = 0,
					       .disable_addr = (uint64_t)(uintptr_t)&word};
			report("unregister", ioctl(fd, DIAG_IOCSUNREG, &u) == 0);
		}
		int persist = reg(fd, name, USER_EVENT_REG_PERSIST, &persist_word);
		report("register_persist", persist >= 0);
		report("delete_persistent", ioctl(fd, DIAG_IOCSDEL, argv[2]) == 0);
		close(fd);
	}

	int raw = open(path("per_cpu/cpu0/trace_pipe_raw"), O_RDONLY | O_NONBLOCK);
	report("open_trace_pipe_raw", raw >= 0);
	if (raw >= 0) {
		void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, raw, 0);
		report("mmap_trace_pipe_raw", p != MAP_FAILED);
		if (p != MAP_FAILED)
			munmap(p, 4096);
		close(raw);
	}

	struct stat st;
	int found = stat(path("user_events_data"), &st) == 0;
	report("stat_data", found);
	report("chmod_data", chmod(path("user_events_data"), found ? st.st_mode & 07777 : 0640) == 0);
	return 0;
}
