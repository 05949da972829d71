"""The host we run on: namespaces, mounts, environment checks, the host's event ids.

Owns: ``run``'s namespaces and mounts (``_namespace``), mountinfo (``_mountinfo``:
our fstype and device), the checks that explain what the host lacks
(``_environment``) and the host kernel's highest event id (``_host_events``).
May import: ``lib``.
"""
