"""1,000 concurrent trials against a loopback model server with 100 ms of
latency per call: model calls per second in steady state against the ideal
(concurrency / latency), and the tack process's memory over the run."""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import BenchError, Env, Server
from .suites import Variant, write_suite


@dataclass
class Sample:
    at: float  # seconds since the run started
    requests: int  # model calls the server has answered
    rss_kb: int  # the tack process's resident memory
    machine_cpu_s: float = 0.0  # the machine's busy CPU seconds since boot


@dataclass
class Result:
    jobs: int
    trials: int
    steps: int
    latency_ms: int
    calls: int
    wall: float
    steady_calls_per_s: float
    ideal_calls_per_s: float
    peak_rss_kb: int
    rss_mid_kb: int  # resident memory half-way through the model calls
    rss_late_kb: int  # … and at 90% of them
    exit_code: int
    # CPU seconds over the run: the whole machine's, and the loopback
    # server's share of it; the rest is tack's (its commands included) and
    # the bench's own sampling, which is small.
    machine_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    @property
    def tack_cpu_ms_per_call(self) -> float:
        return (self.machine_cpu_s - self.server_cpu_s) * 1000 / max(self.calls, 1)

    @property
    def server_cpu_ms_per_call(self) -> float:
        return self.server_cpu_s * 1000 / max(self.calls, 1)

    @property
    def machine_busy(self) -> float:
        """The share of all cores the run kept busy."""
        return self.machine_cpu_s / (self.wall * (os.cpu_count() or 1))

    @property
    def fraction(self) -> float:
        return self.steady_calls_per_s / self.ideal_calls_per_s

    @property
    def cpu_ceiling_calls_per_s(self) -> float:
        """The most calls per second this machine's cores could answer at the
        steady state's CPU per call (the machine's: tack's, its commands' and
        the loopback server's, between 20% and 80% of the calls): where the
        ideal rate is above it, no harness reaches the ideal here."""
        window = steady_window(self.samples, self.calls)
        if window is None:
            return 0.0
        first, last = window
        per_call_s = (last.machine_cpu_s - first.machine_cpu_s) / (last.requests - first.requests)
        return (os.cpu_count() or 1) / per_call_s if per_call_s > 0 else 0.0


def machine_cpu_s() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """CPU seconds of one process (user and system), 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int, key: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def watch(process: subprocess.Popen, server: Server, samples: list[Sample],
          peak: list[int], started: float) -> None:
    """Samples the server's counter and tack's memory until tack exits."""
    while process.poll() is None:
        try:
            stats = server.stats()
        except OSError:
            stats = {"requests": samples[-1].requests if samples else 0}
        rss = rss_kb(process.pid)
        peak[0] = max(peak[0], rss_kb(process.pid, "VmHWM"))
        samples.append(Sample(time.perf_counter() - started, stats["requests"], rss,
                              machine_cpu_s()))
        time.sleep(0.25)


def bash_cpu_ms(runs: int = 200) -> float:
    """CPU of one unconfined `bash -c 'echo hi'` (the strict rows' command),
    the mean over `runs`: what the command costs before any harness."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run(["bash", "-c", "echo hi"], stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return used * 1000 / runs


def steady_window(samples: list[Sample], total: int) -> tuple[Sample, Sample] | None:
    """The samples at 20% and at 80% of all calls: after the first trials'
    set-up, before the last ones drain."""
    lo, hi = 0.2 * total, 0.8 * total
    first = next((s for s in samples if s.requests >= lo), None)
    last = next((s for s in samples if s.requests >= hi), None)
    if first is None or last is None or last.at <= first.at:
        return None
    return first, last


def steady_rate(samples: list[Sample], total: int) -> float:
    """Calls per second in the steady window."""
    window = steady_window(samples, total)
    if window is None:
        return 0.0
    first, last = window
    return (last.requests - first.requests) / (last.at - first.at)


def at_fraction(samples: list[Sample], total: int, fraction: float) -> int:
    found = next((s for s in samples if s.requests >= fraction * total), None)
    return found.rss_kb if found else 0


def run(env: Env, jobs: int = 1000, trials: int = 2000, steps: int = 20,
        latency_ms: int = 100, sandbox: str = "off", tool: str = "read_file",
        argument: str = "notes.txt", extra_env: dict[str, str] | None = None) -> Result:
    """`tack run -j jobs` of `trials` trials, each `steps` model calls of
    `tool` and a final answer. By default the tool is `read_file`: no process
    per step, so the harness, not process start-up, is what is measured."""
    root = env.scratch("concurrency")
    with Server(env, steps, tool=tool, argument=argument,
                latency_ms=latency_ms) as server:
        suite = write_suite(root / "suite", "concurrency", [
            Variant("loopback", server.base_url, [tool], max_steps=steps + 5,
                    sandbox=sandbox),
        ])
        args = [str(env.tack), "run", str(suite), "-j", str(jobs), "--trials", str(trials),
                "--no-report", "--traces", str(root / "traces")]
        tack_env = dict(os.environ, OPENAI_API_KEY="sk-tack-bench-not-a-key", **(extra_env or {}))
        log = (root / "tack.log").open("w")
        samples: list[Sample] = []
        peak = [0]
        started = time.perf_counter()
        machine_before = machine_cpu_s()
        server_before = process_cpu_s(server.process.pid)
        process = subprocess.Popen(args, env=tack_env, stdout=log, stderr=subprocess.STDOUT)
        watcher = threading.Thread(target=watch, args=(process, server, samples, peak, started))
        watcher.start()
        code = process.wait()
        wall = time.perf_counter() - started
        watcher.join()
        log.close()
        machine_used = machine_cpu_s() - machine_before
        server_used = process_cpu_s(server.process.pid) - server_before
        calls = server.stats()["requests"]
    expected = trials * (steps + 1)
    if code != 0 or calls < expected:
        tail = (root / "tack.log").read_text()[-3000:]
        raise BenchError(f"the concurrency run exited {code} after {calls} of {expected} "
                         f"model calls:\n{tail}")
    return Result(
        jobs=jobs, trials=trials, steps=steps, latency_ms=latency_ms, calls=calls, wall=wall,
        steady_calls_per_s=steady_rate(samples, calls),
        ideal_calls_per_s=jobs / (latency_ms / 1000),
        peak_rss_kb=peak[0],
        rss_mid_kb=at_fraction(samples, calls, 0.5),
        rss_late_kb=at_fraction(samples, calls, 0.9),
        exit_code=code,
        machine_cpu_s=machine_used,
        server_cpu_s=server_used,
        samples=samples,
    )
