"""The package's layers: no module imports one from a layer above its own, checked over the source's AST.

The order below is the one place it is written (docs/architecture.md draws it). A module's layer is that of
the longest name in the table that it is, or is inside; lazy imports inside functions count too.
"""

from __future__ import annotations

import ast
import os

from conftest import ROOT

LAYERS = [  # lowest first: a module may import from its own layer and the ones below; folders and top-level modules
    ["decodeloop.__init__", "decodeloop.events", "decodeloop.errors", "decodeloop.utf8", "decodeloop.text"],  # leaves
    ["decodeloop.net"],  # the wire the MCP client and the remote engine share: SSE, HTTP pieces
    ["decodeloop.patterns"],  # character sets and regexes, read safely
    ["decodeloop.schema"],  # the validators, and schemas in words
    ["decodeloop.sampling"],  # the sampler, its numpy and torch paths, the logits processors
    ["decodeloop.mcp", "decodeloop.bfcl"],  # the MCP client; BFCL's data and checker
    ["decodeloop.formats"],  # tokenizers, chat formats, call syntaxes
    ["decodeloop.decode"],  # the model contract, engine, stops, context, the segment runner
    ["decodeloop.trust"],  # policy, provenance, markers, pins, tool budget
    ["decodeloop.constrain"],  # the call grammar and its processor
    ["decodeloop.tools"],  # dispatch, router, startup, config
    ["decodeloop.client_features"],  # answering the servers: sampling (a nested turn), elicitation (the user)
    ["decodeloop.servers"],  # bundled MCP servers
    ["decodeloop.harness", "decodeloop.turn"],  # the conversation: Harness, and a turn's steps
    ["decodeloop.lab", "decodeloop.models"],  # the lab's models and what runs them; the engines of real models
    ["decodeloop.registry"],  # a model spec to a bundle
    ["decodeloop.ui"],
    ["decodeloop.studio"],  # the live studio: a conversation driven from the browser
    ["decodeloop.cli", "decodeloop.__main__"],  # the commands and main()
]


def test_the_layers_name_folders_and_top_level_modules_only():
    named = [name for names in LAYERS for name in names]
    assert len(named) == len(set(named))
    for name in named:
        parts = name.split(".")
        assert len(parts) == 2, name  # decodeloop.X: a folder or a top-level module, never a module in a folder


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
    tree = ast.parse("from decodeloop.harness import Harness\nfrom decodeloop.text import invisible\n")
    found = list(imports(tree))
    assert found == [(1, "decodeloop.harness"), (2, "decodeloop.text.invisible")]
    assert layer("decodeloop.harness") > layer("decodeloop.decode.engine")
    assert layer("decodeloop.text.invisible") < layer("decodeloop.trust.policy")


def private_imports(module: str, tree: ast.AST):
    """(line, "module.name") for each `_private` name imported from another decodeloop module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "decodeloop":
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and node.module != module:
                    yield node.lineno, f"{node.module}.{alias.name}"


def test_no_module_imports_another_modules_private_name():
    found = []
    for module, path in modules():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found += [f"{module}:{line} imports {name}" for line, name in private_imports(module, tree)]
    assert found == []


def test_the_check_sees_a_private_import():
    tree = ast.parse("from decodeloop.formats.calls.compact import _Parser, CompactSyntax\n")
    assert list(private_imports("decodeloop.formats.calls.json", tree)) == [
        (1, "decodeloop.formats.calls.compact._Parser")
    ]
