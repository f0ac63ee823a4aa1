"""A fixed number of coroutines draining one queue: how many requests may be in flight."""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


async def run_workers(count: int, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run `count` copies of `work`; if one fails, the others are cancelled and it raises."""
    async with asyncio.TaskGroup() as workers:
        for _ in range(count):
            workers.create_task(work())
