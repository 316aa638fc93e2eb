"""The package's layers: no module imports one from a layer above its own, checked over the source's AST.

The order below is the one place it is written (docs/architecture.md draws it). A module's layer is that of
the longest name in the table that it is, or is inside; lazy imports inside functions count too.
"""

from __future__ import annotations

import ast
import os

from conftest import ROOT

LAYERS = [  # lowest first: a module may import from its own layer and the ones below
    [
        "decodeloop.__init__",
        "decodeloop.events",
        "decodeloop.errors",
        "decodeloop.mcp.errors",
        "decodeloop.trust.invisible",
        "decodeloop.trust.untrusted",
        "decodeloop.trust.credentials",
        "decodeloop.utf8",
    ],  # shared leaves
    ["decodeloop.net"],  # the wire the MCP client and the remote engine share: SSE, HTTP pieces
    ["decodeloop.constrain.grammar.charset", "decodeloop.constrain.grammar.regex"],  # patterns, read safely
    ["decodeloop.schema.core"],  # what both validators read alike
    ["decodeloop.schema"],  # the validators, and schemas in words
    ["decodeloop.sampling"],  # the sampler, its numpy and torch paths, the logits processors
    ["decodeloop.mcp", "decodeloop.bfcl"],  # the MCP client; BFCL's data and checker
    ["decodeloop.client_features"],  # which client features a run offers, and who answers
    ["decodeloop.models.base", "decodeloop.formats"],  # tokenizers, chat formats, call syntaxes
    ["decodeloop.decode"],  # engine, stops, context
    ["decodeloop.trust"],  # policy, provenance, markers, pins, tool budget
    ["decodeloop.constrain"],  # the call grammar and its processor
    ["decodeloop.tools"],  # turn, dispatch, router, startup, config
    # answering the servers: sampling (a nested turn), elicitation (the user)
    [
        "decodeloop.client_features.sampling",
        "decodeloop.client_features.elicitation",
        "decodeloop.client_features.form",
    ],
    ["decodeloop.servers"],  # bundled MCP servers
    ["decodeloop.harness", "decodeloop.turn"],  # the conversation: Harness, and a turn's steps
    ["decodeloop.lab", "decodeloop.models", "decodeloop.bfcl.suite"],  # models and what runs them
    ["decodeloop.ui"],
    ["decodeloop.cli.parser"],  # the parsers and their help
    ["decodeloop.cli.options"],  # parsed options to a config, a bundle, servers, a harness
    ["decodeloop.cli.commands", "decodeloop.cli.auth"],  # the commands; auth's actions
    ["decodeloop.cli", "decodeloop.__main__"],  # main()
]


def layer(module: str) -> int | None:
    found = [
        (len(name), n)
        for n, names in enumerate(LAYERS)
        for name in names
        if module == name or module.startswith(name + ".")
    ]
    return max(found)[1] if found else None


def is_module(name: str) -> bool:
    path = os.path.join(ROOT, *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isdir(path)


def imports(tree: ast.AST):
    """(line, module) for every import of a decodeloop module; `from pkg import mod` names mod itself."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "decodeloop":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield node.lineno, sub if is_module(sub) else node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "decodeloop":
                    yield node.lineno, alias.name


def modules():
    for folder, _, files in os.walk(os.path.join(ROOT, "decodeloop")):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                if module.endswith(".__init__") and module != "decodeloop.__init__":
                    module = module[: -len(".__init__")]
                yield module, path


def test_every_module_has_a_layer():
    assert [m for m, _ in modules() if layer(m) is None] == []


def test_no_module_imports_from_a_layer_above_its_own():
    upward = []
    for module, path in modules():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for line, target in imports(tree):
            if target == "decodeloop":
                target = "decodeloop.__init__"
            if layer(target) is not None and layer(target) > layer(module):
                upward.append(f"{module}:{line} imports {target}")
    assert upward == []


def test_the_check_sees_an_upward_import():
    tree = ast.parse("from decodeloop.harness import Harness\nfrom decodeloop.trust import invisible\n")
    found = list(imports(tree))
    assert found == [(1, "decodeloop.harness"), (2, "decodeloop.trust.invisible")]
    assert layer("decodeloop.harness") > layer("decodeloop.decode.engine")
    assert layer("decodeloop.trust.invisible") < layer("decodeloop.trust.policy")
