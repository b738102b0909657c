"""Every way of stopping a ``kb`` command leaves nothing running (issue 25): SIGTERM, SIGINT and SIGHUP of each
long-running command stop, within 10 s, the embedded Postgres it started and every child it had, and one
line says so; one found running is left alone; a ``--workers`` supervisor killed with SIGKILL takes its
workers with it, and the next start finds the port free and adopts the Postgres left behind.

Real processes on one embedded Postgres data dir shared by the module (initialised, with the sample reports
ingested, once); each case starts the stopped database again by itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from tests.live import free_port

pytestmark = pytest.mark.live  # about 10 minutes on a busy 2-core machine (27 cases, each starting Postgres)

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
STOP_LIMIT_S = 10.0
SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "HUP": signal.SIGHUP}


@dataclass(frozen=True)
class Shared:
    root: Path  # KB_INGEST_ROOT
    data: Path  # KB_DATA_DIR

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
        env.update({"KB_DATA_DIR": str(self.data), "KB_INGEST_ROOT": str(self.root), "KB_EMBEDDING_MODEL": "hash:384",
                    "KB_INGEST_WORKERS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), **extra})
        return env

    def postmaster(self) -> psutil.Process | None:
        """The embedded Postgres running on the shared data dir, if any."""
        try:
            pid = int((self.data / "pg" / "postmaster.pid").read_text().split()[0])
            proc = psutil.Process(pid)
            return proc if proc.name() == "postgres" else None
        except (OSError, ValueError, IndexError, psutil.Error):
            return None

    def users(self) -> list[int]:
        """The live kb processes registered as users of the embedded Postgres."""
        from kb.core.db import embedded_users

        return embedded_users(self.data)


def _kb(shared: Shared, *args: str, log: Path, stdin: int = subprocess.DEVNULL, **env: str) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "kb.cli", *args], env=shared.env(**env), stdin=stdin,
                                stdout=out, stderr=subprocess.STDOUT, cwd=shared.root, start_new_session=True)


def _wait(what: str, ready: Callable[[], bool], proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, f"exited before {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"not {what} in {timeout_s} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    root = tmp_path_factory.mktemp("signals")
    s = Shared(root=root, data=root / "data")
    many = root / "many"
    many.mkdir()
    for i in range(300):  # enough files that an ingest is still running when the signal comes
        body = "\n\n".join(f"## Part {j}\n\n" + f"Line {i}.{j} of a long note about item {i}. " * 40 for j in range(30))
        (many / f"note-{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n")
    log = root / "setup.log"
    proc = _kb(s, "ingest", str(SAMPLES / "reports"), "--metadata", str(SAMPLES / "metadata.jsonl"), log=log)
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    assert s.postmaster() is None, "the ingest did not stop the Postgres it started"
    yield s
    _stop_leftovers(s)  # after a failed case: leave nothing behind


def _is_postgres(proc: psutil.Process) -> bool:
    try:
        return proc.name() == "postgres"
    except psutil.Error:  # gone already
        return False


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _end_session(proc: subprocess.Popen) -> None:
    """After a failed case: SIGKILL whatever the command left in its session."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) == proc.pid:
                p.kill()
        except (OSError, psutil.Error):
            pass


def _stop_leftovers(shared: Shared) -> None:
    """A Postgres left by an earlier failed case is stopped, so that every case starts its own."""
    if (pm := shared.postmaster()) is not None:
        pm.send_signal(signal.SIGINT)
        pm.wait(timeout=30)


def _http_ready(port: int) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    return ready


def _case(name: str, shared: Shared, log: Path, tag: str) -> tuple[subprocess.Popen, Callable[[], bool]]:
    """Start command ``name`` and return it with the condition meaning "it is at work"."""
    port = free_port()

    def text() -> str:
        return log.read_text(errors="replace")

    if name in {"serve", "serve-workers", "run"}:
        args = ["serve", "--port", str(port)] if name != "run" else ["run", "--port", str(port)]
        proc = _kb(shared, *args, *(["--workers", "2"] if name == "serve-workers" else []), log=log)
        return proc, _http_ready(port)
    if name == "worker":
        return _kb(shared, "worker", log=log), lambda: "waiting for ingest jobs" in text()
    if name == "ingest":
        proc = _kb(shared, "ingest", str(shared.root / "many"), "--collection", f"sig-{tag}", log=log)
        return proc, lambda: proc.pid in shared.users() and bool(psutil.Process(proc.pid).children())
    if name == "bench":
        proc = _kb(shared, "bench", "latency", "--docs", "300", "--chunks-per-doc", "30", "--queries", "100000",
                   "--collection", f"bench-{tag}", log=log)
        return proc, lambda: "runtime.ready" in text()
    if name == "bench-ingest":  # a bench with a kb worker child and its parsers, stopped mid-job
        proc = _kb(shared, "bench", "ingest", "--workers", "1", "--files", "40", "--pages-per-file", "8", log=log)
        return proc, lambda: "jobs.created" in text()
    if name == "query":
        proc = _kb(shared, "query", "--interactive", log=log, stdin=subprocess.PIPE)
        return proc, lambda: "kb> " in text()
    if name == "mcp":
        proc = _kb(shared, "mcp", log=log, stdin=subprocess.PIPE)
        return proc, lambda: "runtime.ready" in text()
    if name == "reembed":  # another embedder: every stored vector is computed again, one per batch
        proc = _kb(shared, "reembed", "--batch", "1", log=log, KB_EMBEDDING_MODEL="hash:256")
        return proc, lambda: "runtime.ready" in text()
    raise AssertionError(name)


COMMANDS = ["serve", "serve-workers", "run", "worker", "ingest", "bench", "bench-ingest", "query", "mcp", "reembed"]


@pytest.mark.parametrize("sig", list(SIGNALS))
@pytest.mark.parametrize("command", COMMANDS)
def test_a_stop_signal_leaves_nothing_running(shared: Shared, command: str, sig: str) -> None:
    _stop_leftovers(shared)
    log = shared.root / f"{command}-{sig}.log"
    proc, at_work = _case(command, shared, log, f"{command}-{sig}".lower())
    try:
        _wait("at work", at_work, proc, log)
        postmaster = shared.postmaster()
        assert postmaster is not None and proc.pid in shared.users()  # this command started it (and uses it)
        started = [*psutil.Process(proc.pid).children(recursive=True), postmaster, *postmaster.children()]
        sent = time.monotonic()
        proc.send_signal(SIGNALS[sig])
        code = proc.wait(timeout=STOP_LIMIT_S)
        exited = time.monotonic() - sent
        _, alive = psutil.wait_procs(started, timeout=max(0.1, sent + STOP_LIMIT_S - time.monotonic()))
        alive = [p for p in alive if _running(p)]  # a zombie has ended; only its parent has not reaped it yet
        elapsed = time.monotonic() - sent
    finally:
        _end_session(proc)
    out = log.read_text(errors="replace")
    assert not alive, f"still running {elapsed:.1f} s after SIG{sig}: {alive}\n{out[-2000:]}"
    assert shared.postmaster() is None
    lines = [ln for ln in out.splitlines() if f"kb {command.split('-')[0]}: stopped by SIG{sig} " in ln]
    assert len(lines) == 1 and "stopped the embedded Postgres" in lines[0], out[-2000:]
    said = float(lines[0].split(" in ", 1)[1].split(" s;", 1)[0])  # "... stopped by SIGTERM in 2.0 s; ..."
    assert said <= exited + 0.1 and exited - said < 1.5, (said, exited)  # the line's time is the process's end
    assert code in {0, 128 + SIGNALS[sig]}, (code, out[-2000:])
    assert "Traceback" not in out, out[-3000:]  # a stop is not a crash: no traceback noise (kb bench had some)
    print(f"{command} SIG{sig}: exit {code}, everything gone {elapsed:.1f} s after the signal")


def test_a_shared_postgres_is_left_running(shared: Shared) -> None:
    """A Postgres started by ``kb db start`` is not the server's to stop; ``kb db stop`` stops it."""
    log = shared.root / "shared.log"
    assert subprocess.run([sys.executable, "-m", "kb.cli", "db", "start"], env=shared.env(), cwd=shared.root,
                          capture_output=True, timeout=60).returncode == 0
    postmaster = shared.postmaster()
    assert postmaster is not None and shared.users() == []
    try:
        proc, at_work = _case("serve", shared, log, "shared")
        _wait("serving", at_work, proc, log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=STOP_LIMIT_S) == 0
        assert postmaster.is_running() and shared.postmaster() is not None
        assert "left the embedded Postgres running (kept by kb db start)" in log.read_text()
    finally:
        subprocess.run([sys.executable, "-m", "kb.cli", "db", "stop"], env=shared.env(), cwd=shared.root, timeout=60)
    assert not postmaster.is_running()


def test_workers_die_with_a_killed_supervisor_and_the_next_start_adopts_postgres(shared: Shared) -> None:
    port = free_port()
    log = shared.root / "kill9.log"
    proc = _kb(shared, "serve", "--port", str(port), "--workers", "2", log=log, KB_LOG_FORMAT="json")
    try:
        _wait("serving", _http_ready(port), proc, log)
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert len([w for w in workers if w.name().startswith("python")]) >= 2
        proc.kill()  # SIGKILL, as the OOM killer does: no clean-up of its own
        proc.wait()
        _, alive = psutil.wait_procs(workers, timeout=STOP_LIMIT_S)
        assert not [p for p in alive if _running(p)], alive
        postmaster = shared.postmaster()
        assert postmaster is not None  # left for the next start (documented)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the workers logged through kb's set-up: JSON lines (KB_LOG_FORMAT=json), pgserver's INFO chatter silenced
    worker_pids = {str(w.pid) for w in workers}
    events = [json.loads(ln) for ln in log.read_text().splitlines() if ln.startswith("{")]
    assert sum(e.get("event") == "runtime.ready" for e in events) >= 3, log.read_text()[-2000:]
    assert any(e.get("event") == "worker.started" and e.get("worker", "").split(":")[1] in worker_pids
               for e in events)
    assert "pgserver" not in log.read_text()
    log2 = shared.root / "restart.log"
    again = _kb(shared, "serve", "--port", str(port), log=log2)  # the same port: free again
    try:
        _wait("serving on the same port", _http_ready(port), again, log2)
        assert shared.postmaster() is not None and shared.postmaster().pid == postmaster.pid
        assert shared.users() == [again.pid] and "db.embedded_adopted" in log2.read_text()
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=STOP_LIMIT_S) == 0
    finally:
        if again.poll() is None:
            again.kill()
    assert psutil.wait_procs([postmaster], timeout=STOP_LIMIT_S)[1] == []
    assert "stopped the embedded Postgres" in log2.read_text()


def _serve(shared: Shared, tag: str, workers: int = 1) -> tuple[subprocess.Popen, int, Path]:
    port = free_port()
    log = shared.root / f"{tag}.log"
    proc = _kb(shared, "serve", "--port", str(port), *(["--workers", str(workers)] if workers > 1 else []), log=log)
    return proc, port, log


def _kill_postmaster(shared: Shared) -> int:
    postmaster = shared.postmaster()
    assert postmaster is not None
    postmaster.kill()
    postmaster.wait(timeout=STOP_LIMIT_S)
    return postmaster.pid


def _restarted(shared: Shared, old_pid: int) -> Callable[[], bool]:
    return lambda: (pm := shared.postmaster()) is not None and pm.pid != old_pid


def test_a_worker_that_restarted_postgres_does_not_keep_it_after_the_supervisor_stops(shared: Shared) -> None:
    """R4: with ``--workers 2`` a worker restarts a Postgres that died; a clean SIGTERM of the supervisor then
    stops it (the worker used to become its sole owner, and Postgres outlived everything)."""
    _stop_leftovers(shared)
    proc, port, log = _serve(shared, "r4", workers=2)
    try:
        _wait("serving", _http_ready(port), proc, log)
        old = _kill_postmaster(shared)
        _wait("Postgres restarted by a worker", _restarted(shared, old), proc, log, timeout_s=60)
        _wait("serving again", _http_ready(port), proc, log, timeout_s=60)
        restarted = shared.postmaster()
        assert restarted is not None and proc.pid in shared.users() and len(shared.users()) >= 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=STOP_LIMIT_S + 5) == 0
        assert psutil.wait_procs([restarted], timeout=STOP_LIMIT_S)[1] == [], "Postgres outlived its users"
    finally:
        _end_session(proc)
        _stop_leftovers(shared)
    assert "stopped the embedded Postgres, the last process using it" in log.read_text(errors="replace")
    assert shared.users() == []


def test_three_servers_on_one_data_folder_the_last_to_stop_stops_postgres(shared: Shared) -> None:
    """R5 and issue 38 item 4: three servers (one with two workers) on one data folder are stopped one by one in
    a random order, each by SIGTERM or SIGKILL at random, with Postgres killed at a random moment in between.
    While one server lives, Postgres runs (restarted by whoever sees it down) and the live servers answer;
    the last clean stop stops it; after a last SIGKILL it is left, and the next start adopts it and stops it
    when that one stops. Two rounds; the seed is in every message."""
    import random

    seed = random.randrange(10**6)
    rng = random.Random(seed)
    _stop_leftovers(shared)
    for round_ in range(2):
        servers = [_serve(shared, f"r5-{round_}-{i}", workers=2 if i == 0 else 1) for i in range(3)]
        try:
            for proc, port, log in servers:
                _wait("serving", _http_ready(port), proc, log)
            kill_pg_at = rng.randrange(3)
            order = rng.sample(servers, 3)
            for step, (proc, _port, log) in enumerate(order):
                if step == kill_pg_at:
                    old = _kill_postmaster(shared)
                    live = order[step]
                    _wait("Postgres restarted", _restarted(shared, old), live[0], live[2], timeout_s=60)
                how = rng.choice(["TERM", "KILL"])
                postmaster = shared.postmaster()
                assert postmaster is not None, f"seed {seed}: round {round_} step {step}: Postgres is not running"
                # its kb children (workers); a Postgres it started again after the kill is the others' to keep
                children = [c for c in psutil.Process(proc.pid).children(recursive=True) if not _is_postgres(c)]
                proc.send_signal(signal.SIGTERM if how == "TERM" else signal.SIGKILL)
                proc.wait(timeout=STOP_LIMIT_S + 5)
                # its workers end with it (a SIGKILLed supervisor's workers a little later): only then is the
                # next server the last user when it comes to the last one
                _, alive = psutil.wait_procs(children, timeout=STOP_LIMIT_S)
                assert not [c for c in alive if _running(c)], f"seed {seed}: round {round_}: {alive}"
                rest = order[step + 1:]
                for other, port, olog in rest:  # the others still serve, on the same Postgres
                    _wait(f"seed {seed}: round {round_}: serving after SIG{how} of another", _http_ready(port), other,
                          olog, timeout_s=30)
                    assert shared.postmaster() is not None
                if rest:
                    continue
                if how == "TERM":  # the last one stopped cleanly: it stopped Postgres
                    assert psutil.wait_procs([postmaster], timeout=STOP_LIMIT_S)[1] == [], \
                        f"seed {seed}: round {round_}: Postgres outlived the last clean stop"
                    assert "stopped the embedded Postgres, the last process using it" in log.read_text()
                    continue
                time.sleep(1.0)  # a SIGKILLed last server leaves Postgres: the next start adopts it
                assert postmaster.is_running(), f"seed {seed}: round {round_}"
                proc2, port2, log2 = _serve(shared, f"r5-{round_}-adopt")
                try:
                    _wait("serving", _http_ready(port2), proc2, log2)
                    assert shared.postmaster() is not None and shared.postmaster().pid == postmaster.pid
                    assert shared.users() == [proc2.pid] and "db.embedded_adopted" in log2.read_text()
                    proc2.send_signal(signal.SIGTERM)
                    assert proc2.wait(timeout=STOP_LIMIT_S) == 0
                finally:
                    _end_session(proc2)
                assert psutil.wait_procs([postmaster], timeout=STOP_LIMIT_S)[1] == [], f"seed {seed}"
        finally:
            for proc, _, _ in servers:
                _end_session(proc)
            _stop_leftovers(shared)
        assert shared.users() == [], f"seed {seed}: round {round_}: {shared.users()}"
        print(f"seed {seed} round {round_}: order and signals held")


def test_a_corrupt_or_stale_users_file_is_read_as_no_user(shared: Shared) -> None:
    """Bad input: a users file that is not JSON, or that names dead processes (and the earlier single-owner
    file naming a dead PID), neither stops a start nor keeps Postgres alive after the server stops."""
    _stop_leftovers(shared)
    for body in ("{not json", json.dumps({"users": [{"pid": 999_999, "started": 1.0}], "kept": False})):
        (shared.data / "embedded-users.json").write_text(body)
        (shared.data / "embedded-owner.json").write_text(json.dumps({"pid": 999_998, "started": 2.0}))
        proc, port, log = _serve(shared, "corrupt")
        try:
            _wait("serving", _http_ready(port), proc, log)
            assert shared.users() == [proc.pid]
            postmaster = shared.postmaster()
            assert postmaster is not None
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=STOP_LIMIT_S) == 0
            assert psutil.wait_procs([postmaster], timeout=STOP_LIMIT_S)[1] == []
        finally:
            _end_session(proc)
            _stop_leftovers(shared)
        assert not (shared.data / "embedded-owner.json").exists()


PARSER_POOL = '''
import os, sys, time
from ingest.pipeline import make_executor

if __name__ == "__main__":  # a spawned parser imports this file again, as __mp_main__, like the kb script
    ex = make_executor(1)
    ex.submit(os.getpid)  # starts the parser process (and multiprocessing's resource tracker) now
    print("submitted", flush=True)
    time.sleep(120)
'''


def test_parsers_die_with_a_parent_killed_at_any_moment_of_their_start(tmp_path: Path) -> None:
    """R2: a parser process outlives no SIGKILLed parent, also one killed while the parser is still importing
    (the parent-death signal used to be set after the parsers' imports: seconds in which a kill left it for
    good). Kill moments drawn at random over the parser's start-up and after; the seed is in the message."""
    import random

    script = tmp_path / "pool_main.py"
    script.write_text(PARSER_POOL)
    seed = random.randrange(10**6)
    delays = [0.0, *sorted(random.Random(seed).uniform(0.05, 3.0) for _ in range(3)), 5.0]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KB_")}, "PYTHONPATH": str(REPO)}
    for delay in delays:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env, cwd=tmp_path,
                                start_new_session=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"submitted\n"
            time.sleep(delay)
            children = psutil.Process(proc.pid).children(recursive=True)
            assert children, "no parser process was started"
            proc.kill()  # SIGKILL, as the OOM killer does
            proc.wait()
            _, alive = psutil.wait_procs(children, timeout=STOP_LIMIT_S)
            alive = [p for p in alive if _running(p)]
        finally:
            _end_session(proc)
        assert not alive, f"seed {seed}: killed {delay:.2f} s after the parser started, still running: {alive}"


def test_a_killed_bench_leaves_no_worker_behind(shared: Shared) -> None:
    """R3: SIGKILL of ``kb bench ingest --workers`` takes its ``kb worker`` (and that worker's parser) with it;
    the worker used to live on, logging an error every second."""
    _stop_leftovers(shared)
    log = shared.root / "bench-workers-kill.log"
    proc = _kb(shared, "bench", "ingest", "--workers", "1", "--files", "40", "--pages-per-file", "8", log=log)

    def workers() -> list[psutil.Process]:
        try:
            return [c for c in psutil.Process(proc.pid).children() if "worker" in c.cmdline()]
        except psutil.Error:
            return []

    try:
        _wait("its worker started", lambda: bool(workers()), proc, log)
        time.sleep(2.0)  # the worker mid start-up or at work
        started = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() != "postgres"]
        proc.kill()
        proc.wait()
        _, alive = psutil.wait_procs(started, timeout=STOP_LIMIT_S)
        alive = [p for p in alive if _running(p)]
    finally:
        _stop_leftovers(shared)  # the Postgres the bench started, stopped cleanly (a killed owner leaves it)
        _end_session(proc)
    assert not alive, f"still running after the bench was killed: {alive}\n{log.read_text(errors='replace')[-2000:]}"
