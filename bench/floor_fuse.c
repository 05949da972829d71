/*
 * The FUSE floor: the least a libfuse 3.14 low-level filesystem can do to
 * serve user_events_data.  One file, /user_events_data (0666); write() and
 * ioctl() succeed without looking at the data, so what remains is the cost of
 * FUSE itself: the kernel round trip, libfuse's parsing and the reply.
 * read() returns up to one 4 KiB page of zeros, every time: the floor of a
 * trace_pipe_raw read.
 *
 * It is opened the way tracefs-fuse opens it (direct_io, nonseekable,
 * FOPEN_STREAM | FOPEN_NOFLUSH | FOPEN_PARALLEL_DIRECT_WRITES), one thread
 * serves every request (fuse_session_loop, as tracefs-fuse's single trio
 * thread), and the mount options are tracefs-fuse's.  fuse_file_info of 3.14
 * cannot carry FOPEN_STREAM or FOPEN_PARALLEL_DIRECT_WRITES, so a custom io
 * adds them to OPEN replies on the wire (as tracefs_fuse/fuse/_bridge.c does).
 *
 *   floor_fuse MOUNTPOINT      serves in the foreground until unmounted
 */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#define FILE_INO 2
#define FILE_NAME "user_events_data"

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0666;
	st->st_nlink = ino == FUSE_ROOT_ID ? 2 : 1;
}

static void fl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .ino = FILE_INO, .attr_timeout = 1, .entry_timeout = 1 };
	if (parent != FUSE_ROOT_ID || strcmp(name, FILE_NAME)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(FILE_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, 1);
}

static void fl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->direct_io = 1;
	fi->nonseekable = 1;
	fuse_reply_open(req, fi);
}

static void fl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)off, (void)fi;
	fuse_reply_write(req, size);
}

static void fl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	static const char page[4096];
	(void)ino, (void)off, (void)fi;
	fuse_reply_buf(req, page, size < sizeof page ? size : sizeof page);
}

static void fl_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf,
		     size_t in_bufsz, size_t out_bufsz)
{
	(void)ino, (void)cmd, (void)arg, (void)fi, (void)flags, (void)in_buf, (void)in_bufsz,
		(void)out_bufsz;
	fuse_reply_ioctl(req, 0, NULL, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = fl_lookup,
	.getattr = fl_getattr,
	.open = fl_open,
	.read = fl_read,
	.write = fl_write,
	.ioctl = fl_ioctl,
};

/* The custom io: requests are read as usual; the reply to the last OPEN gets
 * the FOPEN_* bits fuse_file_info lacks.  Single-threaded, so an OPEN is
 * always answered before the next request is read. */
static uint64_t open_unique;

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;
	if (n >= (ssize_t)sizeof *in && in->opcode == FUSE_OPEN)
		open_unique = in->unique;
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	const struct fuse_out_header *out = iov[0].iov_base;
	if (open_unique && out->unique == open_unique && out->error == 0 && count == 2 &&
	    iov[1].iov_len == sizeof(struct fuse_open_out)) {
		((struct fuse_open_out *)iov[1].iov_base)->open_flags |=
			FOPEN_STREAM | FOPEN_NOFLUSH | FOPEN_PARALLEL_DIRECT_WRITES;
		open_unique = 0;
	}
	return writev(fd, iov, count);
}

static const struct fuse_custom_io io = { .writev = io_writev, .read = io_read };

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
		return 2;
	}
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, "fsname=floor,subtype=floor,allow_other,default_permissions"))
		return 1;
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
	if (!se)
		return 1;
	int rc = 1;
	if (fuse_set_signal_handlers(se) == 0) {
		if (fuse_session_mount(se, argv[1]) == 0) {
			if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0)
				rc = fuse_session_loop(se) ? 1 : 0;
			else
				fprintf(stderr, "floor_fuse: fuse_session_custom_io failed\n");
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc;
}
