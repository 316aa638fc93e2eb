"""The grammar of a valid tool call, for masking the tokens that cannot continue one (--constrain).

Layers, bottom up:

    patterns/     (a leaf of its own) charset.py, sets of characters as code point ranges,
                  and regex.py, a schema `pattern` as a DFA and `search`, re.search's
                  answer in linear time, which decodeloop/schema/ checks values with too
    machines.py   character machines: strings (length, pattern, enum), numbers within
                  bounds, JSON strings, objects, arrays, compact values and arguments,
                  the two call syntaxes after their openers; none ever leads into a dead end
    compile.py    tools and their inputSchema -> the machine of a whole call, and the
                  list of what it cannot express (`call_grammar`)
    bytes.py      a machine driven byte by byte over UTF-8, every state's allowed bytes
                  and successors memoized (`ByteGrammar`)

decodeloop/constrain/processor.py puts them behind the logits-processor hook and documents the
matcher interface a BPE engine (llguidance, later) would implement. Standard library only.

The package itself imports nothing: import the module you need
(`from decodeloop.constrain.grammar.compile import call_grammar`).
"""
