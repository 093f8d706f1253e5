"""Shared by the sweep and fault drills: the child processes of a pid, read from /proc."""


def children(pid):
    """The pids of pid's children ([] once it has exited)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []
