#!/usr/bin/env python3
"""Lab step: find the attention head that copies values out of the tool result, and draw it.

    python3 attention_peek.py                     # OOD weather episodes; heatmap in the terminal
    python3 attention_peek.py --split heldout --tool get_forecast --svg forecast.svg

The shipped transformer reads a few held-out transcripts whole (question, call,
the real tool result, answer) with its attention maps recorded. Each value the
answer must hold (a temperature, the conditions, ...) is copied from the tool
result character by character; for every head, the copy score is the attention
that the position writing each value character (the position just before it:
that is where the model decides what comes next) puts on that same character
in the tool result, averaged over the characters. Chance is one over the keys
in view. The head with the highest score is drawn for the first episode: one
row per answer character, as it is written, one column per character of the
tool result. By default the episodes are the OOD split's (values no training
transcript holds) and the one drawn has a negative three-digit temperature and a
made-up condition word, where a head that copies and a model that remembers part
ways. A legend under the map says what its glyphs and shades stand for. Needs
numpy (pip install -e '.[lab]' from the clone, or pip install numpy).
"""

from __future__ import annotations

import argparse
import os
import sys

from decodeloop.cli.options import EXIT_CONFIG  # exit statuses as decodeloop's own (docs/cli.md)
from decodeloop.cli.parser import SEED, Number
from decodeloop.formats.lab import ASSISTANT, SYSTEM, TOOL, USER
from decodeloop.ui.heatmap import GLYPHS, scale_legend, svg, terminal
from decodeloop.ui.style import use_color

# what the labels' own glyphs stand for, besides the heatmap's (GLYPHS)
LABEL_GLYPHS = (
    ("⁺", "a later byte of the character to its left (°F is °⁺F: a column per token)"),
    ("§", "a special token"),
)


def spans(episode, system: str, tokenizer):
    """Token ids of the transcript, the token positions of its result and its answer, and the copies:
    (position in the answer, position in the result) of every token of every value."""
    head = f"{SYSTEM}{system}{USER}{episode.user}{ASSISTANT}{episode.call}{TOOL}"
    ids = tokenizer.encode_markup(episode.markup(system))
    result_at = len(tokenizer.encode_markup(head))
    answer_at = result_at + len(tokenizer.encode(episode.result)) + 1  # after <|assistant|>
    copies = []
    for value in episode.values:
        if value in episode.result and value in episode.answer:
            source = result_at + len(tokenizer.encode(episode.result[: episode.result.index(value)]))
            target = answer_at + len(tokenizer.encode(episode.answer[: episode.answer.index(value)]))
            copies += [(target + i, source + i) for i in range(len(tokenizer.encode(value)))]
    return ids, range(result_at, answer_at - 1), range(answer_at, len(ids)), copies


def attention_rows(model, layer: int, query: int):
    """(first key position, weights [n_head, keys]) of one query position, from the recorded maps."""
    for pos0, lo, att in model.attention[layer]:
        if pos0 <= query < pos0 + att.shape[1]:
            return lo, att[:, query - pos0]
    raise KeyError(query)


def read(model, ids) -> None:
    """Run a whole transcript through a fresh cache, keeping every attention map."""
    model.reset()
    model.attention = []
    model.record_attention = True
    model.forward(ids)


def copy_scores(model, episodes, system: str, tokenizer):
    """Per head [layer, head]: the mean attention from the position writing a value character onto
    that character in the tool result; and chance, the mean of one over the keys in view."""
    from decodeloop.lab.transformer import np

    c = model.config
    totals, count, chance = np.zeros((c.n_layer, c.n_head)), 0, 0.0
    for episode in episodes:
        ids, _, _, copies = spans(episode, system, tokenizer)
        read(model, ids)
        for written, source in copies:
            query = written - 1  # the position that writes it
            for layer in range(c.n_layer):
                lo, weights = attention_rows(model, layer, query)  # [H, keys in view]
                totals[layer] += weights[:, source - lo] if source >= lo else 0.0
            count += 1
            chance += 1 / min(query + 1, c.window)
    return totals / max(count, 1), chance / max(count, 1)


def heatmap_rows(model, layer: int, head: int, episode, system: str, tokenizer):
    """Attention of one head: a row per answer character written, a column per result character."""
    ids, result, answer, _ = spans(episode, system, tokenizer)
    read(model, ids)
    text_at = _characters(tokenizer, ids)
    rows, row_labels = [], []
    for written in answer:
        lo, weights = attention_rows(model, layer, written - 1)
        rows.append([float(weights[head, k - lo]) if lo <= k < lo + weights.shape[1] else 0.0 for k in result])
        row_labels.append(text_at[written])
    return rows, row_labels, [text_at[k] for k in result]


def _characters(tokenizer, ids) -> list[str]:
    """The character each token starts; a multi-byte character's later bytes as '⁺' (so '°F' is
    labelled '°', '⁺', 'F': one column per token); specials as '§'."""
    out: list[str] = []
    i = 0
    while i < len(ids):
        if tokenizer.is_special(ids[i]):
            out.append("§")
            i += 1
            continue
        for n in (1, 2, 3, 4):
            ch = tokenizer.decode(ids[i : i + n])
            if "\ufffd" not in ch:
                break
        out += [ch] + ["⁺"] * (n - 1)
        i += n
    return out


def legend_lines() -> list[str]:
    """The glyph legend, a line each."""
    return [f"{glyph}  {meaning}" for glyph, meaning in (*GLYPHS, *LABEL_GLYPHS)]


def unusual_first(pool: list) -> list:
    """The pool with, first, an episode whose temperature is negative with three digits and whose conditions
    hold a made-up word (none of the real words unusual.py lists), when the pool has one."""
    from decodeloop.servers.unusual import MODIFIERS, OOD_WORDS, TRAIN_WORDS

    real = OOD_WORDS | set(MODIFIERS) | set(TRAIN_WORDS)

    def striking(e) -> bool:
        temperature, conditions = (e.values + ["", ""])[:2]
        return (
            temperature.startswith("-")
            and len(temperature) == len("-100°F")
            and e.tool == "get_weather"
            and any(w not in real for w in conditions.split())
        )

    return sorted(pool, key=lambda e: not striking(e))  # stable: the rest keep their order


EPISODES = Number("a whole number from 1 to 1,000", True, 1, 1000)  # each draws 40 from the split, to find its own


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention_peek.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tool",
        default="get_weather",
        choices=("get_weather", "get_forecast", "get_time_zone", "convert"),
        help="which kind of held-out episode (default: get_weather)",
    )
    parser.add_argument("--episodes", type=EPISODES, default=4, help="episodes to score heads on (default: 4)")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the held-out episodes (default: 0)")
    parser.add_argument(
        "--split",
        choices=("ood", "heldout"),
        default="ood",
        help="ood: the held-out questions answered by the servers' --ood values; heldout: "
        "the servers' own values (default: ood)",
    )
    parser.add_argument("--weights", default=None, metavar="PATH", help="transformer weights (.npz)")
    parser.add_argument(
        "--svg",
        default="attention.svg",
        metavar="PATH",
        help="also write the heatmap here (default: attention.svg; '' for none)",
    )
    args = parser.parse_args(argv)

    from decodeloop.errors import MissingDependency

    try:
        from decodeloop.lab.transformer import DEFAULT_WEIGHTS, TransformerModel
    except MissingDependency as e:
        print(f"attention_peek.py: {e}", file=sys.stderr)
        return EXIT_CONFIG
    from decodeloop.formats.lab import CharTokenizer
    from decodeloop.lab.corpus import episodes, system_prompt

    tokenizer, system = CharTokenizer(), system_prompt()
    try:
        model = TransformerModel.load(args.weights or DEFAULT_WEIGHTS)
    except (ValueError, OSError) as e:  # not weights, or no such file: one line, not a traceback
        print(f"attention_peek.py: error: --weights: {e}", file=sys.stderr)
        return EXIT_CONFIG
    pool = [e for e in episodes(args.seed, 40 * args.episodes, args.split) if e.tool == args.tool]
    chosen = unusual_first(pool)[: args.episodes]
    scores, chance = copy_scores(model, chosen, system, tokenizer)
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    print(
        f"copy score per head: attention from the position writing each value character onto that "
        f"character in the tool result, {len(chosen)} held-out {args.tool} episodes "
        f"({args.split} split); chance {chance:.3f}"
    )
    print("        " + "".join(f"head {h:<3}" for h in range(scores.shape[1])))
    for i, row in enumerate(scores):
        print(
            f"layer {i} " + "".join(f"{s:8.3f}" + ("*" if (i, h) == (layer, head) else " ") for h, s in enumerate(row))
        )
    episode = chosen[0]
    rows, row_labels, col_labels = heatmap_rows(model, layer, head, episode, system, tokenizer)
    title = (
        f"layer {layer} head {head}: copy score {scores[layer, head]:.3f} (chance {chance:.3f}); "
        f"rows: the answer as written, columns: the tool result"
    )
    print()
    print(f"question: {episode.user}")
    color = use_color(sys.stdout)
    print(terminal(rows, row_labels, col_labels, color, title), end="")
    print(scale_legend(rows, color), end="")
    print("\n".join(legend_lines()))
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg(rows, row_labels, col_labels, title, notes=legend_lines()))
        print(f"wrote {os.path.abspath(args.svg)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader went away (`| head`): quietly, with 141 (128 + SIGPIPE) as shells do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
