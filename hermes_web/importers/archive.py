"""Folder uploads: a ``.zip`` or ``.tar.gz`` of a session folder, unpacked into a private
temporary directory that is removed afterwards.

An archive is a file we did not write, so unpacking is bounded: members are plain files and
directories only (a link, device or FIFO refuses the archive), no absolute path or ``..``,
at most ``MAX_MEMBERS`` of them, and the bytes written are counted as they are written,
never more than the upload limit in all (a bomb stops there, whatever its headers claim).
"""

from __future__ import annotations

import re
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

from hermes_web.importers.base import ImportProblem, max_bytes

SUFFIXES = (".zip", ".tar.gz", ".tgz")
MAX_MEMBERS = 10_000
_CHUNK = 1024 * 1024


def archive_kind(path: Path, file: str) -> str:
    """ "zip" or "tar.gz" when ``file`` is named as an archive and its first bytes are one;
    "" otherwise (a file inside an archive is never named so: no archive in an archive)."""
    if not file.lower().endswith(SUFFIXES):
        return ""
    with open(path, "rb") as stream:
        head = stream.read(4)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "tar.gz"
    return ""


@contextmanager
def unpacked(path: Path, kind: str, file: str) -> Iterator[Path]:
    """The archive unpacked in a temporary directory, removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="hermes-import-") as tmp:
        root = Path(tmp)
        try:
            if kind == "zip":
                _unzip(path, root, file)
            else:
                _untar(path, root, file)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as error:
            raise ImportProblem(file, 0, f"a broken {kind} archive: {error}") from None
        except (NotImplementedError, RuntimeError) as error:  # a compression or encryption
            raise ImportProblem(file, 0, f"cannot unpack this {kind} archive: {error}") from None
        yield root


def _member_path(name: str, root: Path, file: str) -> Path | None:
    """Where a member goes under ``root``; None for the archive's own top (``./``)."""
    text = name.replace("\\", "/")
    if "\x00" in text:
        raise ImportProblem(file, 0, f"{name!r}: a NUL in a member name: refused")
    if text.startswith("/") or re.match(r"[A-Za-z]:", text):
        raise ImportProblem(file, 0, f"{name!r}: an absolute path in the archive: refused")
    parts = [part for part in PurePosixPath(text).parts if part not in ("", ".")]
    if ".." in parts:
        raise ImportProblem(file, 0, f"{name!r}: '..' in a member name: refused")
    if any(len(part.encode()) > 255 for part in parts):
        raise ImportProblem(file, 0, f"{name[:80]!r}…: a member name too long: refused")
    return root.joinpath(*parts) if parts else None


class _Budget:
    """The bytes every member may still write, shared by the whole archive."""

    def __init__(self, file: str) -> None:
        self.left = max_bytes()
        self.file = file

    def copy(self, source: IO[bytes], target: Path, name: str) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            out = open(target, "xb")  # noqa: SIM115 - closed below
        except FileExistsError:
            raise ImportProblem(self.file, 0, f"{name!r} appears twice in the archive") from None
        with out:
            while chunk := source.read(_CHUNK):
                self.left -= len(chunk)
                if self.left < 0:
                    raise ImportProblem(
                        self.file,
                        0,
                        f"the archive unpacks to more than {max_bytes() // 2**20} MB: refused",
                    )
                out.write(chunk)


def _count(number: int, file: str) -> None:
    if number > MAX_MEMBERS:
        raise ImportProblem(file, 0, f"the archive holds more than {MAX_MEMBERS} members")


def _unzip(path: Path, root: Path, file: str) -> None:
    budget = _Budget(file)
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        _count(len(members), file)
        for info in members:
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ImportProblem(file, 0, f"{info.filename!r}: a symbolic link: refused")
            target = _member_path(info.filename, root, file)
            if target is None:
                continue
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise ImportProblem(file, 0, f"{info.filename!r}: not a plain file: refused")
            with archive.open(info) as source:
                budget.copy(source, target, info.filename)


def _untar(path: Path, root: Path, file: str) -> None:
    budget = _Budget(file)
    with tarfile.open(path, "r:gz") as archive:
        for number, member in enumerate(archive, start=1):
            _count(number, file)
            target = _member_path(member.name, root, file)
            if member.issym() or member.islnk():
                raise ImportProblem(file, 0, f"{member.name!r}: a link: refused")
            if target is None:
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if not member.isreg():
                raise ImportProblem(file, 0, f"{member.name!r}: not a plain file: refused")
            source = archive.extractfile(member)
            if source is not None:
                with source:
                    budget.copy(source, target, member.name)
