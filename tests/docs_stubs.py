# SPDX-License-Identifier: MIT
"""Placeholders for the reader's own code in the documentation's Python
blocks (tests/docs_blocks.py runs each block with these as builtins): the
work a worker does, what a watchdog does with reclaimed units. Each one
does nothing, or the least a block needs to run to its end."""
import asyncio
import builtins


def work():
    """The items a worker goes through."""
    return range(3)


def do(item):
    """One item's work."""


def do_work(unit):
    """One unit's work."""


def step(phase):
    """One phase's work."""


def requeue(*reclaimed):
    """Hand reclaimed units out again."""


def write_report(*args, **kwargs):
    """The work a lease protects."""


def lead(*args, **kwargs):
    """What the leader does."""


async def long_running_cycle():
    """An asyncio body."""
    await asyncio.sleep(0)


async def work_async():
    """An asyncio body."""
    await asyncio.sleep(0)


for _name, _value in list(globals().items()):
    if callable(_value) and not _name.startswith("_") and _value.__module__ == __name__:
        setattr(builtins, _name, _value)
