"""What every benchmark uses: where the binaries are, the loopback model
server, running and timing processes, medians, directory sizes."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

# The system prompt and instruction both harnesses get on the echo
# workload, so their logs hold the same text.
SYSTEM_PROMPT = (
    "You are a coding agent working in a software project. Use the tools to inspect the files, "
    "make the change the user asks for, and run the project's tests to check it. When the work "
    "is done, answer with a short summary and no tool call."
)
INSTRUCTION = "Run the commands you are given."


class BenchError(Exception):
    """A benchmark could not run; the message says what and what to do."""


@dataclass
class Env:
    """Paths shared by every benchmark."""

    repo: Path
    release: Path  # target/release, holding tack and tack-testkit-server
    python: Path  # the venv's interpreter (Inspect AI, pyarrow)
    work: Path  # scratch space, removed at the end
    tiktoken_dir: Path
    quick: bool = False
    notes: list[str] = field(default_factory=list)
    # A container image the engine has, for the image-task row; None: skipped.
    image: str | None = None

    @property
    def tack(self) -> Path:
        return self.release / "tack"

    @property
    def server_bin(self) -> Path:
        return self.release / "tack-testkit-server"

    def scratch(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.work))
        return path

    def clean_home(self) -> Path:
        """An empty HOME: `bash --login` (Inspect's bash tool) would otherwise
        source this machine's ~/.profile and ~/.bashrc, whose cost is the
        machine's, not the harness's."""
        home = self.work / "home"
        home.mkdir(exist_ok=True)
        return home

    def inspect_env(self, base_url: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "HOME": str(self.clean_home()),
                "TIKTOKEN_CACHE_DIR": str(self.tiktoken_dir),
                "TACKBENCH_BASE_URL": base_url,
                "TACKBENCH_API_KEY": "sk-tack-bench-not-a-key",
                "INSPECT_DISPLAY": "none",
                "INSPECT_LOG_LEVEL": "warning",
                "NO_COLOR": "1",
            }
        )
        return env


class Server:
    """`tack-testkit-server` in a tool loop: every conversation gets `steps`
    calls of `tool`, then a final answer."""

    def __init__(self, env: Env, steps: int, tool: str = "bash", argument: str | None = None,
                 latency_ms: int = 0):
        args = [str(env.server_bin), "--provider", "openai", "--tool-loop", str(steps),
                "--tool", tool, "--latency-ms", str(latency_ms)]
        if argument is not None:
            args += ["--argument", argument]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().strip() if self.process.stdout else ""
        if not line.startswith("http://"):
            self.stop()
            raise BenchError(f"tack-testkit-server did not start (printed {line!r})")
        self.base_url = line
        self.steps = steps

    @property
    def root(self) -> str:
        """The server's root URL; it also takes OTLP/HTTP exports at
        `/v1/traces`, as a collector."""
        return self.base_url.removesuffix("/v1")

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.root}/tack-testkit/stats", timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()


def run(args: list[str], *, env: dict | None = None, cwd: Path | None = None,
        ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """Runs a command to the end; a failure raises with its output."""
    done = subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode not in ok_codes:
        raise BenchError(
            f"`{' '.join(map(str, args))}` exited {done.returncode}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return done


@dataclass
class Timed:
    wall: float  # seconds
    server_busy: float  # seconds of the model server's own work
    requests: int
    otlp_requests: int  # OTLP exports the server took as a collector


def timed(args: list[str], server: Server, **kwargs) -> Timed:
    """Wall time of a command, and the server's own time while it ran."""
    before = server.stats()
    started = time.perf_counter()
    run(args, **kwargs)
    wall = time.perf_counter() - started
    after = server.stats()
    return Timed(
        wall=wall,
        server_busy=(after["busy_us"] - before["busy_us"]) / 1e6,
        requests=after["requests"] - before["requests"],
        otlp_requests=after["otlp_requests"] - before["otlp_requests"],
    )


def median(values: list[float]) -> float:
    return statistics.median(values)


def dir_size(path: Path) -> tuple[int, int]:
    """Bytes and files under `path` (or of one file)."""
    if path.is_file():
        return path.stat().st_size, 1
    total = files = 0
    for item in path.rglob("*"):
        if item.is_file():
            total += item.stat().st_size
            files += 1
    return total, files


def ratio(a: float, b: float) -> str:
    return "n/a" if not b else f"{a / b:.2f}x"


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
