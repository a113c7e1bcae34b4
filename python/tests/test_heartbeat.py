# SPDX-License-Identifier: MIT
"""`async with vigil.heartbeat(leases, lease)`: the reference's scenarios.

A recording port on an event loop with a virtual clock: every renewal is
checked by its place in the schedule (0.32 of the TTL), never against real
time. Then the same block over a real store, where the C keepalive renews.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

import pytest

import vigil
from conftest import needs, run_virtual

TTL = 1.0


@dataclass(frozen=True)
class FakeLease:
    key: str = "scope"
    owner: str = "me"
    token: int = 7
    ttl: float = TTL


class Recorder:
    """A port that records every call; `script` says what each renewal does
    (True/None: renewed, False: refused, an exception: raised, "hang": blocks)."""

    def __init__(self, *script, use_async=True):
        self.script = list(script)
        self.log = []  # (loop time, event)
        self.in_flight = 0
        self.use_async = use_async
        if not use_async:
            self.renew = self._renew_sync

    def _now(self):
        return asyncio.get_running_loop().time()

    def _outcome(self):
        step = self.script.pop(0) if self.script else True
        if isinstance(step, BaseException):
            raise step
        return step

    async def renew(self, lease):
        assert lease.token == 7
        self.log.append((self._now(), "renew"))
        self.in_flight += 1
        try:
            step = self.script[0] if self.script else True
            if step == "hang":
                self.script.pop(0)
                await asyncio.sleep(1e6)
            await asyncio.sleep(0.01)  # a round trip
            return self._outcome()
        finally:
            self.in_flight -= 1

    def _renew_sync(self, lease):
        self.log.append((self._now(), "renew"))
        return self._outcome()

    def release(self, lease=None):
        assert self.in_flight == 0, "a renewal was in flight at release"
        self.log.append((self._now(), "release"))

    def renewals(self):
        return [t for t, e in self.log if e == "renew"]


async def _hold(port, lease, seconds):
    async with vigil.heartbeat(port, lease) as hb:
        await asyncio.sleep(seconds)
        return hb


@pytest.mark.parametrize("use_async", [True, False])
def test_renews_every_third_of_the_ttl(use_async):
    port = Recorder(use_async=use_async)

    async def main():
        hb = await _hold(port, FakeLease(), 2.0)
        assert not hb.lost

    run_virtual(main())
    times = port.renewals()
    assert len(times) == 6  # at 0.32, 0.64, ... 1.92
    assert all(abs(t - 0.32 * (i + 1)) < 1e-6 for i, t in enumerate(times)), times


def test_two_lost_renewals_are_survived():
    port = Recorder(ConnectionError("db slow"), OSError("hiccup"))

    async def main():
        hb = await _hold(port, FakeLease(), 2.0)
        assert not hb.lost  # the third renewal, at 0.96 ttl, landed in time

    run_virtual(main())
    assert len(port.renewals()) == 6


def test_three_lost_renewals_lose_it_by_local_expiry():
    port = Recorder(ConnectionError(), ConnectionError(), ConnectionError())

    async def main():
        async with vigil.heartbeat(port, FakeLease()) as hb:
            await asyncio.wait_for(hb.wait_lost(), 10)  # told: the exit raises nothing
            assert asyncio.get_running_loop().time() == pytest.approx(TTL)
            await asyncio.sleep(3.0)

    run_virtual(main())
    assert len(port.renewals()) == 3  # nothing after the loss


def test_an_untold_loss_is_raised_on_exit():
    port = Recorder(False)

    async def main():
        with pytest.raises(vigil.Lost):
            async with vigil.heartbeat(port, FakeLease()):
                await asyncio.sleep(3.0)  # never looks

    run_virtual(main())


def test_the_readme_example_returns_quietly_when_it_sees_the_loss():
    port = Recorder(False)

    async def consolidate(leases, lease):
        async with vigil.heartbeat(leases, lease) as hb:
            await asyncio.sleep(3.0)
            if hb.lost:
                return "stopped"
        return "done"

    assert run_virtual(consolidate(port, FakeLease())) == "stopped"


@pytest.mark.parametrize("refusal", [False, vigil.Lost()])
def test_a_refusal_stops_it_for_good(refusal):
    port = Recorder(True, refusal)

    async def main():
        async with vigil.heartbeat(port, FakeLease()) as hb:
            await asyncio.sleep(5.0)
            assert hb.lost

    run_virtual(main())
    assert len(port.renewals()) == 2


def test_the_body_s_own_exception_wins_over_lost():
    port = Recorder(False)

    async def main():
        with pytest.raises(KeyError):
            async with vigil.heartbeat(port, FakeLease()) as hb:
                await hb.wait_lost()
                raise KeyError("the body's")

    run_virtual(main())


def test_local_expiry_fires_while_a_renewal_hangs_in_the_port():
    port = Recorder("hang")

    async def main():
        async with vigil.heartbeat(port, FakeLease()) as hb:
            await asyncio.wait_for(hb.wait_lost(), 10)
            assert asyncio.get_running_loop().time() == pytest.approx(TTL)

    run_virtual(main())
    assert len(port.renewals()) == 1 and port.in_flight == 0


def test_no_renewal_after_the_block_ends():
    port = Recorder()

    async def main():
        await _hold(port, FakeLease(), 1.0)
        port.release()  # asserts nothing is in flight
        await asyncio.sleep(5.0)

    run_virtual(main())
    events = [e for _, e in port.log]
    assert events[-1] == "release" and events.count("renew") == 3


def test_cancellation_of_the_enclosing_task():
    port = Recorder()

    async def main():
        task = asyncio.ensure_future(_hold(port, FakeLease(), 1e6))
        await asyncio.sleep(0.325)  # inside the first renewal's round trip
        assert port.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(5.0)

    run_virtual(main())
    # The heartbeat released it, after the renewal in flight came back.
    assert [e for _, e in port.log] == ["renew", "release"]


def test_an_exception_releases_and_a_normal_end_does_not():
    port = Recorder()

    async def main():
        with pytest.raises(KeyError):
            async with vigil.heartbeat(port, FakeLease()):
                raise KeyError("the body's")
        async with vigil.heartbeat(port, FakeLease()):
            pass

    run_virtual(main())
    assert [e for _, e in port.log] == ["release"]


def test_a_port_without_renew():
    async def main():
        async with vigil.heartbeat(object(), FakeLease()) as hb:
            await asyncio.sleep(10.0)
            assert not hb.lost

    run_virtual(main())


# ---- over a real store: the C keepalive renews ------------------------------


@pytest.fixture
def store(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as ls:
        yield ls


@pytest.mark.asyncio
async def test_a_real_lease_is_kept_past_its_ttl(store):
    lease = store.acquire("job", "me", 2.0)  # a TTL a loaded machine's stalls do not lapse
    async with vigil.heartbeat(store, lease) as hb:
        await asyncio.sleep(2.5)  # past the TTL
        assert not hb.lost
        assert store.get("job").token == lease.token
    store.release(lease)


@pytest.mark.asyncio
async def test_a_real_loss_is_known_in_the_loop(store):
    lease = store.acquire("job", "me", 0.3)
    started = time.monotonic()
    async with vigil.heartbeat(store, lease) as hb:
        store.release(lease)  # the next renewal is refused
        await asyncio.wait_for(hb.wait_lost(), 10)
        assert hb.lost
    assert time.monotonic() - started < 10


@pytest.mark.asyncio
async def test_the_loss_comes_through_the_keepalive_fd(store):
    needs("vigil_keepalive_fd")
    lease = store.acquire("job", "me", 0.3)
    with pytest.raises(vigil.Lost):
        async with vigil.heartbeat(store, lease) as hb:
            assert hb._fd is not None and hb._task is None  # no polling task
            store.release(lease)
            await asyncio.wait_for(hb._event.wait(), 10)


@pytest.mark.asyncio
async def test_cancelled_over_a_real_store_leaves_nothing_renewing(store):
    # A TTL of 3 s (renewed every 1 s): a loaded machine that stalls the
    # renewer for a 0.3 s TTL's whole life lost the lease before the
    # cancellation, and the release below raised Lost.
    lease = store.acquire("job", "me", 3)

    async def body():
        async with vigil.heartbeat(store, lease):
            await asyncio.sleep(1e6)

    task = asyncio.ensure_future(body())
    await asyncio.sleep(0.4)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.get("job") is None  # released by the cancellation, not left to its TTL
    store.release(lease)  # the caller's own release after it is quiet
    await asyncio.sleep(1.2)  # a stray renewal (every 1 s) would have resurrected it
    assert store.get("job") is None
    with pytest.raises(vigil.Lost):
        store.release(lease)  # once: a second is the usual Lost
