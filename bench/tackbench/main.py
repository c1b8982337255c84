"""`just bench`: every benchmark in one run, printed side by side with
ratios, and written as markdown (docs/benchmarks.md) when --out is given.

    python -m tackbench.main --repo DIR --release DIR --tiktoken DIR [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import concurrency, demo_eval, overhead
from .common import BenchError, Env, dir_size, ratio, run


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor())
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in
                Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), 0)
    return (f"{cpu}, {os.cpu_count()} cores, {mem} GiB, Linux {platform.release()}, "
            f"load average at start {os.getloadavg()[0]:.2f}")


def commit(repo: Path) -> str:
    head = run(["git", "-C", repo, "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"]).stdout
    return head + (" (with uncommitted changes)" if dirty.strip() else "")


def section_overhead(env: Env, lines: list[str]) -> None:
    n1, n2, repeats = (5, 20, 1) if env.quick else (10, 100, 3)
    result = overhead.measure(env, n1, n2, repeats)
    lines += [f"## 1. Harness overhead per step (N1={n1}, N2={n2} bash steps, median of "
              f"{repeats} run(s) each)", "",
              "| harness | per step, ms | bash tool per call, ms | harness without the tool, ms |",
              "|---|---:|---:|---:|"]
    rows = {}
    for h in result.harnesses:
        step, tool = h.per_step_ms(n1, n2), h.tool_mean_ms()
        rows[h.name] = (step, tool, step - tool)
        # Per step comes from two runs' difference, the tool's time from its
        # spans: where the tool is most of a step (podman exec, about 125 ms
        # give or take several) the two can cross, which is noise, not a
        # harness that costs less than nothing.
        bare = f"{step - tool:.2f}" if step >= tool else "within noise"
        lines.append(f"| {h.name} | {step:.2f} | {tool:.2f} | {bare} |")
    inspect = rows["Inspect AI (local sandbox)"]
    lines.append("")
    for name in ("tack (sandbox off)", "tack (sandbox strict)"):
        step, tool, bare = rows[name]
        lines.append(f"- {name} / Inspect: per step {ratio(step, inspect[0])}, bash tool "
                     f"{ratio(tool, inspect[1])}, harness without the tool "
                     f"{ratio(bare, inspect[2])}")
    strict, off = rows["tack (sandbox strict)"], rows["tack (sandbox off)"]
    lines.append(f"- bash tool, strict / off: {ratio(strict[1], off[1])}")
    streamed = rows[overhead.OTLP]
    walls = {name: statistics.median(h.net[n2]) for name, h in
             ((h.name, h) for h in result.harnesses)}
    lines.append(f"- `--otlp` (every span streamed to a loopback OTLP/HTTP collector) / without: "
                 f"per step {ratio(streamed[0], off[0])}, whole run of {n2} steps "
                 f"{ratio(walls[overhead.OTLP], walls['tack (sandbox off)'])}")
    if overhead.IMAGE_TASK in rows:
        image = rows[overhead.IMAGE_TASK]
        lines.append(f"- bash tool, image task / host task under strict: "
                     f"{ratio(image[1], strict[1])}")
        runs = 10 if env.quick else 30
        execs = overhead.engine_exec_ms(env, runs)
        median = statistics.median(execs)
        lines.append(f"- for comparison, the engine's exec path: `podman exec` of "
                     f"`bash -c 'echo hi'` in a running container of {env.image}, median of "
                     f"{runs}: {median:.1f} ms ({ratio(median, image[1])} the image task's bash "
                     f"tool)")
        engine = rows[overhead.ENGINE_TASK]
        lines.append(f"- bash tool, image task in engine mode (tack's bash tool through "
                     f"`podman exec`) / the same task under tack's sandbox: "
                     f"{ratio(engine[1], image[1])}")
    else:
        lines.append("- image task: skipped (no engine, or no image; set TACK_BENCH_IMAGE)")
    lines.append("")


def section_traces(env: Env, lines: list[str]) -> None:
    steps, trials = (20, 2) if env.quick else (100, 5)
    long = overhead.long_trials(env, steps, trials)
    tack_pc, insp_pc = long.tack_bytes / long.tack_calls, long.inspect_bytes / long.inspect_calls
    lines += [f"## 2. Trace bytes per model call", "",
              "| workload | tack bytes | files | bytes/call | Inspect bytes | files | bytes/call "
              "| tack/Inspect |", "|---|---:|---:|---:|---:|---:|---:|---:|",
              f"| {trials} trials × {steps} bash steps (both real runs, {long.tack_calls} calls) "
              f"| {long.tack_bytes} | {long.tack_files} | {tack_pc:.0f} | {long.inspect_bytes} "
              f"| {long.inspect_files} | {insp_pc:.0f} | {ratio(tack_pc, insp_pc)} |"]
    demo = demo_figures(env)
    for label, key in (("demo (Inspect log written from tack's trials)", "nocall"),
                       ("demo, Inspect log also holding each call's request/response",
                        "call")):
        ib, ifiles = demo[key]
        lines.append(f"| {label}, {demo['calls']} calls | {demo['tack_bytes']} | "
                     f"{demo['tack_files']} | {demo['tack_bytes'] / demo['calls']:.0f} | {ib} | "
                     f"{ifiles} | {ib / demo['calls']:.0f} | "
                     f"{ratio(demo['tack_bytes'], ib)} |")
    lines.append("")


def demo_figures(env: Env) -> dict:
    root = env.scratch("demo")
    run([env.tack, "run", env.repo / "suites" / "demo", "--no-report", "--traces",
         root / "traces"], cwd=env.repo)
    run_dir = overhead.only_run(root / "traces")
    tack_bytes, tack_files = dir_size(run_dir)
    calls = overhead.model_calls_in(run_dir, env.python)
    tools = tack_tools(env, root)
    figures = {"tack_bytes": tack_bytes, "tack_files": tack_files, "calls": calls}
    for key, flags in (("nocall", []), ("call", ["--with-call"])):
        out = root / f"inspect-{key}"
        run([env.python, "-m", "tackbench.demo_eval", run_dir, out, tools, *flags],
            cwd=env.repo / "bench")
        size = sum(dir_size(p)[0] for p in out.glob("*.eval"))
        figures[key] = (size, len(list(out.glob("*.eval"))))
    return figures


def tack_tools(env: Env, root: Path) -> Path:
    """The tools array of a real tack request, recorded by a scripted server."""
    script, record = root / "script.json", root / "requests.jsonl"
    script.write_text('[{"type": "reply", "text": "done"}]')
    server = subprocess.Popen([env.server_bin, "--provider", "openai", "--script", script,
                               "--record", record], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip() if server.stdout else ""
        workspace = root / "exec-ws"
        workspace.mkdir()
        run([env.tack, "exec", "-w", workspace, "--model", "openai:tack-bench", "--base-url",
             url, "hi"], env=dict(os.environ, OPENAI_API_KEY="sk-tack-testkit-0000000000000000"))
    finally:
        server.terminate()
        server.wait(timeout=10)
    tools = root / "tools.json"
    tools.write_text(json.dumps(json.loads(record.read_text().splitlines()[0])["body"]["tools"]))
    return tools


def section_concurrency(env: Env, lines: list[str]) -> None:
    jobs, trials, steps = (200, 200, 10) if env.quick else (1000, 1000, 30)
    r = concurrency.run(env, jobs=jobs, trials=trials, steps=steps)
    lines += [f"## 3. Concurrency: {jobs} trials at once, {r.latency_ms} ms per model call", "",
              f"- {trials} trials × {steps + 1} model calls ({r.calls} calls) in {r.wall:.1f} s",
              f"- steady state (20%–80% of the calls): {r.steady_calls_per_s:.0f} calls/s; "
              f"ideal {r.ideal_calls_per_s:.0f} calls/s: **{r.fraction * 100:.1f}% of ideal**",
              f"- tack's resident memory: peak {r.peak_rss_kb / 1024:.0f} MiB; "
              f"{r.rss_mid_kb / 1024:.0f} MiB at half the calls, "
              f"{r.rss_late_kb / 1024:.0f} MiB at 90%",
              f"- CPU per model call: tack {r.tack_cpu_ms_per_call:.2f} ms, the loopback "
              f"server {r.server_cpu_ms_per_call:.2f} ms; the machine's {os.cpu_count()} cores "
              f"{r.machine_busy * 100:.0f}% busy over the run",
              f"- CPU ceiling: at the steady state's CPU per call the machine's cores answer at most "
              f"{r.cpu_ceiling_calls_per_s:.0f} calls/s "
              f"({r.cpu_ceiling_calls_per_s / r.ideal_calls_per_s * 100:.0f}% of the ideal); "
              f"the steady rate is {r.steady_calls_per_s / r.cpu_ceiling_calls_per_s * 100:.0f}% "
              f"of it", ""]
    # A process per step: every step runs `bash` under the strict sandbox,
    # forked by the spawner process (the default) or by tack itself, and
    # unconfined, for the part of the gap that is not the sandbox's.
    jobs, trials, steps = (100, 100, 5) if env.quick else (200, 400, 5)
    lines += [f"A process per step: {jobs} trials at once, each {steps} `bash` steps "
              f"(`echo hi`) and a final answer ({trials} trials):", "",
              "| sandbox, commands forked by | wall, s | calls/s | of ideal | peak RSS, MiB "
              "| tack CPU per call, ms | server CPU per call, ms | cores busy "
              "| CPU ceiling, calls/s (of ideal) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    timed = {}
    per_call = {}
    for key, label, sandbox, spawner in [
            ("on", "strict, the spawner process (default)", "strict", "on"),
            ("off", "strict, tack itself (`TACK_SANDBOX_SPAWNER=off`)", "strict", "off"),
            ("none", "`sandbox = \"off\"` (unconfined)", "off", "on")]:
        r = concurrency.run(env, jobs=jobs, trials=trials, steps=steps, sandbox=sandbox,
                            tool="bash", argument="echo hi",
                            extra_env={"TACK_SANDBOX_SPAWNER": spawner})
        timed[key] = r.wall
        per_call[key] = r.tack_cpu_ms_per_call
        ideal = r.ideal_calls_per_s
        lines.append(f"| {label} | {r.wall:.1f} | {r.steady_calls_per_s:.0f} | "
                     f"{r.fraction * 100:.1f}% | {r.peak_rss_kb / 1024:.0f} | "
                     f"{r.tack_cpu_ms_per_call:.2f} | {r.server_cpu_ms_per_call:.2f} | "
                     f"{r.machine_busy * 100:.0f}% | {r.cpu_ceiling_calls_per_s:.0f} "
                     f"({r.cpu_ceiling_calls_per_s / r.ideal_calls_per_s * 100:.0f}%) |")
    bash_ms = concurrency.bash_cpu_ms()
    # Each trial runs its steps' commands and its check's, one model call
    # per step and one for the final answer.
    commands, calls = steps + 1, steps + 1
    bash_per_call = bash_ms * commands / calls
    bash_ceiling = (os.cpu_count() or 1) * 1000 / bash_per_call
    lines += ["", f"- spawner / tack itself, wall time: {ratio(timed['on'], timed['off'])}",
              "- strict (spawner) / unconfined, tack's CPU per call: "
              f"{ratio(per_call['on'], per_call['none'])}",
              "- tack's CPU includes its commands' (bash) and every trial's workspace, "
              "session and checks: the machine minus the loopback server",
              "- CPU ceiling: the calls per second the machine's cores could answer at the "
              "steady state's CPU per call (tack, its commands and the server); for scale, one "
              f"unconfined `bash -c 'echo hi'` costs {bash_ms:.2f} ms of CPU here (mean of 200)",
              f"- the commands alone: a trial runs {commands} `bash` ({steps} steps and its "
              f"check) for {calls} model calls, {bash_per_call:.2f} ms of CPU per call "
              f"unconfined; were that all the machine did, its cores would answer "
              f"{bash_ceiling:.0f} calls/s ({bash_ceiling / ideal * 100:.0f}% of the "
              f"ideal). The rest of tack's CPU per call is "
              f"{per_call['on'] - bash_per_call:.2f} ms under strict with the spawner: the "
              "sandbox (each trial's walls, twice: its session and its check's own; the "
              "session's init), the trial's workspace and the harness; unconfined, "
              f"{per_call['none'] - bash_per_call:.2f} ms: the workspace and the harness",
              f"- {filesystem_note(env)}", ""]


def filesystem_note(env: Env) -> str:
    """Where the trials' directories are made, whether that filesystem has
    a journal (ext4 without one checks each new inode against those deleted
    in the last minutes, which a run that makes and removes a few
    directories per trial pays for on every one)."""
    tmp = os.path.realpath(tempfile.gettempdir())
    best = ("", "?", "?")
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            point = left.split()[4]
            fstype, source = right.split()[:2]
            inside = tmp == point or tmp.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best[0]):
                best = (point, fstype, source)
    point, fstype, source = best
    kind = fstype
    if fstype == "ext4":
        device = os.path.basename(source)
        journal = any(name.startswith(device + "-") for name in os.listdir("/proc/fs/jbd2")) \
            if os.path.isdir("/proc/fs/jbd2") else False
        kind = "ext4 with a journal" if journal else "ext4 without a journal"
    return (f"the trials' workspaces, private tmps and checks' copies are made in {tmp} "
            f"({kind}, {source} on {point}); confined commands see it through a read-only "
            "overlay, whatever it holds")


def section_sandbox(env: Env, lines: list[str]) -> None:
    n = "50" if env.quick else "200"
    done = run(["cargo", "bench", "--workspace", "--bench", "overhead"], cwd=env.repo,
               env=dict(os.environ, TACK_BENCH_N=n))
    lines += ["## 4. Sandbox overhead (crates/sandbox/benches/overhead.rs)", "", "```",
              done.stdout.strip(), "```", ""]


def section_report_scale(env: Env, lines: list[str]) -> None:
    script = env.repo / "bench" / "report-scale"
    lines += ["## 5. Report and viewer time against DuckDB", ""]
    # TACK_BENCH_REPORT_SIZES="10000 100000 1000000 10000000" adds the
    # ten-million-trial row (its run: about 47 minutes to generate, once).
    sizes = os.environ.get("TACK_BENCH_REPORT_SIZES", "").split()
    if os.access(script, os.X_OK):
        lines += [run([script, *sizes], cwd=env.repo).stdout.strip(), ""]
    else:
        lines += ["report-scale: not built yet", ""]


SECTIONS = {"overhead": section_overhead, "traces": section_traces,
            "concurrency": section_concurrency, "sandbox": section_sandbox,
            "report-scale": section_report_scale}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--tiktoken", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", choices=list(SECTIONS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tack-bench-"))
    env = Env(repo=args.repo.resolve(), release=args.release.resolve(),
              python=Path(sys.executable), work=work, tiktoken_dir=args.tiktoken,
              quick=args.quick, image=os.environ.get("TACK_BENCH_IMAGE") or None)
    started = datetime.datetime.now(datetime.timezone.utc)
    lines = [f"- date: {started:%Y-%m-%d %H:%M} UTC", f"- machine: {machine()}",
             f"- commit: {commit(env.repo)}", ""]
    print("\n".join(lines), flush=True)
    failed = False
    try:
        for name in args.only or list(SECTIONS):
            before = len(lines)
            try:
                SECTIONS[name](env, lines)
            except BenchError as error:
                failed = True
                lines += [f"## {name}: failed", "", "```", str(error)[-3000:], "```", ""]
            print("\n".join(lines[before:]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        method = (env.repo / "bench" / "method.md").read_text()
        args.out.write_text(method + "\n# Figures\n\n" + "\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
