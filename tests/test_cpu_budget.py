"""One CPU budget across processes (``kb.core.cpu``): ingest work holds a slot of a machine-wide set of lock files,
a process answering questions keeps a core free of it, and a killed holder frees its slot."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest import pipeline
from kb.core.cpu import SERVING_TTL_S, CpuBudget, available_cores, cgroup_cores, cpu_budget
from kb.core.errors import ConfigError
from kb.runtime import QueryGate, Runtime
from tests.conftest import SetEnv
from tests.pdfgen import make_text_pdf

HOLDER = """
import sys
from pathlib import Path
from kb.core.cpu import CpuBudget
budget = CpuBudget(int(sys.argv[1]), Path(sys.argv[2]))
with (budget.slot() if sys.argv[3] == "slot" else budget.serving()):
    print("held", flush=True)
    sys.stdin.readline()
"""


class Recording(CpuBudget):
    """A budget noting the units that asked it for a slot."""

    def __init__(self, cores: int, folder: Path) -> None:
        super().__init__(cores, folder)
        self.units: list[str] = []

    def acquire(self, what: str = "", abort: threading.Event | None = None) -> int:
        self.units.append(what)
        return super().acquire(what, abort)


class Holder:
    """Another process holding a slot (``slot``) or marked answering questions (``serving``) until released."""

    def __init__(self, cores: int, folder: Path, what: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(cores), str(folder), what],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"
        time.sleep(2 * SERVING_TTL_S)  # the count of serving processes a budget reuses is stale by now

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            self.proc.wait(10)
            time.sleep(2 * SERVING_TTL_S)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.proc.kill()
        h.proc.wait(10)


def _slots_now(budget: CpuBudget) -> int:
    """How many slots this process can take at once right now (all released again)."""
    fds = []
    while (fd := budget.try_slot()) is not None:
        fds.append(fd)
    for fd in fds:
        budget.release(fd)
    return len(fds)


def _until_queued(budget: CpuBudget, n: int = 1) -> None:
    """Wait until ``n`` units of this process wait for a slot (a loaded machine may take a while)."""
    deadline = time.monotonic() + 10
    while len(budget._queue) < n:
        assert time.monotonic() < deadline, "the waiting unit never queued"
        time.sleep(0.005)


def _waits_in_thread(budget: CpuBudget) -> tuple[threading.Thread, list[float]]:
    got: list[float] = []
    started = time.monotonic()

    def take() -> None:
        with budget.slot():
            got.append(time.monotonic() - started)

    thread = threading.Thread(target=take)
    thread.start()
    return thread, got


def test_a_slot_held_by_another_process_makes_ingest_work_wait_until_it_is_released(
        tmp_path: Path, holders: list[Holder]) -> None:
    budget = CpuBudget(1, tmp_path)
    holders.append(holder := Holder(1, tmp_path, "slot"))
    assert budget.use().held == 1 and _slots_now(budget) == 0
    thread, got = _waits_in_thread(budget)
    time.sleep(0.3)
    assert not got  # still waiting: the only core is the other process's
    holder.release()
    thread.join(10)
    assert got and got[0] >= 0.3


def test_a_killed_holder_frees_its_slot(tmp_path: Path, holders: list[Holder]) -> None:
    budget = CpuBudget(2, tmp_path)
    holders.append(first := Holder(2, tmp_path, "slot"))
    holders.append(Holder(2, tmp_path, "slot"))
    assert _slots_now(budget) == 0
    first.proc.kill()  # SIGKILL: no clean-up of its own; the kernel drops its lock
    first.proc.wait(10)
    time.sleep(2 * SERVING_TTL_S)
    assert _slots_now(budget) == 1


def test_a_process_answering_questions_keeps_a_core_free_of_ingest_work(
        tmp_path: Path, holders: list[Holder]) -> None:
    budget = CpuBudget(3, tmp_path)
    assert _slots_now(budget) == 3
    holders.append(server := Holder(3, tmp_path, "serving"))
    assert budget.use().serving == 1 and _slots_now(budget) == 2
    holders.append(Holder(3, tmp_path, "serving"))
    assert _slots_now(budget) == 1
    server.release()  # its question answered: the core is ingest's again
    assert budget.use().serving == 1 and _slots_now(budget) == 2


def test_ingest_keeps_one_unit_running_when_every_core_answers_questions(
        tmp_path: Path, holders: list[Holder]) -> None:
    budget = CpuBudget(2, tmp_path)
    holders.append(Holder(2, tmp_path, "serving"))
    holders.append(Holder(2, tmp_path, "serving"))
    assert budget.use().serving == 2
    assert _slots_now(budget) == 1  # a server that is never idle still ingests, one unit at a time


def test_a_serving_file_of_a_process_that_is_gone_is_not_counted_and_is_removed(
        tmp_path: Path, holders: list[Holder]) -> None:
    budget = CpuBudget(2, tmp_path)
    holders.append(server := Holder(2, tmp_path, "serving"))
    pid = server.proc.pid
    server.proc.kill()
    server.proc.wait(10)
    assert budget.busy_serving() == 0
    assert not (tmp_path / f"serving-{pid}").exists()


def test_questions_in_this_process_are_counted_once_while_any_is_in_flight(tmp_path: Path) -> None:
    budget = CpuBudget(2, tmp_path)
    with budget.serving():
        with budget.serving():
            assert budget.use().serving == 1 and _slots_now(budget) == 1
        assert budget.use().serving == 1
    assert budget.use().serving == 0 and _slots_now(budget) == 2


async def test_the_query_gate_marks_the_process_serving_while_a_question_waits_or_is_answered(tmp_path: Path) -> None:
    budget = CpuBudget(2, tmp_path)
    gate = QueryGate(1, 0, budget)
    inside, leave = asyncio.Event(), asyncio.Event()

    async def ask() -> None:
        async with gate.turn():
            inside.set()
            await leave.wait()

    first = asyncio.create_task(ask())
    await inside.wait()
    second = asyncio.create_task(ask())  # waits for its turn: still serving
    await asyncio.sleep(0.05)
    assert budget.use().serving == 1
    leave.set()
    await asyncio.gather(first, second)
    assert budget.use().serving == 0


def test_a_folder_that_cannot_be_used_leaves_work_unbudgeted(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    budget = CpuBudget(1, blocker / "cpu")
    with budget.slot(), budget.slot():  # no wait, no error: as if alone
        pass
    with budget.serving():
        pass


def test_the_cores_follow_the_containers_cpu_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cores(tmp_path) == 2  # 1.5 CPUs: two cores, each partly
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cores(tmp_path) is None
    assert cgroup_cores(tmp_path / "missing") is None
    assert 1 <= available_cores()


def test_the_budget_comes_from_the_settings(tmp_path: Path, set_env: SetEnv) -> None:
    ingest = set_env(KB_CPU_CORES="3", KB_CPU_DIR=str(tmp_path / "cpu")).ingest
    budget = cpu_budget(ingest.cpu_cores, ingest.cpu_dir)
    assert budget.cores == 3 and budget.folder == tmp_path / "cpu"
    assert cpu_budget(ingest.cpu_cores, ingest.cpu_dir) is budget  # one per process
    assert set_env(KB_CPU_CORES="0").ingest.cpu_cores is None  # 0: the available cores
    with pytest.raises(ConfigError, match="KB_CPU_CORES"):
        set_env(KB_CPU_CORES="-2")


async def test_ingesting_a_file_waits_for_the_budget_and_finishes_once_a_core_is_free(
        runtime: Runtime, tmp_path: Path, holders: list[Holder]) -> None:
    from kb.runtime import build_ingest_context

    path = make_text_pdf(tmp_path / "budget.pdf", [f"Page {i}: revenue of segment {i} rose by {i} percent."
                                                     for i in range(6)])
    holders.append(holder := Holder(1, tmp_path / "cpu", "slot"))
    seen: list[str] = []
    budget = Recording(1, tmp_path / "cpu")  # one core, held by the other process
    with build_ingest_context(runtime) as ctx:
        assert ctx.budget is not None  # the context comes with this machine's budget
        ctx.budget = budget
        task = asyncio.create_task(pipeline.ingest_file(ctx, path, name="budget.pdf", collection_id=1,
                                                        progress=lambda stage, *_: seen.append(stage)))
        await asyncio.sleep(1.0)
        assert not task.done() and set(seen) == {"reading"}  # the parse waits for the core
        holder.release()
        outcome = await asyncio.wait_for(task, 60)
    assert outcome.status == "ok" and outcome.chunks > 0, outcome
    assert {"parse", "_offline_tree", "chunk_tree", "safe_facts"} <= set(budget.units)  # each held a slot
    assert CpuBudget(1, tmp_path / "cpu").use().held == 0  # every slot handed back


def test_units_of_a_process_take_slots_in_the_order_they_asked(tmp_path: Path) -> None:
    budget = CpuBudget(1, tmp_path)
    first = budget.acquire()
    waiter, got = _waits_in_thread(budget)  # a parse or a tree waiting for the one core
    _until_queued(budget)
    budget.release(first)  # a text done: asking again, it queues behind the waiting unit
    again = budget.acquire()  # returns only once the waiting unit has had the core and handed it back
    waiter.join(10)
    assert got  # had the text gone first, the waiter would still be waiting for ``again``
    budget.release(again)
    assert budget.use().held == 0


async def test_a_coroutine_cancelled_while_it_waits_stops_waiting_and_takes_no_slot(tmp_path: Path) -> None:
    budget = CpuBudget(1, tmp_path)
    held = budget.acquire()

    async def store() -> None:
        async with budget.async_slot():
            raise AssertionError("ran without the slot")

    task = asyncio.create_task(store())
    for _ in range(1000):
        if budget._queue:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):  # its thread stops waiting though the slot is still held elsewhere
        if not budget._queue:
            break
        await asyncio.sleep(0.01)
    assert not budget._queue
    budget.release(held)
    await asyncio.sleep(0.1)  # the waiting thread gets the slot now and hands it back
    assert budget.use().held == 0 and _slots_now(budget) == 1


def test_a_run_of_texts_hands_its_slot_back_when_a_unit_waits_or_a_question_needs_the_core(
        tmp_path: Path, holders: list[Holder]) -> None:
    budget = CpuBudget(2, tmp_path)
    first, second = budget.acquire(), budget.acquire()
    assert not budget.should_yield(first) and not budget.should_yield(second)
    waiter, got = _waits_in_thread(budget)  # a tree of this process asks for a core
    _until_queued(budget)
    assert budget.should_yield(first) and budget.should_yield(second)
    budget.release(second)
    waiter.join(10)
    assert got and not budget.should_yield(first)
    second = budget.acquire()
    holders.append(Holder(2, tmp_path, "serving"))  # another process answers a question: one core is its
    assert [budget.should_yield(fd) for fd in sorted((first, second), key=budget._slot_of.get)] == [False, True]
    budget.release(first)
    budget.release(second)


def test_a_serving_mark_not_taken_at_once_is_taken_at_the_next_question(tmp_path: Path) -> None:
    import fcntl
    import os

    budget = CpuBudget(2, tmp_path)
    probe = os.open(tmp_path / f"serving-{os.getpid()}", os.O_RDONLY | os.O_CREAT)
    fcntl.flock(probe, fcntl.LOCK_SH)  # another process probing the file, long enough to miss the mark
    with budget.serving():
        assert not budget._marked
        os.close(probe)
        with budget.serving():  # the next question, still in the same busy spell
            assert budget._marked and budget.use().serving == 1
    assert budget.use().serving == 0


def test_a_serving_file_removed_while_idle_is_made_again(tmp_path: Path) -> None:
    budget = CpuBudget(2, tmp_path)
    with budget.serving():
        pass
    for f in tmp_path.glob("serving-*"):
        f.unlink()  # a /tmp cleaner, or a process of another pid namespace taking it for a dead one's
    with budget.serving():
        assert budget.use().serving == 1  # counted: not a lock on a file nobody can see


def test_a_stopping_process_stops_waiting_for_a_slot(tmp_path: Path, holders: list[Holder],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from kb.core import cpu

    budget = CpuBudget(1, tmp_path)
    holders.append(Holder(1, tmp_path, "slot"))  # held, say, by a suspended process
    waiter, got = _waits_in_thread(budget)
    _until_queued(budget)
    monkeypatch.setattr(cpu, "received_signal", lambda: 15)  # SIGTERM arrived
    waiter.join(10)
    assert got and not waiter.is_alive()  # went on without a slot: stopping never hangs on another process
