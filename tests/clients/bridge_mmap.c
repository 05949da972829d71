// Text read(2) vs. binary mmap on one direct_io file, plus notify_store
// (pyfuse3's, and the bridge's storer thread).
//
// usage: bridge_mmap DIR
// DIR is a bridge_testfs mount: DIR/dual is read and mapped, DIR/ctl asks the
// daemon to notify_store into dual's page.  Prints key=value lines.
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char dir[4096];

static int open_in(const char *name, int flags)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, flags);
	if (fd < 0) {
		perror(path);
		exit(errno);
	}
	return fd;
}

static void print_text(const char *key, int fd)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0) {
		perror("pread");
		exit(errno);
	}
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	printf("%s=%s\n", key, buf);
}

static void print_hex(const char *key, const unsigned char *p, size_t off, size_t n)
{
	printf("%s=", key);
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[off + i]);
	printf("\n");
}

// Returns once the daemon has stored: the write is answered after notify_store.
// VERB "queue" stores each of the HEX words as a batch of its own.
static void store(const char *verb, size_t off, const char *hex)
{
	char cmd[128];
	int n = snprintf(cmd, sizeof(cmd), "%s %zu %s", verb, off, hex);
	int fd = open_in("ctl", O_WRONLY);
	if (write(fd, cmd, n) != n) {
		perror("write(ctl)");
		exit(errno);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return EINVAL;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	int fd = open_in("dual", O_RDONLY);
	print_text("read_before_mmap", fd);
	unsigned char *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap(MAP_SHARED)");
		return errno;
	}
	print_hex("mapped", p, 0, 8);
	print_text("read_while_mapped", fd);

	store("store", 8, "c0ffee01");
	print_hex("after_store_open", p, 8, 4);

	close(fd);
	store("store", 16, "0badf00d");
	print_hex("after_store_closed", p, 16, 4);

	fd = open_in("dual", O_RDONLY);
	print_text("read_new_fd", fd);
	print_hex("mapped_after_reopen", p, 8, 12);
	// Batches land in the order they were queued; the reply after the last.
	store("queue", 24, "11111111 22222222 33333333");
	print_hex("after_queued_batches", p, 24, 4);
	close(fd);
	return 0;
}
