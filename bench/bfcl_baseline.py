#!/usr/bin/env python3
"""BFCL without decodeloop: what a user writes with plain transformers (or llama-cpp-python), scored by the
same checker.

For each entry of the chosen categories (the same entries `decodeloop eval --suite bfcl:...` runs):

    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True)
    out = model.generate(ids, max_new_tokens=N, do_sample=False)
    calls = every <tool_call>{"name": ..., "arguments": {...}}</tool_call> in the decoded text (a regex)

or, with `--engine llama-cpp` (a .gguf file as shipped, through llama-cpp-python, the engine a user of that
file picks):

    reply = llm.create_chat_completion(messages, tools=tools, max_tokens=N, temperature=0)
    calls = its `tool_calls`, and every <tool_call>...</tool_call> in its `content` (the same regex)

`tools` are the entry's functions in the OpenAI form (`{"type": "function", "function": {name,
description, parameters}}`), with the parameters converted to JSON Schema as the suite's server lists
them (decodeloop/bfcl/tools.py). A chat template that does not render tools (SmolLM2's does not) would
hide them from the model, so then the script does what such a user does: it writes the standard
Hermes system prompt (the tools as JSON lines inside <tools></tools>, and how to call) itself; the
first output line says which way the tools went. Nothing is generated after the first message: there
is no tool to run.

Scoring is the suite's: BFCL's own ast_checker (decodeloop.bfcl.checker) on the decoded calls, and the
same columns: accuracy, well-formed rate (calls that parsed as JSON, name a listed function and whose
arguments pass decodeloop.schema's check against its schema, over every `<tool_call>` opened), false
calls on irrelevance (any `<tool_call>` opened), seconds per entry (model.generate only). decodeloop
is used here for the data and the scoring, never for the prompt or the generation.

    HF_HUB_OFFLINE=1 python3 bench/bfcl_baseline.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --categories simple_python --entries 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import provenance

from decodeloop.bfcl import Wheel, load_entries, locate_wheel, parse_categories
from decodeloop.bfcl.checker import check, load_checker
from decodeloop.bfcl.tools import mcp_tools
from decodeloop.lab.bfcl_suite import EntryOutcome, summarize, table
from decodeloop.schema import ArgumentError, validate_arguments

CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
OPENER = "<tool_call>"
# the Hermes function-calling prompt, as NousResearch, Qwen and SmolLM2's model cards give it
HERMES = (
    "You are a function calling AI model. You are provided with function signatures within <tools></tools> "
    "XML tags. You may call one or more functions to assist with the user query. Don't make assumptions "
    "about what values to plug into functions.\n\n<tools>\n{tools}\n</tools>\n\nFor each function call, "
    "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def load(path: str, device: str, dtype: str | None):
    """(model, tokenizer) with transformers: a model directory, or a .gguf file through gguf_file=.

    A .gguf that decodeloop's `hf:` loader has de-quantized before is read from its conversion cache
    (models/gguf_cache.py: the same float32 weights as safetensors), which only saves the loading time;
    generation is transformers' own either way."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from decodeloop.models import gguf_cache

    path = os.path.expanduser(path)
    directory, gguf = (
        (os.path.dirname(os.path.abspath(path)), os.path.basename(path)) if path.endswith(".gguf") else (path, None)
    )
    converted = gguf_cache.lookup(gguf_cache.file_sha256(path)) if gguf else None
    if converted:
        directory, gguf = converted, None
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=gguf, local_files_only=True)
    torch_dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if device == "cuda" else torch.float32)
    model = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=gguf, local_files_only=True, dtype=torch_dtype, device_map=device
    )
    model.eval()
    return model, tokenizer


def openai_tools(entry) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["inputSchema"]},
        }
        for t in mcp_tools(entry.functions)
    ]


def prompt_ids(tokenizer, entry, tools: list[dict]) -> tuple[list[int], bool]:
    """The prompt's ids, and whether the model's template rendered the tools itself."""
    messages = [dict(m) for m in entry.messages]
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    if tools[0]["function"]["name"] in text:
        return tokenizer(text, add_special_tokens=False)["input_ids"], True
    described = HERMES.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = messages[0]["content"] + "\n\n" + described
    else:
        messages.insert(0, {"role": "system", "content": described})
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"], False


def parse_calls(text: str, schemas: dict[str, dict]) -> tuple[list[dict], int, int, bool]:
    """(decoded calls, calls attempted, well formed, every call decoded) from the generated text."""
    output, well_formed, decoded = [], 0, True
    attempted = text.count(OPENER)
    for body in CALL.findall(text):
        try:
            call = json.loads(body.strip())
        except ValueError:
            decoded = False
            continue
        name, arguments = (call.get("name"), call.get("arguments", {})) if isinstance(call, dict) else (None, None)
        if isinstance(arguments, str):  # some models write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        if not isinstance(name, str) or not isinstance(arguments, dict):
            decoded = False
            continue
        output.append({name: arguments})
        if name in schemas:
            try:
                validate_arguments(name, arguments, schemas[name])
                well_formed += 1
            except ArgumentError:
                pass
    if len(CALL.findall(text)) < attempted:  # an opener never closed (the token cap)
        decoded = False
    return output, attempted, well_formed, decoded


def generate_transformers(model, tokenizer, entry, tools, max_new_tokens: int, device: str):
    """(the first message's text, its tokens, seconds, whether the template rendered the tools)."""
    import torch

    ids, template_tools = prompt_ids(tokenizer, entry, tools)
    inputs = torch.tensor([ids], device=device)
    started = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
        )
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    new = out[0, len(ids) :].tolist()
    return tokenizer.decode(new, skip_special_tokens=False), len(new), seconds, template_tools


def generate_llama_cpp(llm, entry, tools, max_new_tokens: int):
    """As generate_transformers, through llama-cpp-python's create_chat_completion (the file's own template)."""
    started = time.perf_counter()
    reply = llm.create_chat_completion(
        [dict(m) for m in entry.messages], tools=tools, max_tokens=max_new_tokens, temperature=0.0
    )
    seconds = time.perf_counter() - started
    message = reply["choices"][0]["message"]
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:  # a chat handler that parsed calls itself
        function = call.get("function", {})
        body = json.dumps({"name": function.get("name"), "arguments": function.get("arguments")})
        text += f"<tool_call>{body}</tool_call>"
    return text, reply["usage"]["completion_tokens"], seconds, True


def run_entry(model, tokenizer, checker, entry, max_new_tokens: int, device: str, show: bool = False):
    tools = openai_tools(entry)
    if tokenizer is None:  # llama-cpp-python
        text, tokens, seconds, template_tools = generate_llama_cpp(model, entry, tools, max_new_tokens)
    else:
        text, tokens, seconds, template_tools = generate_transformers(
            model, tokenizer, entry, tools, max_new_tokens, device
        )
    if show:
        print(f"{entry.id} wrote: {text!r}", file=sys.stderr)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    output, attempted, well_formed, decoded = parse_calls(text, schemas)
    outcome = EntryOutcome(
        entry.id,
        entry.category,
        False,
        attempted,
        well_formed,
        output,
        tokens=tokens,
        seconds=seconds,
        stop="tool_call" if attempted else "eos",
    )
    if entry.category == "irrelevance":
        outcome.correct = attempted == 0
        outcome.error = "" if outcome.correct else "irrelevance_error:call_made"
    elif not decoded:
        outcome.error = "ast_decoder:decoder_failed"
    else:
        verdict = check(checker, entry, output)
        outcome.correct = bool(verdict.get("valid"))
        outcome.error = "" if outcome.correct else str(verdict.get("error_type"))
    return outcome, template_tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a .gguf file or a transformers model directory")
    parser.add_argument(
        "--categories", default="simple_python", help="comma-separated BFCL categories, or all (default: simple_python)"
    )
    parser.add_argument("--entries", type=int, default=None, help="the first N entries of each (default: all)")
    parser.add_argument("--max-new-tokens", type=int, default=400, help="as eval's --max-tokens (default: 400)")
    parser.add_argument(
        "--engine",
        default="transformers",
        choices=("transformers", "llama-cpp"),
        help="transformers generate (default), or llama-cpp-python's create_chat_completion on a .gguf",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--bfcl-wheel", default=None, help="the bfcl-eval wheel (default: as decodeloop eval)")
    parser.add_argument("--json", action="store_true", help="print one JSON summary")
    parser.add_argument("--show", action="store_true", help="print each entry's generated text on stderr")
    args = parser.parse_args()
    measured = provenance.record()
    if args.engine == "transformers":
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
    categories = parse_categories(args.categories)
    with Wheel(locate_wheel(args.bfcl_wheel)) as wheel:
        checker = load_checker(wheel)
        chosen = [(c, load_entries(wheel, c, args.entries)) for c in categories]
    if args.engine == "llama-cpp":
        from llama_cpp import Llama

        threads = args.threads or os.cpu_count()
        model, tokenizer = Llama(args.model, n_ctx=4096, n_threads=threads, verbose=False), None
    else:
        model, tokenizer = load(args.model, args.device, args.dtype)
    engine = "llama-cpp-python create_chat_completion" if tokenizer is None else "transformers generate"
    summaries, outcomes, template_tools = [], [], set()
    for category, entries in chosen:
        done = []
        for entry in entries:
            outcome, rendered = run_entry(model, tokenizer, checker, entry, args.max_new_tokens, args.device, args.show)
            template_tools.add(rendered)
            done.append(outcome)
            print(f"{entry.id}: {'right' if outcome.correct else outcome.error}", file=sys.stderr, flush=True)
        summaries.append(summarize(category, done))
        outcomes += done
    how = {frozenset({True}): "the chat template", frozenset({False}): "a Hermes system prompt"}.get(
        frozenset(template_tools), "mixed"
    )
    if args.json:
        from decodeloop.lab.bfcl_suite import summary_json

        print(
            json.dumps(
                summary_json(
                    summaries,
                    outcomes,
                    baseline=engine,
                    model=args.model,
                    tools_via=how,
                    max_new_tokens=args.max_new_tokens,
                    measured=measured,
                )
            )
        )
    else:
        print(provenance.header(measured))
        print(f"{args.model}, plain {engine} (greedy, {args.max_new_tokens} new tokens at most), tools through {how}")
        for line in table(summaries):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
