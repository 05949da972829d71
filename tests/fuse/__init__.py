"""Tests of the FUSE adapter (tracefs_fuse.fuse)."""
