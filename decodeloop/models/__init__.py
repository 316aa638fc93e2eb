"""The engines that run real models: Hugging Face transformers (hf.py), llama.cpp in this process
(llamacpp.py), an OpenAI-compatible server (openai/), the conversion cache of GGUF files (gguf_cache.py,
tokenizer_cache.py) and the fetcher of the models named in the docs (fetch.py). Each loader returns a
`ModelBundle` (decode/bundle.py); decodeloop/registry.py maps a model spec to its loader.
"""
