// cflags: -I/usr/include/fuse3 -DFUSE_USE_VERSION=314
// link: -lfuse3
/*
 * A FUSE filesystem that never answers a read: what a client can mount (any
 * user can, through fusermount3) to stall whoever touches a page of its file
 * that is not cached yet.
 *
 * usage: stall_fs MOUNTPOINT [answer]
 *   One file, "page" (16 KiB, page cache on, so it can be mapped).  Prints
 *   "ready" once mounted, serves until the connection ends (unmounted or
 *   aborted through fusectl), then prints "ended" and exits 0.
 *   With "answer" it is an innocent, working filesystem instead: reads are
 *   answered, every 32-bit word of the file being 28 (a struct user_reg's
 *   size, for a struct that begins in it).
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define PAGE_INO 2

static void attr_of(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = 4 * 4096;
	}
}

static void stall_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (parent != FUSE_ROOT_ID || strcmp(name, "page")) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_entry_param e = {.ino = PAGE_INO};
	attr_of(PAGE_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void stall_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	attr_of(ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void stall_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_open(req, fi);
}

static int answering;

/* The point: the request is left unanswered, its reader waits. */
static void stall_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)off;
	(void)fi;
	if (answering) {
		static uint32_t words[4 * 4096 / 4];
		for (size_t i = 0; i < sizeof(words) / 4; i++)
			words[i] = 28;
		fuse_reply_buf(req, (const char *)words, size < sizeof(words) ? size : sizeof(words));
	}
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = stall_lookup,
	.getattr = stall_getattr,
	.open = stall_open,
	.read = stall_read,
};

int main(int argc, char **argv)
{
	if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "answer"))) {
		fprintf(stderr, "usage: stall_fs MOUNTPOINT [answer]\n");
		return 2;
	}
	answering = argc == 3;
	char *fuse_argv[] = {argv[0], NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, fuse_argv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se || fuse_session_mount(se, argv[1]) != 0) {
		fprintf(stderr, "stall_fs: cannot mount %s\n", argv[1]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	fuse_session_loop(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	printf("ended\n");
	return 0;
}
