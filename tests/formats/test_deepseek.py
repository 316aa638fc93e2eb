"""DeepSeek's call formats (formats/calls/families/deepseek.py): V3's and V3.1's calls section, the DSML of
V3.2, V4 and V4.1; read through the parser and the loop's stop check, the errors a model is told, rendering."""

from __future__ import annotations

import pytest

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.formats import detect, get_format

TOOLS = {"get_weather": {"type": "object"}, "echo": {"type": "object"}}
B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CB, CE, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def v3_call(name: str, arguments: str) -> str:
    return f"{CB}function{SEP}{name}\n```json\n{arguments}\n```{CE}"


def v31_call(name: str, arguments: str) -> str:
    return f"{CB}{name}{SEP}{arguments}{CE}"


def dsml(body: str, block: str = "function_calls", gap: str = "") -> str:
    return f"\n\n<｜DSML｜{gap}{block}>\n{body}\n</｜DSML｜{gap}{block}>"


def invoke(name: str, *params: tuple[str, str, str], gap: str = "") -> str:
    lines = [f'<｜DSML｜{gap}parameter name="{k}" string="{s}">{v}</｜DSML｜{gap}parameter>' for k, s, v in params]
    return f'<｜DSML｜{gap}invoke name="{name}">\n' + "\n".join(lines) + f"\n</｜DSML｜{gap}invoke>"


def parse(format_name: str, text: str, **options):
    return parse_output(text, TOOLS, format=get_format(format_name), **options)


def only_error(format_name: str, text: str) -> ParseError:
    out = parse(format_name, text)
    assert out.tool_calls == [] and len(out.errors) == 1, out
    error = out.errors[0].error
    assert error is not None
    return error


# --- V3 and V3.1 ---------------------------------------------------------------------------------------------


def test_a_v3_call_through_parse_output():
    out = parse("deepseek-v3", "Let me look." + B + v3_call("get_weather", '{"city": "Paris", "days": 3}') + E)
    assert (out.content, out.tool_calls) == ("Let me look.", [Call("get_weather", {"city": "Paris", "days": 3})])


def test_parallel_calls_in_one_piece_each_variant():
    v3 = B + v3_call("get_weather", '{"city": "Paris"}') + "\n" + v3_call("echo", '{"text": "hi"}') + E
    v31 = B + v31_call("get_weather", '{"city": "Paris"}') + v31_call("echo", '{"text": "hi"}') + E
    for name, text in (("deepseek-v3", v3), ("deepseek-v31", v31)):
        out = parse(name, text)
        assert out.tool_calls == [Call("get_weather", {"city": "Paris"}), Call("echo", {"text": "hi"})], name
        assert out.content is None and out.errors == []


def test_markers_written_inside_a_json_string_are_the_strings_text():
    text = f'{{"text": "a {CE} b {E} c {CB}f{SEP}{{}} d"}}'
    out = parse("deepseek-v31", B + v31_call("echo", text) + E)
    assert out.tool_calls == [Call("echo", {"text": f"a {CE} b {E} c {CB}f{SEP}{{}} d"})]
    fenced = '{"text": "Reply as ```json\\n{}\\n``` please"}'
    assert parse("deepseek-v3", B + v3_call("echo", fenced) + E).tool_calls == [
        Call("echo", {"text": "Reply as ```json\n{}\n``` please"})
    ]


def test_a_string_left_open_ends_at_its_line_so_the_call_still_closes():
    out = parse("deepseek-v31", B + CB + 'get_weather<｜tool▁sep｜>{"city": "Paris\n}' + CE + E + "Done.")
    assert out.content == "Done." and "the arguments are not a JSON object" in str(out.errors[0].error)


def test_an_escaped_quote_keeps_the_string_open_past_a_marker():
    out = parse("deepseek-v31", B + v31_call("echo", f'{{"text": "a \\" {CE} b \\\\"}}') + E)
    assert out.tool_calls == [Call("echo", {"text": f'a " {CE} b \\'})]


def test_a_call_cut_off_by_the_token_cap_is_a_notice_and_no_call():
    out = parse(
        "deepseek-v31", B + v31_call("get_weather", '{"city": "Paris"}') + CB + 'echo<｜tool▁sep｜>{"te', truncated=True
    )
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"})]  # the first call was whole
    assert out.errors == [] and any("cut off a call to echo" in n for n in out.notices)


def test_a_message_that_ends_inside_a_call_is_an_error_that_says_so():
    error = only_error("deepseek-v31", B + CB + 'get_weather<｜tool▁sep｜>{"city": "Zür')
    assert "cut off before its <｜tool▁call▁end｜>" in str(error)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (f'{CB}function{SEP}get_weather\n{{"city": "Paris"}}{CE}', "are not in a ```json block"),
        (f"{CB}tool{SEP}get_weather\n```json\n{{}}\n```{CE}", 'a call\'s type is function, not "tool"'),
        (f"{CB}function get_weather{CE}", "no <｜tool▁sep｜> in the call"),
        (v3_call("get weather", "{}"), '"get weather" is not a tool\'s name'),
        (v3_call("get_weather", '{"city": "Paris"'), "the arguments are not a JSON object"),
        (v3_call("get_weather", "[1]"), "the arguments are not a JSON object"),
        ('function<｜tool▁sep｜>get_weather\n```json\n{"city": "Tokyo"}\n```', "the calls section holds no call"),
    ],
)
def test_v3_errors_tell_the_model_how_a_call_is_written(body, said):
    error = only_error("deepseek-v3", B + body + E)
    assert said in str(error)
    assert "a call is <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME" in str(error) or "tool's name" in str(error)


def test_the_column_of_an_error_points_into_the_call():
    text = B + v31_call("get_weather", '{"city": Paris}') + E
    error = only_error("deepseek-v31", text)
    assert text[error.column - 1 :].startswith("Paris")


def test_a_call_the_section_ends_before_its_own_end_is_an_error_and_the_text_after_it_content():
    out = parse("deepseek-v31", B + CB + 'get_weather<｜tool▁sep｜>{"city": "Rome"}' + E + " done")
    assert out.tool_calls == [] and out.content == "done"
    assert "end it with <｜tool▁call▁end｜> before <｜tool▁calls▁end｜>" in str(out.errors[0].error)


def test_an_empty_section_is_no_call_and_no_text():
    out = parse("deepseek-v3", "Nothing to call." + B + E)
    assert (out.content, out.calls) == ("Nothing to call.", [])


def test_reasoning_the_thinking_prompt_opened():
    out = parse(
        "deepseek-v31", "Paris, so.</think>" + B + v31_call("get_weather", '{"city": "Paris"}') + E, reasoning_open=True
    )
    assert (out.reasoning, out.content) == ("Paris, so.", None)
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"})]


# --- DSML -----------------------------------------------------------------------------------------------------


def test_a_dsml_call_keeps_raw_strings_and_reads_json_values():
    body = invoke(
        "echo",
        ("text", "true", '  if a < b:\n    print("x=\\"1\\"")\n'),
        ("count", "false", "42"),
        ("flags", "false", '{"a": [true, null, 1.5]}'),
        ("code", "true", "007"),
    )
    out = parse("deepseek-v32", "Checking." + dsml(body))
    assert out.content == "Checking."
    assert out.tool_calls == [
        Call(
            "echo",
            {
                "text": '  if a < b:\n    print("x=\\"1\\"")\n',
                "count": 42,
                "flags": {"a": [True, None, 1.5]},
                "code": "007",
            },
        )
    ]


@pytest.mark.parametrize(
    ("name", "block", "gap"),
    [("deepseek-v32", "function_calls", ""), ("deepseek-v4", "tool_calls", ""), ("deepseek-v41", "calls", " ")],
)
def test_parallel_invokes_in_one_piece_each_dsml_variant(name, block, gap):
    body = (
        invoke("get_weather", ("city", "true", "Zürich"), gap=gap)
        + "\n"
        + invoke("echo", ("text", "true", "hi"), gap=gap)
    )
    out = parse(name, dsml(body, block, gap))
    assert out.tool_calls == [Call("get_weather", {"city": "Zürich"}), Call("echo", {"text": "hi"})]
    assert out.content is None and out.errors == []


def test_dsml_markup_written_inside_a_value_is_the_values_text():
    value = 'Write <｜DSML｜invoke name="x"> inside <｜DSML｜function_calls>, then </｜DSML｜invoke>.'
    out = parse("deepseek-v32", dsml(invoke("echo", ("text", "true", value))))
    assert out.tool_calls == [Call("echo", {"text": value})]


def test_an_invoke_without_parameters_and_one_that_closes_itself():
    for body in ('<｜DSML｜invoke name="get_weather">\n\n</｜DSML｜invoke>', '<｜DSML｜invoke name="get_weather"/>'):
        assert parse("deepseek-v4", dsml(body, "tool_calls")).tool_calls == [Call("get_weather", {})]


def test_a_second_invoke_cut_off_keeps_the_first():
    text = dsml(invoke("get_weather", ("city", "true", "Paris")))[: -len("\n</｜DSML｜function_calls>")]
    out = parse("deepseek-v32", text + '\n<｜DSML｜invoke name="echo">\n<｜DSML｜parameter name="text"', truncated=True)
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"})]
    assert any("cut off a call" in n for n in out.notices)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            '<｜DSML｜invoke name="echo">\n<｜DSML｜parameter name="text">hi</｜DSML｜parameter>\n</｜DSML｜invoke>',
            'needs string="true"',
        ),
        (invoke("echo", ("n", "false", "three")), 'the value of "n" is not JSON'),
        (invoke("echo", ("n", "true", "1"), ("n", "true", "2")), 'the argument "n" is given twice'),
        ("<｜DSML｜invoke>\n</｜DSML｜invoke>", 'has no name="NAME"'),
        ('<｜DSML｜invoke name="echo">\nhello\n</｜DSML｜invoke>', 'unexpected text "hello" in the call to echo'),
        ('<｜DSML｜invoke name="echo">\n', "is not closed: end it with </｜DSML｜invoke>"),
        ("get_weather(city='Paris')", "block holds no call"),
    ],
)
def test_dsml_errors_tell_the_model_how_a_call_is_written(body, said):
    assert said in str(only_error("deepseek-v32", dsml(body)))


def test_dsml_tags_as_the_tokenizer_writes_them_text_around_the_one_special_token():
    """Only ｜DSML｜ is a special token: `<`, `invoke name=...>` and the rest are text, in pieces of their own."""
    parser = OutputParser(get_format("deepseek-v41"), TOOLS)
    token = parser.special_id("｜DSML｜")
    units = ["Checking.\n\n<", token, " calls>\n<", token, ' invoke name="get_weather">\n<', token]
    units += [
        ' parameter name="city" string="true">Paris</',
        token,
        " parameter>\n</",
        token,
        " invoke>\n</",
        token,
        " calls>",
    ]
    for unit in units:
        parser.feed_units([unit])
    out = parser.finish()
    assert (out.content, out.tool_calls, out.errors) == ("Checking.", [Call("get_weather", {"city": "Paris"})], [])


def test_the_loops_stop_check_runs_every_call_of_the_message_at_its_end():
    syntax = get_format("deepseek-v32")
    text = "Sure." + dsml(
        invoke("get_weather", ("city", "true", "Paris")) + "\n" + invoke("echo", ("text", "true", "a"))
    )
    stops = Stops(syntax, eos_ids=[0], settings=StopSettings(collect_calls=True, max_tokens=10_000))
    shown = ""
    for ch in text:
        verdict = stops.check(1, ch)
        assert verdict.reason is None
        shown += verdict.delta
    verdict = stops.check(0, "")
    assert verdict.reason == "tool_call" and shown.strip() == "Sure."
    assert [p.call for p in verdict.parsed] == [Call("get_weather", {"city": "Paris"}), Call("echo", {"text": "a"})]


# --- the syntaxes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v31", "deepseek-v32", "deepseek-v4", "deepseek-v41"])
def test_a_rendered_call_reads_back_as_itself(name):
    syntax = get_format(name)
    call = Call("echo", {"text": 'say "hi" & <b>\n', "n": -2.5, "ok": True, "none": None, "list": [1, {"a": "b"}]})
    written = syntax.render(call)
    assert parse_output(written, TOOLS, format=syntax).tool_calls == [call]
    assert syntax.parse(written.strip()) == call
    with pytest.raises(ValueError):
        syntax.render(Call("bad name", {}))


def test_parse_raises_the_error_of_a_call_that_does_not_read():
    with pytest.raises(ParseError, match="the arguments are not a JSON object"):
        get_format("deepseek-v31").parse(B + v31_call("echo", "{") + E)
    with pytest.raises(ParseError, match="a call starts with"):
        get_format("deepseek-v32").parse("echo")


def test_describe_names_the_tools_and_the_calls_markup():
    class Tool:
        name, description, input_schema = "get_weather", "The weather.", {"type": "object", "properties": {}}

    assert "<｜DSML｜ invoke" in get_format("deepseek-v41").describe([Tool()])
    assert "### get_weather\nDescription: The weather." in get_format("deepseek-v31").describe([Tool()])
    assert get_format("deepseek-v3").describe([]) == ""


def test_detect_names_each_variant_and_why():
    assert detect("", ["｜DSML｜"])[0] == "deepseek-v32"
    assert detect("{{ '<｜DSML｜tool_calls>' }}", ["｜DSML｜"])[0] == "deepseek-v4"
    assert detect("{{ '<｜DSML｜ calls>' }}", ["｜DSML｜"])[0] == "deepseek-v41"
    v3 = "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + name + '\\n```json\\n'}}"
    assert detect(v3, [B])[0] == "deepseek-v3"
    name, reason = detect("{{'<｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + arguments}}", [B, CB])
    assert name == "deepseek-v31" and "<｜tool▁calls▁begin｜>" in reason
