"""Writing files (JSON results, baselines, reports) that are never seen half-written."""

from __future__ import annotations

import json
import os
import tempfile


def write_atomically(path: str, data, indent: int = 1) -> None:
    """Writes ``data`` as JSON to ``path``, atomically (see ``write_text_atomically``)."""
    write_text_atomically(path, json.dumps(data, indent=indent) + "\n")


def write_text_atomically(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` via a temporary file in the same directory renamed over it.

    A reader (or a crash) sees the old file or the new one, never a mixture. The
    file gets the permissions a plain ``open(path, "w")`` would (0666 less the umask).
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
