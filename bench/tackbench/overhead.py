"""Harness overhead per step, tack against Inspect AI, on one workload: the
loopback tool-loop server asks for N `bash` calls of `echo step K`, then
answers. Per-step harness time = (wall(N2) - wall(N1)) / (N2 - N1), each
wall less the server's own time, so process start-up and per-trial set-up
cancel out. The bash tool's own time per call comes from each harness's
trace: tack's tool spans, Inspect's tool events."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from .common import BenchError, Env, Server, dir_size, run, timed
from .suites import Variant, write_suite

INSPECT_MODEL = "openai-api/tackbench/echo"


@dataclass
class Harness:
    """One harness configuration's measurements."""

    name: str
    net: dict[int, list[float]] = field(default_factory=dict)  # N -> wall - server, s
    tool_ms: list[float] = field(default_factory=list)  # per bash call
    bytes_per_call: float = 0.0
    files: int = 0
    calls: int = 0

    def per_step_ms(self, n1: int, n2: int) -> float:
        a, b = statistics.median(self.net[n1]), statistics.median(self.net[n2])
        return (b - a) / (n2 - n1) * 1000

    def tool_mean_ms(self) -> float:
        return statistics.mean(self.tool_ms) if self.tool_ms else 0.0


def tack_tool_ms(run_dir: Path, python: Path) -> list[float]:
    """Durations of the run's bash tool spans. The trace stores whole
    milliseconds, cut down: half a millisecond is added back to each."""
    script = (
        "import sys, pyarrow.parquet as pq\n"
        "t = pq.read_table(sys.argv[1] + '/spans', columns=['kind', 'duration_ms']).to_pylist()\n"
        "print(' '.join(str(r['duration_ms']) for r in t if r['kind'] == 'tool_call'))\n"
    )
    out = run([python, "-c", script, run_dir]).stdout.split()
    return [float(x) + 0.5 for x in out]


def inspect_tool_ms(log: Path, python: Path) -> list[float]:
    script = (
        "import sys\n"
        "from inspect_ai.log import read_eval_log\n"
        "log = read_eval_log(sys.argv[1])\n"
        "print(' '.join(str(e.working_time * 1000) for s in log.samples for e in s.events\n"
        "               if e.event == 'tool' and e.working_time is not None))\n"
    )
    return [float(x) for x in run([python, "-c", script, log]).stdout.split()]


def model_calls_in(run_dir: Path, python: Path) -> int:
    script = (
        "import sys, pyarrow.parquet as pq\n"
        "t = pq.read_table(sys.argv[1] + '/spans', columns=['kind']).to_pylist()\n"
        "print(sum(1 for r in t if r['kind'] == 'model_call'))\n"
    )
    return int(run([python, "-c", script, run_dir]).stdout.strip())


def only_run(traces: Path) -> Path:
    runs = [p for p in traces.iterdir() if p.is_dir()]
    if len(runs) != 1:
        raise BenchError(f"expected one run under {traces}, found {len(runs)}")
    return runs[0]


def tack_once(env: Env, server: Server, sandbox: str, trials: int = 1,
              image: str | None = None, engine: bool = False,
              otlp: bool = False) -> tuple[float, Path]:
    """One `tack run` of the echo suite (in `image`, if given, in engine
    mode if `engine`; streaming its spans to the server, as a collector, if
    `otlp`); returns wall less server time and the run directory."""
    root = env.scratch(f"tack-{sandbox}")
    suite = write_suite(root / "suite", "echo", [
        Variant(f"bash-{sandbox}", server.base_url, ["bash"], max_steps=server.steps + 5,
                sandbox=sandbox),
    ], image=image, engine=engine)
    args = [env.tack, "run", suite, "--no-report", "--trials", str(trials), "-j", "1",
            "--traces", root / "traces"]
    if otlp:
        args += ["--otlp", server.root]
    tack_env = dict(os.environ, OPENAI_API_KEY="sk-tack-bench-not-a-key")
    t = timed(args, server, env=tack_env)
    expected = trials * (server.steps + 1)
    if t.requests != expected:
        raise BenchError(f"tack made {t.requests} model calls, expected {expected}")
    if otlp and t.otlp_requests < 1:
        raise BenchError("tack run --otlp sent no spans to the server")
    return t.wall - t.server_busy, only_run(root / "traces")


def inspect_once(env: Env, server: Server, epochs: int = 1) -> tuple[float, Path]:
    logs = env.scratch("inspect-logs")
    args = [env.python.parent / "inspect", "eval", "inspect_task.py", "--model", INSPECT_MODEL,
            "--log-dir", logs, "--epochs", str(epochs), "--max-connections", "1",
            "--max-samples", "1", "--message-limit", str(2 * server.steps + 10)]
    t = timed(args, server, env=env.inspect_env(server.base_url),
              cwd=env.repo / "bench" / "tackbench")
    expected = epochs * (server.steps + 1)
    if t.requests != expected:
        raise BenchError(f"Inspect made {t.requests} model calls, expected {expected}")
    found = list(logs.glob("*.eval"))
    if len(found) != 1:
        raise BenchError(f"Inspect wrote {len(found)} .eval logs in {logs}, expected 1")
    return t.wall - t.server_busy, found[0]


@dataclass
class Overhead:
    n1: int
    n2: int
    repeats: int
    harnesses: list[Harness]


OTLP = "tack (sandbox off, --otlp)"
IMAGE_TASK = "tack (image task, strict)"
ENGINE_TASK = "tack (image task, engine mode)"


def measure(env: Env, n1: int, n2: int, repeats: int) -> Overhead:
    """Interleaves the harnesses run by run, so each sees the same load.
    The image task runs when the engine has `env.image`."""
    names = ["tack (sandbox off)", OTLP, "tack (sandbox strict)"]
    if env.image:
        names += [IMAGE_TASK, ENGINE_TASK]
    harnesses = {name: Harness(name) for name in names + ["Inspect AI (local sandbox)"]}
    # (sandbox, image, engine mode, --otlp, row)
    tack_runs = [("off", None, False, False, "tack (sandbox off)"),
                 ("off", None, False, True, OTLP),
                 ("strict", None, False, False, "tack (sandbox strict)")]
    if env.image:
        tack_runs += [("strict", env.image, False, False, IMAGE_TASK),
                      ("strict", env.image, True, False, ENGINE_TASK)]
    for n in (n1, n2):
        with Server(env, n, tool="bash", argument="echo step {step}") as server:
            for name in harnesses.values():
                name.net[n] = []
            for _ in range(repeats):
                for sandbox, image, engine, otlp, name in tack_runs:
                    h = harnesses[name]
                    net, run_dir = tack_once(env, server, sandbox, image=image, engine=engine,
                                             otlp=otlp)
                    h.net[n].append(net)
                    if n == n2:
                        h.tool_ms += tack_tool_ms(run_dir, env.python)
                h = harnesses["Inspect AI (local sandbox)"]
                net, log = inspect_once(env, server)
                h.net[n].append(net)
                if n == n2:
                    h.tool_ms += inspect_tool_ms(log, env.python)
    return Overhead(n1, n2, repeats, list(harnesses.values()))


@dataclass
class LongTrials:
    steps: int
    trials: int
    tack_bytes: int
    tack_files: int
    tack_calls: int
    inspect_bytes: int
    inspect_files: int
    inspect_calls: int


def long_trials(env: Env, steps: int, trials: int) -> LongTrials:
    """Trace size of `trials` trials of `steps` bash steps each: a tack run
    (sandbox off) and an Inspect log of as many epochs."""
    with Server(env, steps, tool="bash", argument="echo step {step}") as server:
        _, run_dir = tack_once(env, server, "off", trials=trials)
        _, log = inspect_once(env, server, epochs=trials)
    tack_bytes, tack_files = dir_size(run_dir)
    inspect_bytes, inspect_files = dir_size(log)
    calls = trials * (steps + 1)
    if model_calls_in(run_dir, env.python) != calls:
        raise BenchError(f"the tack run in {run_dir} does not hold {calls} model calls")
    return LongTrials(steps, trials, tack_bytes, tack_files, calls, inspect_bytes, inspect_files,
                      calls)


def engine_exec_ms(env: Env, runs: int) -> list[float]:
    """The engine's `exec` path, for comparison: `bash -c 'echo hi'` run
    with `podman exec` in a running container of `env.image`, one command
    at a time (what a harness that drives containers pays per command)."""
    import subprocess
    import time

    name = f"tack-bench-exec-{os.getpid()}"
    subprocess.run(["podman", "run", "-d", "--rm", "--name", name, "--network", "none",
                    env.image, "sleep", "600"], check=True, capture_output=True)
    try:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(["podman", "exec", name, "bash", "-c", "echo hi"], check=True,
                           capture_output=True)
            times.append((time.perf_counter() - start) * 1000)
        return times
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True)
