"""The block writer: the same bytes whichever way they reach the disk, and no half file.

Blocks are made small here (64 KiB, still aligned as ``O_DIRECT`` needs) so that a few
hundred KiB cross several of them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_replay import atomic, blockwrite
from sandbox_replay.atomic import write_chunks_atomic
from sandbox_replay.blockwrite import BlockWriter

BLOCK = 64 * 1024


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blockwrite, "BLOCK_SIZE", BLOCK)


def pieces(total: int) -> list[bytes | memoryview]:
    """Pieces of uneven sizes (some past a block, some a memoryview) adding up to ``total``."""
    sizes = [1, 4095, BLOCK, 3 * BLOCK + 17, 12345, 7]
    out: list[bytes | memoryview] = []
    made, n = 0, 0
    while made < total:
        size = min(sizes[n % len(sizes)], total - made)
        data = bytes((made + i) % 251 for i in range(size))
        out.append(memoryview(b"#" + data + b"#")[1:-1] if n % 2 else data)
        made, n = made + size, n + 1
    return out


def write(path: Path, parts: list[bytes | memoryview]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with BlockWriter(fd) as out:
            out.writelines(parts)
    finally:
        os.close(fd)


def writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sandbox-replay-write"]


@pytest.mark.parametrize("total", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 4321])
def test_the_file_holds_exactly_the_pieces(tmp_path: Path, total: int) -> None:
    parts = pieces(total)
    write(tmp_path / "out", parts)
    assert (tmp_path / "out").read_bytes() == b"".join(parts)
    assert writer_threads() == []


def test_full_blocks_go_around_the_page_cache_and_the_tail_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct_writes: list[int] = []
    cached_writes: list[int] = []
    real_write = os.write

    def spy(fd: int, data: bytes | memoryview) -> int:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        (direct_writes if flags & os.O_DIRECT else cached_writes).append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(blockwrite.os, "write", spy)
    parts = pieces(3 * BLOCK + 100)
    write(tmp_path / "out", parts)
    assert (tmp_path / "out").read_bytes() == b"".join(parts)
    if not direct_writes:  # this file system refused O_DIRECT: all went through the cache
        assert cached_writes == [BLOCK, BLOCK, BLOCK, 100]
    else:
        assert direct_writes == [BLOCK, BLOCK, BLOCK]
        assert cached_writes == [100]


def test_a_small_file_is_one_ordinary_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[int, int]] = []
    real_write, real_fcntl = os.write, fcntl.fcntl

    def spy(fd: int, data: bytes | memoryview) -> int:
        calls.append((fd, len(data)))
        return real_write(fd, data)

    def no_flags(fd: int, command: int, *args: int) -> int:
        assert command != fcntl.F_SETFL, "a small file never changes its flags"
        return real_fcntl(fd, command, *args)

    monkeypatch.setattr(blockwrite.os, "write", spy)
    monkeypatch.setattr(blockwrite.fcntl, "fcntl", no_flags)
    write(tmp_path / "out", [b"{", b'"a": 1', b"}\n"])
    assert (tmp_path / "out").read_bytes() == b'{"a": 1}\n'
    assert [size for _, size in calls] == [9]
    assert writer_threads() == []


def test_a_file_system_without_o_direct_gets_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fcntl = fcntl.fcntl

    def refuse_direct(fd: int, command: int, *args: int) -> int:
        if command == fcntl.F_SETFL and args and args[0] & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_fcntl(fd, command, *args)

    monkeypatch.setattr(blockwrite.fcntl, "fcntl", refuse_direct)
    parts = pieces(4 * BLOCK + 3)
    write(tmp_path / "out", parts)
    assert (tmp_path / "out").read_bytes() == b"".join(parts)


@pytest.fixture
def refused_direct_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that takes the O_DIRECT flag, then refuses each such write (EINVAL)."""
    real_write = os.write

    def refuse_direct(fd: int, data: bytes | memoryview) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(blockwrite.os, "write", refuse_direct)


@pytest.mark.usefixtures("refused_direct_writes")
def test_a_direct_write_refused_late_falls_back_to_the_page_cache(tmp_path: Path) -> None:
    """Some file systems take the flag, then refuse the write itself with EINVAL."""
    parts = pieces(4 * BLOCK + 3)
    write(tmp_path / "out", parts)
    assert (tmp_path / "out").read_bytes() == b"".join(parts)


def test_a_short_write_is_finished_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    shortened: list[bool] = []

    def short_once(fd: int, data: bytes | memoryview) -> int:
        if not shortened and len(data) == BLOCK:
            shortened.append(True)
            return real_write(fd, memoryview(data)[:1000])  # not a multiple of any block
        return real_write(fd, data)

    monkeypatch.setattr(blockwrite.os, "write", short_once)
    parts = pieces(3 * BLOCK + 5)
    write(tmp_path / "out", parts)
    assert shortened
    assert (tmp_path / "out").read_bytes() == b"".join(parts)


def test_an_error_of_the_writing_thread_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(blockwrite.os, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write(tmp_path / "out", pieces(6 * BLOCK))
    assert writer_threads() == []


def test_an_error_of_the_caller_stops_the_writing_thread(tmp_path: Path) -> None:
    def failing() -> Iterator[bytes]:
        yield b"x" * (3 * BLOCK)
        raise ValueError("the record could not be built")

    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(ValueError, match="could not be built"), BlockWriter(fd) as out:
            out.writelines(failing())
    finally:
        os.close(fd)
    assert writer_threads() == []


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "record.json"
    target.write_bytes(b"old\n")

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_chunks_atomic(target, pieces(5 * BLOCK))
    assert target.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_an_atomic_write_of_many_blocks_is_exact(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    parts = pieces(7 * BLOCK + 999)
    write_chunks_atomic(target, parts)
    assert target.read_bytes() == b"".join(parts)
    assert oct(target.stat().st_mode & 0o777) == "0o600"  # as mkstemp made it


def write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        blockwrite.write_whole(fd, data)
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [0, 10, 64 * 1024 - 1, 64 * 1024, 300_001, 2_000_000])
def test_a_whole_file_holds_exactly_its_bytes(tmp_path: Path, size: int) -> None:
    data = bytes(i % 253 for i in range(size))
    write_file(tmp_path / "page.html", data)
    assert (tmp_path / "page.html").read_bytes() == data


def test_a_whole_file_goes_around_the_page_cache_but_its_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[tuple[bool, int]] = []
    real_write = os.write

    def spy(fd: int, data: bytes | memoryview) -> int:
        writes.append((bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT), len(data)))
        return real_write(fd, data)

    monkeypatch.setattr(blockwrite.os, "write", spy)
    write_file(tmp_path / "small.html", b"x" * 5000)
    assert writes == [(False, 5000)]
    writes.clear()
    write_file(tmp_path / "large.html", b"y" * 300_001)
    bulk = 300_001 - 300_001 % 4096
    if writes[0][0]:  # this file system takes O_DIRECT
        assert writes == [(True, bulk), (False, 300_001 - bulk)]
    else:
        assert writes == [(False, 300_001)]
    buffer = blockwrite._staging[0] if blockwrite._staging else None
    write_file(tmp_path / "again.html", b"z" * 200_000)
    assert (blockwrite._staging[0] if blockwrite._staging else None) is buffer  # reused
    assert (tmp_path / "large.html").read_bytes() == b"y" * 300_001
    assert (tmp_path / "again.html").read_bytes() == b"z" * 200_000


@pytest.mark.usefixtures("refused_direct_writes")
def test_a_whole_file_where_o_direct_is_refused_gets_the_same_bytes(tmp_path: Path) -> None:
    data = bytes(i % 249 for i in range(500_000))
    write_file(tmp_path / "page.html", data)
    assert (tmp_path / "page.html").read_bytes() == data


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_reused_buffer_is_private_to_each_process(tmp_path: Path) -> None:
    """A page helper forked after this process wrote a page must not share its buffer.

    An anonymous mmap is shared by default: the helper's pages and this process's would
    then be copied into the same memory, and each could write the other's bytes.
    """
    mine = b"m" * 200_000
    write_file(tmp_path / "mine.html", mine)
    if not blockwrite._staging:
        pytest.skip("this file system refuses O_DIRECT: no buffer is kept to share")
    pid = os.fork()
    if pid == 0:  # the helper: writes its own page through its copy of the buffer
        try:
            write_file(tmp_path / "theirs.html", b"t" * 200_000)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert (tmp_path / "theirs.html").read_bytes() == b"t" * 200_000
    assert (
        bytes(blockwrite._staging[0][: 200_000 - 200_000 % 4096])
        == mine[: 200_000 - 200_000 % 4096]
    )
