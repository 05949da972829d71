// link: -ltracefs -ltraceevent
// cflags: -I/usr/include/tracefs -I/usr/include/traceevent
/*
 * Where libtracefs looks for tracefs, and which of its calls reach a
 * directory given to tracefs_set_tracing_dir(): what a libtracefs tool
 * (trace-cmd among them) would use. user_events_data present means the call
 * reached a tracefs with user_events (our mount, on a kernel without them).
 *
 * usage: tracefs_dir [DIR]     with DIR: tracefs_set_tracing_dir(DIR) first
 * prints: "dir=<tracefs_tracing_dir()> read=yes|no exists=yes|no top=yes|no"
 *   read:   tracefs_instance_file_read(NULL, "user_events_status")
 *   exists: tracefs_file_exists(NULL, "user_events_data")
 *   top:    tracefs_file_exists() on tracefs_instance_alloc(DIR, NULL)
 */
#include <stdio.h>
#include <stdlib.h>
#include <tracefs.h>

static const char *yes(int b)
{
	return b ? "yes" : "no";
}

int main(int argc, char **argv)
{
	if (argc > 1 && tracefs_set_tracing_dir(argv[1])) {
		perror("tracefs_set_tracing_dir");
		return 1;
	}
	const char *dir = tracefs_tracing_dir();
	char *status = tracefs_instance_file_read(NULL, "user_events_status", NULL);
	struct tracefs_instance *top = tracefs_instance_alloc(dir, NULL);
	printf("dir=%s read=%s exists=%s top=%s\n", dir ? dir : "none", yes(status != NULL),
	       yes(tracefs_file_exists(NULL, "user_events_data")),
	       yes(top && tracefs_file_exists(top, "user_events_data")));
	free(status);
	tracefs_instance_free(top);
	return 0;
}
