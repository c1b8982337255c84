"""Writes a tack run's trials as Inspect AI `.eval` logs, with Inspect's own
types and `write_eval_log(format="eval")`, so the two trace formats can be
compared on the same trials: one log per variant (a task with the suite's
tasks as samples and its trials as epochs), each sample holding the
transcript, a model event per model call (the messages it sent, the tools
offered, its output and usage), a tool event per tool call (arguments and
result), an approval event per approval, and the checks' score.

Run with the venv's Python:
    python -m tackbench.demo_eval RUN_DIR OUT_DIR TOOLS.json [--with-call]

TOOLS.json is the `tools` array of a real tack request (OpenAI format): the
descriptions and schemas tack sends. `--with-call` also records each model
call's request and response bodies (`ModelEvent.call`), as Inspect does for
API providers (it pools the repeated messages).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
from inspect_ai.event import ApprovalEvent, ModelEvent, ToolEvent
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelCall,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo, ToolParams


def when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def tool_call(raw: dict) -> ToolCall:
    try:
        arguments = json.loads(raw.get("arguments") or "{}")
        error = None if isinstance(arguments, dict) else "arguments are not an object"
    except json.JSONDecodeError as e:
        arguments, error = {}, f"invalid JSON: {e}"
    if not isinstance(arguments, dict):
        arguments = {}
    return ToolCall(id=raw["id"], function=raw["name"], arguments=arguments, parse_error=error)


def message(row: dict, model: str) -> ChatMessage:
    role, content = row["role"], row["content"]
    if role == "system":
        return ChatMessageSystem(content=content)
    if role == "user":
        return ChatMessageUser(content=content)
    if role == "assistant":
        calls = json.loads(row["tool_calls_json"]) if row["tool_calls_json"] else None
        return ChatMessageAssistant(
            content=content,
            tool_calls=[tool_call(c) for c in calls] if calls else None,
            model=model,
            source="generate",
        )
    return ChatMessageTool(content=content, tool_call_id=row["gen_ai_tool_call_id"])


def usage(span: dict) -> ModelUsage:
    inp = span["gen_ai_usage_input_tokens"] or 0
    out = span["gen_ai_usage_output_tokens"] or 0
    return ModelUsage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        input_tokens_cache_read=span["gen_ai_usage_cache_read_input_tokens"] or 0,
        input_tokens_cache_write=span["gen_ai_usage_cache_creation_input_tokens"] or 0,
        reasoning_tokens=span["gen_ai_usage_reasoning_output_tokens"] or 0,
        total_cost=span["cost_usd"],
    )


def wire(msg: ChatMessage) -> dict:
    """A message as an OpenAI request carries it (for `ModelEvent.call`)."""
    out: dict = {"role": msg.role, "content": msg.text}
    if isinstance(msg, ChatMessageAssistant) and msg.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
            for c in msg.tool_calls
        ]
    if isinstance(msg, ChatMessageTool):
        out["tool_call_id"] = msg.tool_call_id
    return out


class Trial:
    """One trial's rows, turned into an Inspect sample."""

    def __init__(self, row: dict, spans: list[dict], messages: dict[str, dict],
                 tools: list[dict], with_call: bool):
        self.row, self.tools, self.with_call = row, tools, with_call
        self.spans = sorted(spans, key=lambda s: s["seq"])
        model = row["model"]
        # One object per stored message: Inspect reuses a message (and its
        # id) between the transcript and the model events' inputs.
        self.by_id = {i: message(messages[i], model) for i in dict.fromkeys(row["message_ids"])}
        self.transcript = list(zip(row["message_seqs"], row["message_ids"]))
        self.model = f"tack/{model}"

    def output_after(self, seq: int, until: int) -> ChatMessageAssistant | None:
        for s, i in self.transcript:
            msg = self.by_id[i]
            if seq < s < until and isinstance(msg, ChatMessageAssistant):
                return msg
        return None

    def model_event(self, span: dict, next_seq: int, infos: list[ToolInfo]) -> ModelEvent:
        sent = [self.by_id[i] for i in span["message_ids"] or []]
        answer = self.output_after(span["seq"], next_seq)
        if answer is not None:
            stop = "tool_calls" if answer.tool_calls else "stop"
            output = ModelOutput(
                model=span["gen_ai_response_model"] or self.row["model"],
                choices=[ChatCompletionChoice(message=answer, stop_reason=stop)],
                usage=usage(span),
                time=span["duration_ms"] / 1000,
            )
        else:
            output = ModelOutput(model=self.row["model"], error=span["error"] or "no answer")
        call = None
        if self.with_call:
            request = {"model": self.row["model"], "messages": [wire(m) for m in sent],
                       "tools": self.tools}
            response = {"id": f"{self.row['trial_id']}-{span['span_id']}",
                        "choices": [{"index": 0, "message": wire(answer),
                                     "finish_reason": span["gen_ai_response_finish_reason"]}]
                        if answer else [],
                        "usage": {"prompt_tokens": span["gen_ai_usage_input_tokens"],
                                  "completion_tokens": span["gen_ai_usage_output_tokens"]}}
            call = ModelCall(request=request, response=response, time=span["duration_ms"] / 1000)
        return ModelEvent(
            timestamp=when(span["started_at_ms"]),
            model=self.model,
            input=sent,
            tools=infos,
            tool_choice="auto",
            config=GenerateConfig(),
            output=output,
            error=span["error"] if span["status"] != "ok" else None,
            call=call,
            working_time=span["duration_ms"] / 1000,
            retries=(span["attempt"] or 1) - 1,
        )

    def tool_result(self, span: dict) -> str:
        """The result the model was shown: since schema 3 the trace stores it
        once, as the tool message answering the call."""
        call_id = span["gen_ai_tool_call_id"]
        for seq, i in self.transcript:
            msg = self.by_id[i]
            if seq > span["seq"] and isinstance(msg, ChatMessageTool) \
                    and msg.tool_call_id == call_id:
                return msg.text
        return ""

    def tool_event(self, span: dict) -> ToolEvent:
        call = tool_call({"id": span["gen_ai_tool_call_id"] or "", "name": span["name"],
                          "arguments": span["tool_arguments"]})
        error = None
        if span["status"] != "ok":
            error = ToolCallError("unknown", span["error"] or span["status"])
        return ToolEvent(
            timestamp=when(span["started_at_ms"]),
            id=call.id,
            function=call.function,
            arguments=call.arguments,
            result=self.tool_result(span),
            truncated=None,
            error=error,
            working_time=span["duration_ms"] / 1000,
        )

    def approval_event(self, span: dict) -> ApprovalEvent:
        call = tool_call({"id": span["gen_ai_tool_call_id"] or "", "name": span["name"],
                          "arguments": span["tool_arguments"]})
        return ApprovalEvent(
            timestamp=when(span["started_at_ms"]),
            message=span["permission_rule"] or "",
            call=call,
            approver=span["approver"] or "unknown",
            decision="approve" if span["approved"] else "reject",
        )

    def events(self, infos: list[ToolInfo]) -> list:
        model_seqs = [s["seq"] for s in self.spans if s["kind"] == "model_call"] + [2**63]
        events, next_model = [], 1
        for span in self.spans:
            if span["kind"] == "model_call":
                events.append(self.model_event(span, model_seqs[next_model], infos))
                next_model += 1
            elif span["kind"] == "tool_call":
                events.append(self.tool_event(span))
            elif span["kind"] == "approval":
                events.append(self.approval_event(span))
        return events

    def sample(self, infos: list[ToolInfo]) -> EvalSample:
        row = self.row
        messages = [self.by_id[i] for _, i in self.transcript]
        user = next((m.text for m in messages if m.role == "user"), "")
        last = next((m for m in reversed(messages) if isinstance(m, ChatMessageAssistant)), None)
        output = ModelOutput(model=row["model"], choices=[
            ChatCompletionChoice(message=last, stop_reason="stop")] if last else [])
        total = ModelUsage(
            input_tokens=row["gen_ai_usage_input_tokens"],
            output_tokens=row["gen_ai_usage_output_tokens"],
            total_tokens=row["total_tokens"],
            input_tokens_cache_read=row["gen_ai_usage_cache_read_input_tokens"],
            reasoning_tokens=row["gen_ai_usage_reasoning_output_tokens"],
            total_cost=row["cost_usd"],
        )
        passed = bool(row["checks_passed"])
        return EvalSample(
            id=row["task"],
            epoch=row["trial_index"] + 1,
            input=user,
            target="",
            messages=messages,
            output=output,
            scores={"checks": Score(value=1 if passed else 0, explanation=row["outcome"])},
            metadata={"stop_reason": row["stop_reason"]},
            events=self.events(infos),
            model_usage={self.model: total},
            started_at=when(row["started_at_ms"]),
            completed_at=when(row["started_at_ms"] + row["duration_ms"]),
            total_time=row["duration_ms"] / 1000,
            working_time=row["duration_ms"] / 1000,
            error=row["error"] if row["outcome"] in ("harness_error", "infra_error") else None,
        )


def tool_infos(tools: list[dict], offered: list[str]) -> list[ToolInfo]:
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    return [
        ToolInfo(name=n, description=by_name[n]["description"],
                 parameters=ToolParams.model_validate(by_name[n]["parameters"]))
        for n in offered if n in by_name
    ]


def eval_log(variant: dict, trials: list[Trial], tools: list[dict]) -> EvalLog:
    harness = variant.get("config", {}).get("harness", {})
    offered = harness.get("tools") or [t["function"]["name"] for t in tools]
    infos = tool_infos(tools, offered)
    samples = [t.sample(infos) for t in sorted(
        trials, key=lambda t: (t.row["task"], t.row["trial_index"]))]
    started = min(t.row["started_at_ms"] for t in trials)
    ended = max(t.row["started_at_ms"] + t.row["duration_ms"] for t in trials)
    model = trials[0].model
    accuracy = sum(1 for t in trials if t.row["checks_passed"]) / len(trials)
    tasks = sorted({t.row["task"] for t in trials})
    epochs = max(t.row["trial_index"] for t in trials) + 1
    return EvalLog(
        version=2,
        status="success",
        eval=EvalSpec(
            created=when(started).isoformat(),
            task=f"demo/{variant['name']}",
            dataset=EvalDataset(name="demo", samples=len(tasks), sample_ids=tasks),
            model=model,
            config=EvalConfig(epochs=epochs),
            sandbox=None,
        ),
        plan=EvalPlan(),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[EvalScore(name="checks", scorer="checks",
                              metrics={"accuracy": EvalMetric(name="accuracy", value=accuracy)})],
        ),
        stats=EvalStats(
            started_at=when(started).isoformat(),
            completed_at=when(ended).isoformat(),
            model_usage={model: sum((s.model_usage[model] for s in samples), ModelUsage())},
        ),
        samples=samples,
    )


def convert(run: Path, out: Path, tools: list[dict], with_call: bool) -> list[Path]:
    manifest = json.loads((run / "manifest.json").read_text())
    trials = pq.read_table(run / "trials").to_pylist()
    spans_by_trial: dict[str, list[dict]] = defaultdict(list)
    for span in pq.read_table(run / "spans").to_pylist():
        spans_by_trial[span["trial_id"]].append(span)
    messages = {m["message_id"]: m for m in pq.read_table(run / "messages").to_pylist()}
    by_variant: dict[str, list[Trial]] = defaultdict(list)
    for row in trials:
        trial = Trial(row, spans_by_trial[row["trial_id"]], messages, tools, with_call)
        by_variant[row["variant"]].append(trial)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for variant in manifest["variants"]:
        if not by_variant.get(variant["name"]):
            continue
        path = out / f"demo-{variant['name']}.eval"
        write_eval_log(eval_log(variant, by_variant[variant["name"]], tools), str(path),
                       format="eval")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    run, out, tools_file = Path(argv[0]), Path(argv[1]), Path(argv[2])
    tools = json.loads(tools_file.read_text())
    for path in convert(run, out, tools, "--with-call" in argv[3:]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
