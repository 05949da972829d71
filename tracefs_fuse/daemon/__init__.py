"""The daemon: configuration, wiring, serving, running a command under a mount.

Owns: the mount's configuration (``_config``) and options (``_mount_options``),
the daemon that wires the engine, the FUSE protocol, the processes and the
host together (``_daemon``), serving in-process (``_serve``), ``run``
(``_run``), logging and systemd notification.
May import: ``engine``, ``lib``, ``process``, ``host``, ``fuse``, ``record``, ``perf``.
"""
