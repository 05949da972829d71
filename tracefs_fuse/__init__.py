"""tracefs-fuse: a user-space tracefs for Linux user_events, served over FUSE."""

__version__ = "0.1.0"
