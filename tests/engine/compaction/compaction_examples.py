"""The digest's worked examples (compaction-engine.md §14) as entry lists."""

from __future__ import annotations

from compaction_builders import (
    assistant,
    bash_exec,
    call,
    custom_message,
    estimate_usage_assistant,
    link,
    text,
    thinking,
    tool_result,
    user,
)

EXAMPLE_TRACE = {
    "kind": "pi-fabric.execution",
    "version": 1,
    "outcome": "failed",
    "phases": ["Inspect", "Verify"],
    "operations": [
        {
            "type": "call",
            "sequence": 0,
            "ref": "pi.read",
            "provider": "pi",
            "action": "read",
            "args": {"path": "docs/a.md"},
            "outcome": "succeeded",
        },
        {
            "type": "call",
            "sequence": 1,
            "ref": "pi.write",
            "provider": "pi",
            "action": "write",
            "args": {"path": "docs/new.md", "content": "x"},
            "outcome": "succeeded",
            "result": {"created": True},
        },
        {
            "type": "call",
            "sequence": 2,
            "ref": "pi.bash",
            "provider": "pi",
            "action": "bash",
            "args": {"command": "pnpm test\n--run"},
            "outcome": "failed",
            "failureStage": "invoke",
            "error": "Call failed during invoke: exit 1",
        },
        {
            "type": "call",
            "sequence": 3,
            "ref": "agents.run",
            "provider": "agents",
            "action": "run",
            "args": {"name": "reviewer", "prompt": "look"},
            "outcome": "succeeded",
        },
    ],
    "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
    "error": "Execution failed",
}


def example1() -> list[dict]:
    return link(
        [
            user("Fix the login bug.\n\nKeep the public API stable."),
            assistant(text("Reading the auth module."), call("c1", "read", {"path": "src/auth/login.ts"})),
            tool_result("c1", "read", "export function login() {}"),
            assistant(call("c2", "read", {"path": "src/auth/missing.ts"})),
            tool_result("c2", "read", "ENOENT: no such file or directory\nat open", True),
            assistant(thinking("secret plan"), call("c3", "edit", {"path": "src/auth/login.ts", "edits": []})),
            tool_result("c3", "edit", "Applied 1 edit"),
            bash_exec("pnpm test", 1, "1 failed"),
            user("Now run the tests again"),
            assistant(text("Tests pass now.")),
        ]
    )


def example2() -> list[dict]:
    import copy

    return link(
        [
            user("Ship the release"),
            assistant(
                call(
                    "f1",
                    "fabric_exec",
                    {
                        "code": "\u2026",
                        "display": {"name": "Audit release", "description": "Check files and run tests"},
                    },
                )
            ),
            tool_result(
                "f1",
                "fabric_exec",
                "outer prose ignored",
                True,
                {"success": False, "trace": copy.deepcopy(EXAMPLE_TRACE)},
            ),
            custom_message(
                "pi-fabric-agent-complete", "Agent reviewer finished", False, {"id": "a1", "status": "completed"}
            ),
            user("Continue"),
        ]
    )


def example3() -> list[dict]:
    es = [user("Goal line")]
    for i in range(30):
        es += [
            assistant(call(f"w{i}", "write", {"path": f"/repo/src/gen/file-{i}.ts", "content": "x"})),
            tool_result(f"w{i}", "write", "ok"),
            user(f"Scope {i}"),
        ]
    return link(es)


def long_single_turn(n: int = 36, body: int = 12000) -> tuple[list[dict], int]:
    """The reference suite's longSingleTurn(): usage = round(6000 + 1.4 * raw so far)."""
    from fabric_lsp.engine.session import estimate_tokens

    es = [user("Inspect the repository and keep the goal")]
    raw = estimate_tokens(es[0]["message"])
    for i in range(n):
        a, raw = estimate_usage_assistant(raw, call(f"r{i}", "read", {"path": f"src/file-{i}.ts"}))
        es.append(a)
        tr = tool_result(f"r{i}", "read", "x" * body)
        raw += estimate_tokens(tr["message"])
        es.append(tr)
        a, raw = estimate_usage_assistant(raw, text(f"Read file {i}"))
        es.append(a)
    return link(es), round(6000 + 1.4 * raw)
