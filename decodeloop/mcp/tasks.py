"""MCP Tasks: a tool call the server runs as a task, followed to its end, on both wires.

2025-11-25 (tasks in the core protocol): a tool whose `execution.taskSupport` is "required" or "optional",
on a server whose capabilities list `tasks.requests.tools.call`, is called with a `task` parameter; the
server answers a CreateTaskResult (`{"task": {...}}`). The client polls `tasks/get` at the task's
`pollInterval` and, once the task is over or asks for input (`input_required`: the server's elicitation
request arrives while `tasks/result` waits, and is answered as any other), takes its outcome with
`tasks/result`: the tool's result, or the JSON-RPC error the call would have had.

2026-07-28 (the `io.modelcontextprotocol/tasks` extension): the client declares the extension in every
request's capabilities when the server offers it, and the server decides; a `tools/call` result with
`resultType: "task"` is a task. `tasks/get` returns it with its `result` (completed) or `error` (failed)
inline, and its `inputRequests` (input_required) are answered with `tasks/update`, each key once.

On both: every status change goes to `on_status`; several tasks are polled together, each when its
interval has passed (`wait_all`); a task that runs past `task_timeout` seconds, and every task still running
when Ctrl-C interrupts the wait (or `stop` is set), is cancelled on the server (`tasks/cancel`); a task that
fails or is cancelled is an McpError, never a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from decodeloop.errors import McpError, ProtocolError, RequestTimeout, RpcError
from decodeloop.text.credentials import clip

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
STATUSES = ("working", "input_required", *TERMINAL)
DEFAULT_TASK_TIMEOUT = 600.0  # seconds a task may run before it is cancelled (a call's own timeout is less)
DEFAULT_POLL = 1.0  # seconds between polls when the server names no interval
MIN_POLL, MAX_POLL = 0.05, 5.0  # a server's interval is kept within these (a flood, or a nap)
CANCEL_TIMEOUT = 5.0  # seconds tasks/cancel waits: a cancel must never hold up an interrupted turn
MAX_INPUT_ANSWERS = 50  # input requests one task may make before it is given up on
REPORT_EVERY = 0.5  # seconds between reports of a task whose message alone changes (a flood stays a trickle)


class TaskFailed(McpError):
    """A task that ended failed (its error) or cancelled, or one given up on."""


class RunningTask:
    """One tools/call the server runs as a task: its id, its last status, when to ask again."""

    def __init__(
        self,
        client: Any,
        tool: str,
        created: dict,
        *,
        stateless: bool,
        timeout: float | None,
        task_timeout: float | None,
        on_status: Callable[[str, dict], None] | None = None,
    ) -> None:
        self.client, self.tool, self.stateless = client, tool, stateless
        self.timeout = timeout  # each request's
        self.on_status = on_status
        task = created if stateless else created.get("task")
        if not isinstance(task, dict) or not isinstance(task.get("taskId"), str) or not task["taskId"]:
            raise ProtocolError(f"{client.name}: tools/call {tool} answered a task without a taskId")
        self.task_id: str = task["taskId"]
        self.status, self._message = "", None
        self._reported = 0.0  # when on_status was last called
        self._lock = threading.Lock()  # polls and pushed notifications (the reader thread) both update it
        self.ends = None if task_timeout is None else time.monotonic() + task_timeout
        self.task_timeout = task_timeout
        self.outcome: dict | None = None  # the tool's result, once it has one
        self.failure: McpError | None = None
        self._answered: set[str] = set()  # input request keys already answered (2026-07-28)
        self._due = 0.0
        self._seen(task)

    @property
    def done(self) -> bool:
        return self.outcome is not None or self.failure is not None

    @property
    def due(self) -> float:
        """When to poll next (time.monotonic())."""
        return self._due

    def _seen(self, task: dict) -> None:
        """A task object from the server: its status said once per change (a change of message alone at most
        every REPORT_EVERY seconds), the next poll scheduled."""
        status = task.get("status")
        if status not in STATUSES:
            raise ProtocolError(f"{self.client.name}: task {self.task_id} of {self.tool} has status {status!r}")
        self.pushed(task)
        interval = task.get("pollIntervalMs" if self.stateless else "pollInterval")
        seconds = interval / 1000 if isinstance(interval, (int, float)) and not isinstance(interval, bool) else None
        seconds = DEFAULT_POLL if seconds is None else min(MAX_POLL, max(MIN_POLL, seconds))
        self._due = time.monotonic() + seconds

    def pushed(self, task: dict) -> None:
        """The task as the server said it, polled or pushed (notifications/tasks/status): reported to
        `on_status` when its status changed, or its message after REPORT_EVERY seconds."""
        status, message = task.get("status"), task.get("statusMessage")
        if status not in STATUSES:
            return
        with self._lock:
            if self.status in TERMINAL or (status == self.status and message == self._message):
                return
            moment = time.monotonic()
            if status == self.status and moment - self._reported < REPORT_EVERY:
                return  # the message alone changed, and was said a moment ago
            self.status, self._message, self._reported = status, message, moment
        if self.on_status is not None:
            self.on_status(self.tool, task)

    def poll(self) -> None:
        """Ask the server once where the task stands; take its outcome when it has one."""
        if self.ends is not None and time.monotonic() >= self.ends:
            return self._timed_out()
        task = self._request("tasks/get", {"taskId": self.task_id})
        if not isinstance(task, dict):
            raise ProtocolError(f"{self.client.name}: tasks/get returned {type(task).__name__}, not a task")
        self._seen(task)
        if self.stateless:
            self._stateless(task)
        elif self.status in ("completed", "failed", "input_required"):
            self._result()  # over, or waiting on an answer that comes while tasks/result waits
        elif self.status == "cancelled":
            self.failure = TaskFailed(f"{self.client.name}: the task for {self.tool} was cancelled by the server")

    def _stateless(self, task: dict) -> None:
        if self.status == "completed":
            result = task.get("result")
            if not isinstance(result, dict):
                raise ProtocolError(f"{self.client.name}: completed task {self.task_id} carries no result")
            self.outcome = result
        elif self.status == "failed":
            error = task.get("error")
            error = error if isinstance(error, dict) else {}
            code = error["code"] if isinstance(error.get("code"), int) else -32603
            message = error.get("message") if isinstance(error.get("message"), str) else "the task failed"
            self.failure = RpcError(code, f"{self.client.name}: the task for {self.tool} failed: {message}")
        elif self.status == "cancelled":
            self.failure = TaskFailed(f"{self.client.name}: the task for {self.tool} was cancelled by the server")
        elif self.status == "input_required":
            requests = task.get("inputRequests")
            if not isinstance(requests, dict):
                return  # asked with nothing to answer yet: poll again
            new = {key: request for key, request in requests.items() if key not in self._answered}
            if not new:
                return
            if len(self._answered) + len(new) > MAX_INPUT_ANSWERS:
                self.cancel("it asked for input too many times")
                self.failure = TaskFailed(
                    f"{self.client.name}: the task for {self.tool} asked for input more than {MAX_INPUT_ANSWERS} times"
                )
                return
            answers = {key: self.client._answer_input(key, request) for key, request in new.items()}
            self._answered.update(new)
            self._request("tasks/update", {"taskId": self.task_id, "inputResponses": answers})

    def _result(self) -> None:
        """tasks/result (2025-11-25): the outcome, waiting as long as the task may still run."""
        left = None if self.ends is None else max(0.0, self.ends - time.monotonic())
        try:
            result = self._request("tasks/result", {"taskId": self.task_id}, left)
        except RequestTimeout:
            return self._timed_out()
        except RpcError as exc:  # the error the call itself would have had
            self.failure = RpcError(exc.code, f"{self.client.name}: the task for {self.tool} failed: {exc.message}")
            return
        if not isinstance(result, dict):
            raise ProtocolError(f"{self.client.name}: tasks/result returned {type(result).__name__}, not a result")
        self.outcome = result

    def _timed_out(self) -> None:
        """Past `task_timeout`: cancelled on the server, and a timeout the model reads."""
        self.cancel(f"it ran past the task timeout ({self.task_timeout:g}s)")
        self.failure = RequestTimeout(
            f"{self.client.name}: the task for {self.tool} did not finish in {self.task_timeout:g}s "
            "(--task-timeout); it was cancelled"
        )

    def cancel(self, why: str) -> None:
        """tasks/cancel, waiting a little at most; what the server answers changes nothing here."""
        self.client.log(f"cancelling the task for {self.tool} ({self.task_id}): {why}")
        try:
            self._request("tasks/cancel", {"taskId": self.task_id}, CANCEL_TIMEOUT)
        except McpError as exc:
            self.client.log(f"tasks/cancel for {self.task_id}: {clip(str(exc), 300)}")

    def _request(self, method: str, params: dict, timeout: float | None = None) -> Any:
        return self.client._request(method, params, self.timeout if timeout is None else timeout)


def wait_all(tasks: list[RunningTask], stop: threading.Event | None = None) -> None:
    """Poll every task when it is due until each has an outcome or a failure (set on the task).

    Ctrl-C while waiting, or `stop` set (another thread's Ctrl-C), cancels every task still running and raises
    KeyboardInterrupt. A server that fails while a task is polled fails that task only."""
    stop = stop or threading.Event()
    try:
        while True:
            pending = [task for task in tasks if not task.done]
            if not pending:
                return
            if stop.is_set():
                raise KeyboardInterrupt
            task = min(pending, key=lambda t: t.due)
            delay = task.due - time.monotonic()
            if delay > 0 and stop.wait(delay):
                raise KeyboardInterrupt
            try:
                task.poll()
            except McpError as exc:
                task.failure = exc
    except KeyboardInterrupt:
        for task in tasks:
            if not task.done:
                task.cancel("interrupted")
                task.failure = TaskFailed(f"{task.client.name}: the task for {task.tool} was cancelled: interrupted")
        raise
