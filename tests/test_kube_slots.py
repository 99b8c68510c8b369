"""The bound on requests in flight shared by a worker's processes (offloading/cluster/slots.py): threads
of two processes never hold more slots than the bound together, and a process that dies holding slots
leaves them free."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

from offloading.cluster.slots import SharedSlots

BOUND = 5


def _hammer(directory: str, counter: Any, peak: Any, lock: Any, threads: int, rounds: int) -> None:
    """A process's threads take a slot, count themselves in flight across both processes, hold it."""
    slots = SharedSlots(Path(directory))

    def work() -> None:
        for _ in range(rounds):
            with slots.held(BOUND):
                with lock:
                    counter.value += 1
                    peak.value = max(peak.value, counter.value)
                time.sleep(0.01)
                with lock:
                    counter.value -= 1

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


def test_two_processes_share_the_bound(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    counter, peak, lock = context.Value("i", 0), context.Value("i", 0), context.Lock()
    processes = [context.Process(target=_hammer, args=(str(tmp_path), counter, peak, lock, 12, 6)) for _ in range(2)]
    started = time.monotonic()
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    elapsed = time.monotonic() - started
    # 24 threads, 6 rounds of 10 ms each: one process alone would keep 12 in flight, both 24.
    assert peak.value <= BOUND, f"{peak.value} in flight at once, bound {BOUND}"
    assert peak.value >= BOUND - 1, f"only {peak.value} in flight at once: the slots were not used in parallel"
    assert elapsed >= 24 * 6 * 0.01 / BOUND  # the bound held them back


def _take_all_and_die(directory: str) -> None:
    slots = SharedSlots(Path(directory))
    for _ in range(BOUND):
        slots.acquire(BOUND)
    os._exit(0)  # no release: as a pool process killed mid-request


def test_a_process_that_dies_holding_slots_frees_them(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    process = context.Process(target=_take_all_and_die, args=(str(tmp_path),))
    process.start()
    process.join(30)
    slots = SharedSlots(tmp_path)
    taken: list[int | None] = []
    thread = threading.Thread(target=lambda: taken.extend(slots.acquire(BOUND) for _ in range(BOUND)))
    thread.start()
    thread.join(5)
    assert sorted(s for s in taken if s is not None) == list(range(BOUND))
    assert slots.in_use() == BOUND


def test_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    slots = SharedSlots(tmp_path)
    first, second = slots.acquire(2), slots.acquire(2)
    assert first is not None and second is not None and {first, second} == {0, 1}
    waited: list[int | None] = []
    thread = threading.Thread(target=lambda: waited.append(slots.acquire(2)))
    thread.start()
    thread.join(0.2)
    assert thread.is_alive() and not waited  # both slots taken: it waits
    slots.release(first)
    thread.join(5)
    assert waited == [first]


def test_an_unusable_directory_leaves_the_bound_per_process(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    slots = SharedSlots(blocker / "slots")
    with slots.held(3) as slot:
        assert slot is None  # nothing shared: the pacer's own bound still applies
