"""The BFCL suite against the real bfcl-eval wheel: its data, its checker, a real server process, real turns.

The wheel is downloaded once into the cache ($DECODELOOP_CACHE, else .cache/ in
the repository) with `pip download --no-deps` when it is not there yet
($DECODELOOP_BFCL_WHEEL names a copy to use instead). The end-to-end checks
drive the real `Harness` with the lab's table model scripted to write BFCL's
possible answers (or a wrong value) as `<tool_call>` blocks, against a server
process per entry, and check what BFCL's own checker makes of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT

from decodeloop.bfcl import BfclError, Wheel, load_entries, locate_wheel, parse_categories
from decodeloop.bfcl.checker import check, load_checker, reference_output
from decodeloop.bfcl.entries import CATEGORIES
from decodeloop.bfcl.tools import convert, input_schema, mcp_tools
from decodeloop.decode.bundle import ModelBundle
from decodeloop.formats.calls.compact import Call
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.lab import ASSISTANT, EOS, USER, CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.bfcl_suite import entry_server, run_entries, summarize, table
from decodeloop.lab.table import TableModel
from decodeloop.mcp import McpClient, StdioTransport
from decodeloop.sampling import Sampler
from decodeloop.schema import ArgumentError, validate_arguments
from decodeloop.servers import command

pytestmark = pytest.mark.slow
SIZES = {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240}


@pytest.fixture(scope="session")
def wheel_path():
    cache = os.path.join(os.environ.get("DECODELOOP_CACHE") or os.path.join(ROOT, ".cache", "decodeloop"), "bfcl")
    try:
        return locate_wheel(cache=cache)  # downloads it the first time
    except BfclError as e:
        pytest.fail(f"the BFCL wheel is needed: {e}")


@pytest.fixture(scope="session")
def wheel(wheel_path):
    with Wheel(wheel_path) as opened:
        yield opened


@pytest.fixture(scope="session")
def checker(wheel):
    return load_checker(wheel)


@pytest.fixture(scope="session")
def entries(wheel):
    return {category: load_entries(wheel, category) for category in CATEGORIES}


def by_id(entries, entry_id):
    category = entry_id.rpartition("_")[0]
    return next(e for e in entries[category] if e.id == entry_id)


# -- the data -------------------------------------------------------------------------------------------


def test_every_category_loads_with_its_possible_answers(entries):
    assert {c: len(e) for c, e in entries.items()} == SIZES
    for category, found in entries.items():
        assert [e.id for e in found] == [f"{category}_{i}" for i in range(SIZES[category])]
        for entry in found:
            assert entry.user and entry.system is None and entry.functions
            assert bool(entry.answer) == (category != "irrelevance")
    first = entries["simple_python"][0]
    assert first.user == "Find the area of a triangle with a base of 10 units and height of 5 units."
    assert first.answer == [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]


def test_a_limit_reads_the_first_entries(wheel):
    assert [e.id for e in load_entries(wheel, "parallel", 3)] == ["parallel_0", "parallel_1", "parallel_2"]


def test_categories_are_checked():
    assert parse_categories("simple_python, parallel") == ["simple_python", "parallel"]
    assert parse_categories("all") == list(CATEGORIES)
    with pytest.raises(BfclError, match="unknown BFCL category 'java'"):
        parse_categories("simple_python,java")


def _fake_wheel(tmp_path, data: dict[str, str]) -> Wheel:
    path = tmp_path / "fake.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in data.items():
            z.writestr(name, text)
    return Wheel(str(path))


GOOD = {
    "id": "simple_python_0",
    "question": [[{"role": "user", "content": "hi"}]],
    "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}],
}


@pytest.mark.parametrize(
    "line, answer, message",
    [
        ("{not json", None, "line 2 is not JSON"),
        (
            json.dumps({**GOOD, "id": "simple_python_1", "question": [[{"role": "assistant", "content": "x"}]]}),
            None,
            "line 2 (simple_python_1): a message is not",
        ),
        (json.dumps({**GOOD, "id": "simple_python_1", "function": []}), None, "function is not a non-empty list"),
        (json.dumps({**GOOD, "id": "simple_python_1"}), "", "has no possible answer for simple_python_1"),
        (
            json.dumps({**GOOD, "id": "simple_python_1"}),
            json.dumps({"id": "simple_python_1", "ground_truth": {"f": 1}}),
            "ground_truth is not a list",
        ),
    ],
)
def test_a_malformed_entry_or_answer_is_a_clear_error(tmp_path, line, answer, message):
    answers = json.dumps({"id": "simple_python_0", "ground_truth": [{"f": {}}]})
    if answer:
        answers += "\n" + answer
    fake = _fake_wheel(
        tmp_path,
        {
            "bfcl_eval/data/BFCL_v4_simple_python.json": json.dumps(GOOD) + "\n" + line,
            "bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json": answers,
        },
    )
    with pytest.raises(BfclError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_entries(fake, "simple_python")


def test_a_wheel_that_is_not_the_release_is_refused(tmp_path):
    other = tmp_path / "bfcl_eval-2026.3.23-py3-none-any.whl"
    other.write_bytes(b"PK not it")
    with pytest.raises(BfclError, match="is not the bfcl-eval 2026.3.23 wheel"):
        locate_wheel(str(other))
    with pytest.raises(BfclError, match="no BFCL wheel in"):
        locate_wheel(cache=str(tmp_path / "empty"), download=False)


# -- the schema conversion ------------------------------------------------------------------------------

BFCL_ONLY = {"dict", "float", "tuple", "any"}


def _schemas(schema):
    """Every schema in `schema`, itself included, through properties and items."""
    yield schema
    for sub in (schema.get("properties") or {}).values():
        yield from _schemas(sub)
    if isinstance(schema.get("items"), dict):
        yield from _schemas(schema["items"])


def test_every_function_of_the_five_categories_converts_to_json_schema(entries):
    converted = 0
    for found in entries.values():
        for entry in found:
            for tool in mcp_tools(entry.functions):
                schema = tool["inputSchema"]
                assert schema["type"] == "object"
                inner = list(_schemas(schema))
                assert not BFCL_ONLY & {s.get("type") for s in inner}, (entry.id, tool["name"])
                assert not any("optional" in s for s in inner), (entry.id, tool["name"])
                converted += 1
    assert converted == 1917


def test_each_alias_converts(entries):
    # float -> number, kept description; integer unchanged
    [tool] = mcp_tools(by_id(entries, "parallel_multiple_1").functions[:1])
    assert tool["name"] == "volume_cylinder.calculate"
    assert tool["inputSchema"] == {
        "type": "object",
        "required": ["radius", "height"],
        "properties": {
            "radius": {"type": "number", "description": "The radius of the cylinder."},
            "height": {"type": "number", "description": "The height of the cylinder."},
        },
    }
    # tuple -> array, its items' float -> number
    coord = mcp_tools(by_id(entries, "simple_python_83").functions)[0]["inputSchema"]["properties"]["coord1"]
    assert coord == {
        "type": "array",
        "description": "The first coordinate as (latitude, longitude).",
        "items": {"type": "number"},
    }
    # any -> no type constraint, the description kept
    data = mcp_tools(by_id(entries, "simple_python_109").functions)[0]["inputSchema"]["properties"]["data"]
    assert data == {"description": "The training data for the model."}
    # a nested dict with properties, required and an enum, inside an array
    conditions = mcp_tools(by_id(entries, "simple_python_96").functions)[0]["inputSchema"]["properties"]["conditions"]
    assert conditions["type"] == "array"
    assert conditions["items"]["type"] == "object"
    assert conditions["items"]["required"] == ["field", "operation", "value"]
    assert conditions["items"]["properties"]["operation"] == {
        "type": "string",
        "description": "The operation to be performed.",
        "enum": ["<", ">", "=", ">=", "<="],
    }
    # BFCL's own "optional" marker is dropped, JSON Schema's default and format kept
    props = mcp_tools(by_id(entries, "multiple_5").functions)
    date = next(t for t in props if t["name"] == "weather.get_by_city_date")["inputSchema"]["properties"]["date"]
    assert date["format"] == "date" and date["type"] == "string"
    lawsuit = mcp_tools(by_id(entries, "simple_python_182").functions)[0]["inputSchema"]["properties"]
    assert "optional" not in lawsuit["year"] and lawsuit["year"]["type"] == "integer"
    # a stray "optional" at the top of parameters is not carried into the inputSchema
    top = mcp_tools(by_id(entries, "simple_python_128").functions)[0]["inputSchema"]
    assert set(top) == {"type", "properties", "required"}


def test_the_entry_is_left_as_it_was(entries):
    entry = by_id(entries, "simple_python_96")
    before = json.dumps(entry.functions)
    mcp_tools(entry.functions)
    assert json.dumps(entry.functions) == before


def test_an_unknown_type_is_a_clear_error():
    with pytest.raises(BfclError, match=r"f\.x: unknown BFCL type 'HashMap'"):
        input_schema({"type": "dict", "properties": {"x": {"type": "HashMap"}}}, "f")
    with pytest.raises(BfclError, match="parameters must be of type dict"):
        input_schema({"type": "string"})
    assert convert({"type": "dict", "properties": {"a": {"type": "tuple", "items": {"type": "any"}}}}) == {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {}}},
    }


def test_possible_answers_fit_the_converted_schemas(entries):
    # the harness validates calls against the converted schemas: a right answer must pass, apart from
    # the few possible answers that break their own function's declared types
    misfits = []
    for category in CATEGORIES[:4]:
        for entry in entries[category]:
            tools = {t["name"]: t["inputSchema"] for t in mcp_tools(entry.functions)}
            for call in reference_output(entry):
                [(name, arguments)] = call.items()
                try:
                    assert validate_arguments(name, arguments, tools[name]) == arguments
                except ArgumentError:
                    misfits.append(entry.id)
    assert sorted(set(misfits)) == ["parallel_152", "parallel_multiple_21", "parallel_multiple_94", "simple_python_307"]


# -- the checker ------------------------------------------------------------------------------------------


def test_the_checker_loads_without_the_packages_dependencies(wheel_path):
    code = (
        "import sys; from decodeloop.bfcl import Wheel; from decodeloop.bfcl.checker import load_checker; "
        f"c = load_checker(Wheel({wheel_path!r})); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'openai', 'anthropic', 'torch', "
        "'transformers', 'tqdm', 'requests', 'pydantic'}); "
        "print(c.__name__, c.__spec__.origin, heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "bfcl_eval.eval_checker.ast_eval.ast_checker",
        "bfcl_eval/eval_checker/ast_eval/ast_checker.py",
        "[]",
    ]


def test_the_checker_accepts_every_possible_answer(entries, checker):
    for found in entries.values():
        for entry in found:
            verdict = check(checker, entry, reference_output(entry))
            assert verdict["valid"], (entry.id, verdict)


def test_the_checker_rejects_wrong_outputs(entries, checker):
    entry = by_id(entries, "simple_python_1")  # math.factorial(number=5)
    assert check(checker, entry, [{"math.factorial": {"number": 5}}])["valid"]
    assert check(checker, entry, [{"math.factorial": {"number": 5.0}}])["error_type"] == "type_error:simple"
    assert check(checker, entry, [{"math.factorial": {"number": 6}}])["error_type"] == "value_error:others"
    # the name is compared as the model wrote it: no dot-to-underscore rewriting
    assert (
        check(checker, entry, [{"math_factorial": {"number": 5}}])["error_type"]
        == "simple_function_checker:wrong_func_name"
    )
    assert check(checker, entry, [])["error_type"] == "simple_function_checker:wrong_count"
    assert (
        check(checker, entry, [{"math.factorial": {"number": 5, "extra": 1}}])["error_type"]
        == "simple_function_checker:unexpected_param"
    )
    triangle = by_id(entries, "simple_python_0")
    # strings compare without case and punctuation; an optional argument may be left out
    assert check(checker, triangle, [{"calculate_triangle_area": {"base": 10, "height": 5, "unit": "Units"}}])["valid"]
    assert check(checker, triangle, [{"calculate_triangle_area": {"base": 10, "height": 5}}])["valid"]
    assert not check(checker, triangle, [{"calculate_triangle_area": {"base": 10}}])["valid"]
    # parallel: any order, every call once
    parallel = by_id(entries, "parallel_0")
    right = reference_output(parallel)
    assert len(right) > 1
    assert check(checker, parallel, list(reversed(right)))["valid"]
    assert not check(checker, parallel, right[:1])["valid"]
    assert not check(checker, parallel, right + right[:1])["valid"]
    # irrelevance: right when there is no call
    irrelevant = entries["irrelevance"][0]
    assert check(checker, irrelevant, [])["valid"]
    assert not check(checker, irrelevant, [{irrelevant.functions[0]["name"]: {}}])["valid"]


# -- the server, as a real process ------------------------------------------------------------------------


def _client(args):
    return McpClient(StdioTransport([*command("bfcl"), *args], cwd=ROOT, close_timeout=2.0), name="bfcl", timeout=20)


def test_the_server_lists_an_entrys_functions_and_answers_calls(entries, tmp_path):
    entry = by_id(entries, "parallel_multiple_0")
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps(mcp_tools(entry.functions)))
    with _client([str(tools_file)]) as client:
        listed = client.list_tools()
        assert [t.name for t in listed] == ["math_toolkit.sum_of_multiples", "math_toolkit.product_of_primes"]
        assert listed[0].input_schema["properties"]["multiples"] == {
            "type": "array",
            "items": {"type": "integer"},
            "description": "The numbers to find multiples of.",
        }
        result = client.call_tool("math_toolkit.product_of_primes", {"count": 5})
        assert not result.is_error
        assert json.loads(result.text()) == {
            "status": "ok",
            "function": "math_toolkit.product_of_primes",
            "arguments": {"count": 5},
        }
        wrong = client.call_tool("math_toolkit.product_of_primes", {"count": "five"})
        assert wrong.is_error and "count" in wrong.text()


def test_the_server_serves_an_entry_by_id_from_the_wheel(wheel_path):
    with _client(["--entry", "simple_python_1", "--wheel", wheel_path]) as client:
        [tool] = client.list_tools()
        assert tool.name == "math.factorial"
        assert tool.input_schema["properties"]["number"]["type"] == "integer"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--entry", "java_3"], "is not an entry id"),
        (["/nonexistent/tools.json"], "cannot read tools from /nonexistent/tools.json"),
    ],
)
def test_the_server_refuses_bad_input_in_one_line(args, message):
    done = subprocess.run(
        [*command("bfcl"), *args], capture_output=True, text=True, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr


# -- end to end: real turns, real servers, BFCL's checker ---------------------------------------------------


def scripted_bundle(script: dict[str, str]) -> ModelBundle:
    """The table model over the lab tokenizer and chat, writing JSON calls: for each user message, its text."""
    tokenizer = CharTokenizer()
    syntax = JsonSyntax()
    table = {f"{USER}{user}{ASSISTANT}": text + EOS for user, text in script.items()}
    return ModelBundle("scripted", tokenizer, LabChat(tokenizer, syntax), syntax, model=TableModel(tokenizer, table))


def calls_text(output: list[dict]) -> str:
    syntax = JsonSyntax()
    return "\n".join(syntax.render(Call(name, arguments)) for call in output for name, arguments in call.items())


def run(bundle, chosen, checker, events=None, max_tokens=3000, call_shapes=None):
    def make_harness(router, emit, system):
        def both(event):
            if events is not None:
                events.append(event)
            emit(event)

        return Harness(
            bundle,
            Sampler(),
            router,
            both,
            system=system,
            config=TurnConfig(max_tokens=max_tokens, collect_calls=True, call_shapes=call_shapes),
        )

    return run_entries(chosen, checker, make_harness, syntax=bundle.syntax)


def pick(entries, per_category=3):
    chosen = [e for c in CATEGORIES[:4] for e in entries[c][:per_category]]
    assert len({e.user for e in chosen}) == len(chosen)  # the table keys on the question
    return chosen


def test_right_calls_score_right_through_the_harness(entries, checker):
    chosen = pick(entries)
    bundle = scripted_bundle({e.user: calls_text(reference_output(e)) for e in chosen})
    events: list = []
    outcomes = run(bundle, chosen, checker, events)
    assert [(o.id, o.correct, o.error) for o in outcomes] == [(e.id, True, "") for e in chosen]
    assert all(o.calls == o.well_formed == len(e.answer) for o, e in zip(outcomes, chosen))
    assert all(o.stop == "tool_call" for o in outcomes)
    # the dotted name went through the router and the server unchanged
    factorial = next(o for o in outcomes if o.id == "simple_python_1")
    assert factorial.output == [{"math.factorial": {"number": 5}}]
    # each call got the server's real answer (it echoes the call it received) before the turn was stopped
    results = [json.loads(e.text) for e in events if e.kind == "tool_result"]
    assert len(results) == sum(len(e.answer) for e in chosen)
    assert all(r["status"] == "ok" for r in results)
    assert {"status": "ok", "function": "math.factorial", "arguments": {"number": 5}} in results
    assert not [e for e in events if e.kind == "done"]  # nothing generated after the first message's results
    summary = summarize("simple_python", outcomes[:3])
    assert (summary.accuracy, summary.well_formed_rate) == (1.0, 1.0)


def test_a_wrong_argument_scores_wrong(entries, checker):
    chosen = pick(entries, 2)
    wrong = {}
    for entry in chosen:
        output = reference_output(entry)
        [(name, arguments)] = output[0].items()
        key = next(k for k, v in arguments.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        output[0] = {name: {**arguments, key: arguments[key] + 1}}
        wrong[entry.user] = calls_text(output)
    outcomes = run(scripted_bundle(wrong), chosen, checker)
    assert [(o.id, o.correct) for o in outcomes] == [(e.id, False) for e in chosen]
    assert all(o.calls == o.well_formed > 0 for o in outcomes)  # well formed, but wrong
    assert {o.error for o in outcomes} <= {
        "value_error:others",
        "parallel_function_checker_no_order:cannot_find_match",
        "type_error:simple",
    }


def test_malformed_unknown_and_invalid_calls(entries, checker):
    entry = by_id(entries, "simple_python_1")
    cases = {
        '<tool_call>\n{"name": "math.factorial", "arguments": {"number": 5}\n</tool_call>': (False, 1, 0),
        '<tool_call>\n{"name": "math_factorial", "arguments": {"number": 5}}\n</tool_call>': (False, 1, 0),
        '<tool_call>\n{"name": "math.factorial", "arguments": {"number": "five"}}\n</tool_call>': (False, 1, 0),
        '<tool_call>\n{"name": "math.factorial", "arguments": {"number": 5': (False, 1, 0),  # ends unclosed
        "The factorial of 5 is 120.": (False, 0, 0),
    }
    for text, (correct, calls, well_formed) in cases.items():
        [outcome] = run(scripted_bundle({entry.user: text}), [entry], checker)
        assert (outcome.correct, outcome.calls, outcome.well_formed) == (correct, calls, well_formed), text
    # the unknown name reaches the checker as written, and fails there
    [outcome] = run(scripted_bundle({entry.user: list(cases)[1]}), [entry], checker)
    assert outcome.output == [{"math_factorial": {"number": 5}}]
    assert outcome.error == "simple_function_checker:wrong_func_name"
    # a call the token cap cuts is attempted, and the entry is wrong
    right = '<tool_call>\n{"name": "math.factorial", "arguments": {"number": 5}}\n</tool_call>'
    [outcome] = run(scripted_bundle({entry.user: right}), [entry], checker, max_tokens=30)
    assert (outcome.correct, outcome.calls, outcome.well_formed, outcome.stop, outcome.error) == (
        False,
        1,
        0,
        "max_tokens",
        "ast_decoder:cut_by_token_cap",
    )


def test_calls_in_an_alternate_shape_are_scored_in_that_shape(entries, checker):
    entry = by_id(entries, "simple_python_1")
    # a right call, and one that does not validate: the latter still reaches the checker, read in its shape
    for number, correct, well_formed, error in ((5, True, 1, ""), ("five", False, 0, "type_error:simple")):
        fenced = f'```json\n{{"name": "math.factorial", "arguments": {{"number": {json.dumps(number)}}}}}\n```'
        [outcome] = run(scripted_bundle({entry.user: fenced}), [entry], checker, call_shapes="lenient")
        assert (outcome.correct, outcome.calls, outcome.well_formed, outcome.error) == (correct, 1, well_formed, error)
        assert outcome.near_misses == 0  # a block read as a call is no near miss
        assert outcome.output == [{"math.factorial": {"number": number}}]


def test_a_call_shaped_block_to_a_function_that_does_not_exist_is_text_and_counted_apart(entries, checker):
    entry = entries["irrelevance"][0]
    fenced = '```json\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n```'
    [outcome] = run(scripted_bundle({entry.user: fenced}), [entry], checker, call_shapes="lenient")
    assert (outcome.correct, outcome.calls, outcome.near_misses) == (True, 0, 1)
    summary = summarize("irrelevance", [outcome])
    assert (summary.false_calls, summary.near_misses) == (0, 1)
    assert table([summary])[1].split()[5:7] == ["0/1", "1/1"]


def test_irrelevance_is_right_without_a_call_and_a_call_is_a_false_call(entries, checker):
    chosen = entries["irrelevance"][:2]
    first, second = chosen
    name = first.functions[0]["name"]
    script = {
        first.user: "I cannot answer that with these tools.",
        second.user: calls_text([{second.functions[0]["name"]: {}}]),
    }
    outcomes = run(scripted_bundle(script), chosen, checker)
    assert [(o.correct, o.calls) for o in outcomes] == [(True, 0), (False, 1)]
    summary = summarize("irrelevance", outcomes)
    assert (summary.accuracy, summary.false_calls) == (0.5, 1)
    assert name  # the tools were listed from the entry's functions
    lines = table([summary])
    assert lines[0].split() == [
        "category",
        "entries",
        "accuracy",
        "well-formed",
        "false",
        "calls",
        "call-like",
        "text",
        "s/entry",
    ]
    assert lines[1].split()[:5] == ["irrelevance", "2", "50.0%", "(1)", "0.0%"]


def test_a_server_started_per_entry_routes_the_entrys_tools(entries, tmp_path):
    entry = by_id(entries, "multiple_0")
    with entry_server(entry, str(tmp_path)) as router:
        assert sorted(router.tools) == sorted(f["name"] for f in entry.functions)


# -- the command line ---------------------------------------------------------------------------------------


def _eval(*args, wheel_path=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if wheel_path:
        env["DECODELOOP_BFCL_WHEEL"] = wheel_path
    return subprocess.run(
        [sys.executable, "-m", "decodeloop", "eval", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def test_eval_suite_json_summary(wheel_path):
    done = _eval(
        "--suite",
        "bfcl:simple_python,irrelevance",
        "--model",
        "table",
        "--entries",
        "2",
        "--json",
        wheel_path=wheel_path,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["suite"] == "bfcl" and summary["model"] == "table"
    assert list(summary["categories"]) == ["simple_python", "irrelevance"]
    # the table model knows one conversation about the weather: it answers every question with text
    assert summary["categories"]["simple_python"]["accuracy"] == 0.0
    assert summary["categories"]["irrelevance"]["accuracy"] == 1.0
    assert summary["categories"]["irrelevance"]["false_calls"] == 0
    assert [e["id"] for e in summary["entries"]] == [
        "simple_python_0",
        "simple_python_1",
        "irrelevance_0",
        "irrelevance_1",
    ]


def test_eval_suite_table(wheel_path):
    done = _eval("--suite", "bfcl:irrelevance", "--model", "table", "--entries", "1", wheel_path=wheel_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "table, BFCL irrelevance (first 1 entries each), temperature 0"
    assert lines[1].split() == [
        "category",
        "entries",
        "accuracy",
        "well-formed",
        "false",
        "calls",
        "call-like",
        "text",
        "s/entry",
    ]
    assert lines[2].split()[:7] == ["irrelevance", "1", "100.0%", "(1)", "-", "0/1", "0/1"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--suite", "bfcl:java"], "unknown BFCL category 'java'"),
        (["--suite", "other:simple_python"], "unknown suite"),
        (["--suite", "bfcl:irrelevance", "--entries", "0"], "argument --entries: expected a whole number from 1"),
        (["--suite", "bfcl:irrelevance", "--concurrency", "2"], "do not apply"),
        (["--entries", "3"], "apply to --suite"),
    ],
)
def test_eval_suite_usage_errors(args, message):
    done = _eval(*args, "--model", "table")
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_eval_suite_with_a_wheel_that_is_not_there_is_one_line():
    done = _eval("--suite", "bfcl:irrelevance", "--model", "table", "--bfcl-wheel", "/nonexistent.whl")
    assert done.returncode == 1
    assert done.stderr.strip() == "decodeloop: bfcl: no BFCL wheel at '/nonexistent.whl'"
