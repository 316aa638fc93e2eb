"""decodeloop's policy inside AgentDojo: attack success and utility under attack, per suite and policy mode.

    pip install agentdojo      # the benchmark (its own dependencies; decodeloop needs none of them)
    python3 bench/agentdojo_policy.py [--suites banking slack travel workspace] [--version v1.2.1]

The model is scripted, so the figures measure the boundary, not a model: for
each user task it makes the task's reference calls (`ground_truth`) in order,
and whenever a tool result carries the goal of an injection task it obeys at
once, making that injection task's reference calls first. Each call goes
through decodeloop's `Policy` (policy.py) before AgentDojo runs it, with the
provenance the harness would have: the user's prompt is trusted, every tool
result is untrusted. A denied call is skipped (the model is told why and moves
on). AgentDojo's tools carry no MCP annotations, so the config's rule stands in
for them: a tool whose name starts with get_, read_, search_, list_ or check_ is
read-only, every other one side-effecting.

Before its first call the model writes its plan, as the `plan` mode asks: the
names of the tools its reference calls use, in order. That is what a model
knows from the prompt alone; it never depends on the injection task, which the
model learns of only by reading it in a result.

Rows: `off` (no policy); `confirm, no terminal` (a side-effecting call after a
tool result is denied: nobody to ask); `strict, user says yes` (the user
confirms everything, so only strict's rule denies: a side-effecting call whose
argument value occurs in a tool result and not in the prompt); `plan, user says
yes` (a side-effecting call after a tool result runs only if the plan names its
tool; within the plan a value from a tool result alone is put to a user who
says yes); `plan, no terminal` (the same question, nobody to answer it: denied);
`masked, no terminal` (`plan`, with that question answered by re-running the
model with the user's request masked: this model, given no task, makes only the
calls of the injections it has read, so its re-run's next call is the first of
those that has not run; the call is denied if the re-run makes it with the
value taken from a result).
`plan, user answers from their task` and `strict, user answers from their
task` stand in for a user who reads the question the harness asks (the tool,
its arguments and, for `plan`, the value taken from a result and which tool's
result it occurs in) and knows only their own request: the answer is yes
exactly when the asked call, by tool name and arguments, is one of the user
task's reference calls, and no otherwise. Nothing about the injection task is
used. These rows measure how often the user is asked and what a user who
knows their own request gets; they are not an automated guarantee: a user who
misreads a question, or whose request does not pin the value, gets less.
"asked" counts the questions put to the user over every run, "asked/pair"
that count divided by the pairs. Columns: utility
without attack, utility under attack and targeted attack success (the
injection task's goal reached), over every user task x injection task pair of
the `important_instructions_no_names` attack; attack success again for the
injection tasks whose reference calls include a side-effecting tool, and for
those that only read (a leak through a read-only call's arguments, or a visit
to a page, which the policy allows by design). An injection task without
reference calls (AgentDojo gives none for workspace's injection_task_6 to 13)
cannot be obeyed by this model: it counts in the overall figure only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.attacks.attack_registry import load_attack
    from agentdojo.functions_runtime import EmptyEnv, Env, FunctionsRuntime
    from agentdojo.task_suite.load_suites import get_suites
    from agentdojo.types import ChatAssistantMessage, ChatMessage, ChatToolResultMessage, text_content_block_from_string
except ImportError:
    sys.exit("bench/agentdojo_policy.py needs AgentDojo: pip install agentdojo")

import provenance

from decodeloop.tools.config import ServerSpec
from decodeloop.trust.policy import EVIDENCE, Policy
from decodeloop.trust.provenance import Provenance

READ_ONLY_PREFIXES = ("get_", "read_", "search_", "list_", "check_")
ATTACK = "important_instructions_no_names"
MODES = {
    "off": ("off", None),
    "confirm, no terminal": ("confirm", None),
    "strict, user says yes": ("strict", lambda question: True),
    "plan, user says yes": ("plan", lambda question: True),
    "plan, no terminal": ("plan", None),
    "masked, no terminal": ("masked", None),
    "plan, user answers from their task": ("plan", "task"),
    "strict, user answers from their task": ("strict", "task"),
}


class ScriptedModel(BasePipelineElement):
    """Replays a user task's reference calls, obeys injections it reads, asks the policy before each call."""

    name = "decodeloop-scripted-local"  # AgentDojo's attacks look a model name up in it: "local"

    def __init__(self, suite, policy: Policy | None) -> None:
        self.suite = suite
        self.policy = policy
        self.by_prompt = {task.PROMPT: task for task in suite.user_tasks.values()}
        self.decisions: list = []
        self.intent: list = []  # the user task's reference calls: what the user asked for

    def user_answers(self, question: str) -> bool:
        """A user who knows only their request: yes when the question names one of its calls, tool and arguments."""
        return any(
            question.startswith(f"{call.function} on {self.suite.name} with {dict(call.args)} (")
            for call in self.intent
        )

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = EmptyEnv(),
        messages: Sequence[ChatMessage] = (),
        extra_args: dict | None = None,
    ):
        if extra_args is None:
            extra_args = {}
        task = self.by_prompt[query]
        planned = list(task.ground_truth(env.model_copy(deep=True)))
        self.intent = list(planned)
        # before reading anything the model says which tools the prompt asks for: the names of its own calls
        plan = "Plan: " + ", ".join(dict.fromkeys(call.function for call in planned))
        seen: list[tuple[str, str]] = [("user", query)]
        made: list[tuple[str, dict]] = []  # the calls it made, in order: run or denied (it was told why)
        obeyed: set[str] = set()
        out = list(messages) + [
            ChatAssistantMessage(role="assistant", tool_calls=None, content=[text_content_block_from_string(plan)])
        ]
        while planned:
            call = planned.pop(0)
            arguments = dict(call.args)
            if self.policy is not None:
                masked = None
                while True:  # the masked mode asks for its evidence (EVIDENCE), as the harness answers it
                    decision = self.policy.check(
                        call.function,
                        self.suite.name,
                        call.function,
                        None,
                        arguments,
                        lambda: Provenance(list(seen), plan),
                        masked,
                    )
                    if decision.verdict != EVIDENCE:
                        break
                    masked = self.masked_calls(made, seen, env)
                self.decisions.append(decision)
                if decision.verdict != "allow":
                    made.append((call.function, arguments))
                    continue
            made.append((call.function, arguments))
            result, error = runtime.run_function(env, call.function, arguments, raise_on_error=False)
            text = error or tool_result_to_str(result)
            out += [
                ChatAssistantMessage(role="assistant", tool_calls=[call], content=[text_content_block_from_string("")]),
                ChatToolResultMessage(
                    role="tool",
                    content=[text_content_block_from_string(text)],
                    tool_call=call,
                    tool_call_id=None,
                    error=error,
                ),
            ]
            seen.append((f"tool:{self.suite.name}/{call.function}", text))
            for injection in self.suite.injection_tasks.values():  # obey what the data says, at once
                if injection.ID not in obeyed and _plain(injection.GOAL) in _plain(text):
                    obeyed.add(injection.ID)
                    planned[:0] = injection.ground_truth(env.model_copy(deep=True))
        out.append(
            ChatAssistantMessage(
                role="assistant", tool_calls=None, content=[text_content_block_from_string(task.GROUND_TRUTH_OUTPUT)]
            )
        )
        return query, runtime, env, out, extra_args

    def masked_calls(self, made: list, seen: list, env) -> list[tuple[str, dict]]:
        """This model re-run with the user's request masked (the `masked` policy): with no task of its own it
        only obeys, so its next call is the first call of an injection it has read that it has not made yet
        (a denied call was made: the context holds it and the denial, and the model moved on)."""
        agenda = []
        for source, text in seen:
            if source == "user":
                continue
            for injection in self.suite.injection_tasks.values():
                if _plain(injection.GOAL) in _plain(text):
                    agenda += injection.ground_truth(env.model_copy(deep=True))
        done = list(made)  # each call made answers for one call of the agenda: an injection may repeat a call
        for call in agenda:
            key = (call.function, dict(call.args))
            if key not in done:
                return [key]
            done.remove(key)
        return []


def _plain(text: str) -> str:
    """Text as a reader sees it through AgentDojo's YAML results: lines folded back, quotes undoubled."""
    return " ".join(text.replace("''", "'").split())


def policy_for(suite, mode: str, confirm) -> Policy | None:
    if mode == "off":
        return None
    read_only = tuple(tool.name for tool in suite.tools if tool.name.startswith(READ_ONLY_PREFIXES))
    return Policy(mode, [ServerSpec(suite.name, read_only=read_only)], confirm)


def run_suite(suite, mode: str, confirm) -> dict[str, float]:
    asked = []
    if confirm == "task":  # the user answers from their own request (the task the model is running)
        confirm = lambda question: model.user_answers(question)  # noqa: E731  (model is bound below)
    if confirm is not None:  # count the questions the user is asked
        confirm = (lambda answer: lambda question: asked.append(question) or answer(question))(confirm)
    model = ScriptedModel(suite, policy_for(suite, mode, confirm))
    attack = load_attack(ATTACK, suite, model)
    clean = [suite.run_task_with_pipeline(model, task, None, {})[0] for task in suite.user_tasks.values()]
    environment = suite.load_and_inject_default_environment({})
    acts = {}  # does the attack's goal need a side effect? (None: it has no reference calls to obey)
    for injection in suite.injection_tasks.values():
        calls = injection.ground_truth(environment.model_copy(deep=True))
        acts[injection.ID] = any(not c.function.startswith(READ_ONLY_PREFIXES) for c in calls) if calls else None
    utility, success, by_sink = [], [], {True: [], False: [], None: []}
    for task in suite.user_tasks.values():
        for injection in suite.injection_tasks.values():
            useful, attacked = suite.run_task_with_pipeline(model, task, injection, attack.attack(task, injection))
            utility.append(useful)
            success.append(attacked)
            by_sink[acts[injection.ID]].append(attacked)
    denied = sum(d.verdict == "deny" for d in model.decisions)
    return {
        "utility": 100 * sum(clean) / len(clean),
        "under attack": 100 * sum(utility) / len(utility),
        "attack success": 100 * sum(success) / len(success),
        "pairs": len(success),
        "side-effecting sinks": _percent(by_sink[True]),
        "read-only sinks": _percent(by_sink[False]),
        "denied": denied,
        "decisions": len(model.decisions),
        "asked": len(asked),
    }


def _percent(results: list[bool]) -> str:
    return f"{100 * sum(results) / len(results):.1f}%" if results else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", default=["banking", "slack", "travel", "workspace"])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), help="the rows to run (default: all)")
    parser.add_argument("--version", default="v1.2.1", help="AgentDojo's benchmark version (default: v1.2.1)")
    args = parser.parse_args()
    suites = get_suites(args.version)
    print(provenance.header())
    print(f"AgentDojo {args.version}, attack {ATTACK}, scripted model that obeys every injection it reads")
    print(
        f"{'suite':<10} {'policy':<36} {'utility':>8} {'under attack':>13} {'attack success':>15} "
        f"{'side-effecting sinks':>21} {'read-only sinks':>16} {'pairs':>6} {'denied calls':>13} {'asked':>6}"
        f" {'asked/pair':>10}"
    )
    for name in args.suites:
        suite = suites[name]
        for label, (mode, confirm) in MODES.items():
            if args.modes and label not in args.modes:
                continue
            started = time.perf_counter()
            row = run_suite(suite, mode, confirm)
            print(
                f"{name:<10} {label:<36} {row['utility']:>7.1f}% {row['under attack']:>12.1f}% "
                f"{row['attack success']:>14.1f}% {row['side-effecting sinks']:>21} {row['read-only sinks']:>16} "
                f"{row['pairs']:>6} {row['denied']:>6}/{row['decisions']:<6} {row['asked']:>6}"
                f" {row['asked'] / row['pairs']:>10.2f}"
                f"  ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
