"""Suites the benchmarks generate: one trivial task, variants whose model is
an `openai:` model on the loopback tool-loop server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .common import INSTRUCTION, SYSTEM_PROMPT


@dataclass
class Variant:
    name: str
    base_url: str
    tools: list[str]
    max_steps: int
    sandbox: str = "strict"


def toml_string(text: str) -> str:
    # JSON strings are valid TOML basic strings.
    return json.dumps(text)


def write_suite(root: Path, name: str, variants: list[Variant], notes: str = "ok\n",
                image: str | None = None, engine: bool = False) -> Path:
    """A suite with one task, `echo`, whose fixture holds notes.txt and whose
    check only asks that the workspace still holds it; with `image`, the
    task runs in that container image's filesystem, its workspace at /app
    (`engine`: in a container the engine starts, commands through exec)."""
    task = root / "tasks" / "echo"
    (task / "fixture").mkdir(parents=True, exist_ok=True)
    (task / "fixture" / "notes.txt").write_text(notes)
    environment = ""
    if image:
        environment = f"\n[environment]\nimage = {toml_string(image)}\nworkdir = \"/app\"\n"
        if engine:
            environment += "mode = \"engine\"\n"
    (task / "task.toml").write_text(
        f"instruction = {toml_string(INSTRUCTION)}\n{environment}"
        "\n[[checks]]\nname = \"notes kept\"\nrun = \"test -f notes.txt\"\n"
        "\n[solution]\nscript = \"true\"\n"
    )
    lines = [f"[suite]\nname = {toml_string(name)}\ntrials = 1\nseed = 1\n"]
    for v in variants:
        lines.append(
            f"[[variants]]\nname = {toml_string(v.name)}\nmodel = \"openai:tack-bench\"\n"
            f"[variants.harness]\nsystem_prompt = {toml_string(SYSTEM_PROMPT)}\n"
            f"tools = {json.dumps(v.tools)}\nmax_steps = {v.max_steps}\n"
            f"sandbox = {toml_string(v.sandbox)}\n"
            f"[variants.provider]\nbase_url = {toml_string(v.base_url)}\n"
        )
    (root / "suite.toml").write_text("\n".join(lines))
    return root
