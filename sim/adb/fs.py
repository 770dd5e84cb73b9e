"""An in-memory file tree for the device shell (screencap FILE, ls, rm, cat) and sync."""

from __future__ import annotations

import posixpath
import threading
import time
from dataclasses import dataclass, field

DEFAULT_DIRS = ("/", "/sdcard", "/sdcard/Download", "/sdcard/Pictures", "/data", "/data/local",
                "/data/local/tmp", "/system", "/system/bin", "/storage", "/dev")


@dataclass
class Entry:
    is_dir: bool
    data: bytes = b""
    mode: int = 0o644
    mtime: int = field(default_factory=lambda: int(time.time()))


class VirtualFS:
    """Thread-safe; paths are absolute POSIX paths, normalised (no symlinks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {d: Entry(True, mode=0o771) for d in DEFAULT_DIRS}
        self._entries["/dev/null"] = Entry(False, mode=0o666)

    @staticmethod
    def norm(path: str, cwd: str = "/") -> str:
        return posixpath.normpath(posixpath.join(cwd, path)).replace("//", "/")

    def get(self, path: str) -> Entry | None:
        with self._lock:
            return self._entries.get(self.norm(path))

    def read(self, path: str) -> bytes:
        e = self.get(path)
        if e is None:
            raise FileNotFoundError(path)
        if e.is_dir:
            raise IsADirectoryError(path)
        return e.data

    def write(self, path: str, data: bytes, append: bool = False, mode: int = 0o644,
              mtime: int | None = None, parents: bool = False) -> None:
        """Create or replace a file; `parents` makes missing directories as adbd's push does."""
        p = self.norm(path)
        if parents:
            self.mkdir(posixpath.dirname(p), parents=True)
        if p == "/dev/null":
            return
        with self._lock:
            parent = self._entries.get(posixpath.dirname(p))
            if parent is None or not parent.is_dir:
                raise FileNotFoundError(path)
            old = self._entries.get(p)
            if old is not None and old.is_dir:
                raise IsADirectoryError(path)
            body = (old.data if old is not None and append else b"") + data
            entry = Entry(False, body, mode if old is None else old.mode)
            if mtime:
                entry.mtime = mtime
            self._entries[p] = entry

    def mkdir(self, path: str, parents: bool = False) -> None:
        p = self.norm(path)
        with self._lock:
            if p in self._entries:
                if parents and self._entries[p].is_dir:
                    return
                raise FileExistsError(path)
            parent = posixpath.dirname(p)
            if parent not in self._entries:
                if not parents:
                    raise FileNotFoundError(path)
                chain = []
                while parent not in self._entries:
                    chain.append(parent)
                    parent = posixpath.dirname(parent)
                if not self._entries[parent].is_dir:
                    raise NotADirectoryError(path)
                for d in reversed(chain):
                    self._entries[d] = Entry(True, mode=0o775)
            elif not self._entries[parent].is_dir:
                raise NotADirectoryError(path)
            self._entries[p] = Entry(True, mode=0o775)

    def remove(self, path: str, recursive: bool = False) -> None:
        p = self.norm(path)
        with self._lock:
            e = self._entries.get(p)
            if e is None:
                raise FileNotFoundError(path)
            if e.is_dir:
                if not recursive:
                    raise IsADirectoryError(path)
                for k in [k for k in self._entries if k == p or k.startswith(p + "/")]:
                    del self._entries[k]
            else:
                del self._entries[p]

    def listdir(self, path: str) -> list[str]:
        p = self.norm(path)
        with self._lock:
            e = self._entries.get(p)
            if e is None:
                raise FileNotFoundError(path)
            if not e.is_dir:
                raise NotADirectoryError(path)
            return sorted(
                posixpath.basename(k) for k in self._entries
                if k != p and posixpath.dirname(k) == p
            )
