"""Whether a process still runs: how staging folders of dead runs are told from live ones."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while process `pid` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
