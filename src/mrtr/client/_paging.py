"""Walking a paginated `*/list` method to its end, within `ClientLimits`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sized
from typing import Protocol, TypeVar

from mrtr.protocol import UNSET, UnsetType

from ._errors import ListTooLong
from ._limits import ClientLimits

__all__ = ["Page", "walk"]


class Page(Protocol):
    """What a list result has in common: the cursor of the next page and a cache TTL."""

    @property
    def next_cursor(self) -> str | UnsetType: ...
    @property
    def ttl_ms(self) -> int: ...


PageT = TypeVar("PageT", bound=Page)


async def walk(
    fetch: Callable[[str | UnsetType], Awaitable[PageT]],
    items: Callable[[PageT], Sized],
    *,
    method: str,
    limits: ClientLimits,
) -> list[PageT]:
    """Every page from `fetch(cursor)`, first cursor UNSET; a cursor seen before ends the walk.

    Raises ListTooLong past `limits.max_items`, or when page `limits.max_pages` still has a
    `nextCursor`.
    """
    pages: list[PageT] = []
    seen: set[str] = set()
    count = 0
    cursor: str | UnsetType = UNSET
    while True:
        page = await fetch(cursor)
        pages.append(page)
        count += len(items(page))
        cursor = page.next_cursor
        done = cursor is UNSET or cursor in seen
        if count > limits.max_items or (not done and len(pages) >= limits.max_pages):
            raise ListTooLong(
                f"{method}: {'' if done else 'still a nextCursor after '}{len(pages)} pages "
                f"and {count} items (limits: max_pages={limits.max_pages}, "
                f"max_items={limits.max_items})"
            )
        if done:
            return pages
        seen.add(cursor)  # type: ignore[arg-type]  # not UNSET: `done` is False
