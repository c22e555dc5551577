"""Render a large run's listing sub-pages in this process and in processes forked from it.

The forked processes share the replay copy-on-write, claim pages from a ``_PageQueue`` and
write them into the staging folder themselves (``render_shared``).
"""

from __future__ import annotations

import gc
import os
import select
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from sandbox_replay.forking import die_with_parent

if TYPE_CHECKING:
    from sandbox_replay.report.render import Renderer
    from sandbox_replay.report.views import RunPages, RunView


class MatchedTextError(ValueError):
    """A page would repeat text the forbidden-material scan matched."""


class _PageQueue:
    """The numbers of a run's sub-pages, claimed by whichever process is free next.

    They wait in a pipe as 4-byte tokens (a pipe read of 4 bytes never splits one), each for
    a block of pages sized so that every token fits in ``PIPE_BUF`` bytes.
    """

    TOKENS = select.PIPE_BUF // 4

    def __init__(self, count: int) -> None:
        self.count = count
        self.block = max(1, -(-count // self.TOKENS))
        self.read, write = os.pipe()
        try:
            tokens = b"".join(n.to_bytes(4, "little") for n in range(0, count, self.block))
            if os.write(write, tokens) != len(tokens):
                raise OSError("the page queue did not fit its pipe")
        except BaseException:
            os.close(self.read)
            raise
        finally:
            os.close(write)

    def __iter__(self) -> Iterator[int]:
        while len(token := os.read(self.read, 4)) == 4:
            first = int.from_bytes(token, "little")
            yield from range(first, min(first + self.block, self.count))

    def close(self) -> None:
        os.close(self.read)


def render_shared(
    make_pages: Callable[[], RunPages],
    count: int,
    renderer: Renderer,
    helpers: int,
    emit: Callable[[str, bytes], None],
    write_result: Callable[[], str],
    run_page: Callable[[RunPages, str], RunView],
    say: Callable[[str], None] = lambda message: None,
    tick: Callable[[], None] = lambda: None,
) -> tuple[str, RunView]:
    """Write the result record, the run page and the ``count`` sub-pages; return the record's
    digest and the run page's view.

    ``helpers`` forked processes render sub-pages from a ``_PageQueue`` while this one
    writes the record and the run page, then takes pages too. Should a helper die, this
    process renders again every page it did not render itself, and ``say``s so. ``tick``
    is called for each page this one renders.
    """
    if helpers < 1:
        digest = write_result()
        pages = make_pages()
        for relative, page in pages.subpages(None):
            emit(relative, renderer.render_listing(page))
            tick()
        return digest, run_page(pages, digest)
    queue = _PageQueue(count)
    gc.freeze()  # the replay shared copy-on-write, out of the collector's reach
    children: list[int] = []
    try:
        children = _fork_helpers(helpers, queue, make_pages, renderer, emit)
        digest = write_result()
        pages = make_pages()
        view = run_page(pages, digest)
        mine: list[int] = []
        for relative, page in pages.subpages(_claimed(queue, mine)):
            emit(relative, renderer.render_listing(page))
            tick()
        failed = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        children = []
    finally:
        for pid in children:  # only when this process failed first
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        queue.close()
        gc.unfreeze()
    if _MATCHED in failed:
        raise MatchedTextError(
            "a listing page would contain text the forbidden-material scan matched; "
            "nothing was written"
        )
    lost = [code for code in failed if code]
    if lost:
        rest = sorted(set(range(count)).difference(mine))
        held = f"rendering the {len(rest)} pages it may have held in this one"
        say(
            f"a process rendering listing pages ended with {_ended(lost[0])}; "
            + (held if rest else "it held no page")
        )
        for relative, page in pages.subpages(rest):
            emit(relative, renderer.render_listing(page))
    return digest, view


_MATCHED = 3  # the exit status of a helper that met matched text


def _fork_helpers(
    helpers: int,
    queue: _PageQueue,
    make_pages: Callable[[], RunPages],
    renderer: Renderer,
    emit: Callable[[str, bytes], None],
) -> list[int]:
    """Fork ``helpers`` processes that render sub-pages from ``queue``; return their pids."""
    children: list[int] = []
    try:
        for _ in range(helpers):
            pid = os.fork()
            if pid == 0:  # the child: never returns
                status = 0
                try:
                    die_with_parent()
                    for relative, page in make_pages().subpages(queue):
                        emit(relative, renderer.render_listing(page))
                except MatchedTextError:
                    status = _MATCHED
                except BaseException:
                    status = 1
                os._exit(status)
            children.append(pid)
    except BaseException:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    return children


def _claimed(queue: Iterable[int], mine: list[int]) -> Iterator[int]:
    """Yield the page numbers ``queue`` hands this process, noting each in ``mine``."""
    for number in queue:
        mine.append(number)
        yield number


def _ended(code: int) -> str:
    """Name how a process ended from its exit code (negative: the signal that killed it)."""
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"
