"""decodeloop: the harness around a language model that calls MCP tools.

The model maps tokens to next-token logits; everything else (sampling, stopping,
recognising and parsing tool calls, the MCP round trip, injecting the result and
resuming over the KV cache) lives in this package. Start reading at decode/loop.py.

The library in a few lines:

    from decodeloop import Harness, Sampler, load_config, load_model, start_servers

    bundle = load_model("hf:models/SmolLM2-135M-Instruct.Q4_1.gguf")
    with start_servers(load_config("servers.json")) as router:
        chat = Harness(bundle, Sampler(), router, emit=print)   # every event, as it happens
        print(chat.run("What's the weather in Polson, MT?").answer)
        print(chat.run("And in Boise, ID?").answer)            # the same conversation

The policy is the CLI's, `Policy("confirm", router.specs, None)`, unless `policy=` says otherwise;
`policy=Policy.off()` runs every call, and a notice says so.

Names are imported on first use, so `import decodeloop` stays cheap.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "Harness": "decodeloop.harness",
    "TurnConfig": "decodeloop.harness",
    "TurnResult": "decodeloop.harness",
    "Sampler": "decodeloop.sampling.sampler",
    "load_model": "decodeloop.registry",
    "ModelBundle": "decodeloop.decode.bundle",
    "start_servers": "decodeloop.tools.startup",
    "ClientOptions": "decodeloop.tools.startup",
    "Router": "decodeloop.tools.router",
    "load_config": "decodeloop.tools.config",
    "ServerSpec": "decodeloop.tools.config",
    "Policy": "decodeloop.trust.policy",
    "parse_output": "decodeloop.decode.parse",
    "OutputParser": "decodeloop.decode.parse",
    "get_format": "decodeloop.formats.calls.formats",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'decodeloop' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
