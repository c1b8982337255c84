"""The echo workload as an Inspect AI task: the model (the loopback
tool-loop server, through Inspect's `openai-api` provider) calls `bash`
until it answers; commands run in Inspect's `local` sandbox. Run with
`inspect eval inspect_task.py --model openai-api/tackbench/echo`."""

import sys
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate, system_message, use_tools
from inspect_ai.tool import bash

# Inspect loads this file by path: make the package importable for the
# prompt and instruction tack's run gets too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tackbench.common import INSTRUCTION, SYSTEM_PROMPT  # noqa: E402


@task
def echo() -> Task:
    return Task(
        dataset=[Sample(input=INSTRUCTION)],
        solver=[system_message(SYSTEM_PROMPT), use_tools(bash()), generate()],
        sandbox="local",
    )
