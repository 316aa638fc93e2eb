"""Training the lab transformer from scratch: data, Adam, the loop, the weight file.

Owns turning corpus episodes into batches (a shared prefix, padded suffixes,
loss weights on the assistant's tokens only), the optimiser and its schedule,
and `train`, which `decodeloop train transformer` runs. The gradients come from
backprop.py. The same seed gives the same weights on the same machine.

Loss weights: every token the assistant writes is weighted, from after each
<|assistant|> up to and including the special token that ends its part (the
<|tool|> after a call, which the harness writes at inference, and the <|eos|>
after the answer). Nothing in the system prompt, the question or the tool
result is weighted: the model learns to write calls and answers, not questions.
A call's tokens weigh `call_weight` (3) times an answer's: a call is short and
nearly all copying (a name from the question, letter by letter), and one wrong
letter makes it a call about another place. In an answer, the characters copied from the
tool result (each value, its digits, sign and unit, every word of a condition) weigh
`value_weight` (2) times the rest.

Values: `varied` of the transcripts (0.5 by default, the shipped weights' recipe) hold values
from the training side of decodeloop/servers/unusual.py instead of the servers' own:
temperatures below zero and of three digits, one-digit humidity, made-up and multi-word
conditions, directions of one to three letters, made-up time zones, conversions to other
precisions. Only the characters in the result can tell the model what to write then, so it
learns to copy them; the OOD split draws from the other side of the same partition, values
no transcript here holds.

Stops: where a copy ends is the decision it gets wrong most (the token after a value, and
in a forecast, which quotes the result line by line, whether to go on to the next day or
end). Those positions weigh `stop_weight` (3) times more (stop_positions); `repeats` (0.5)
of the forecasts have two days' conditions made alike (repeated_conditions), so that the
line a copy is on, not the words before its end, decides; and `forecasts` (0.3) of the
transcripts are forecasts, the longest copies, against one in five in eval.

With varied=0, value_weight=1, stop_weight=1, repeats=0, forecasts=None, 3200 steps (and a
lookback of 4 in the model's Config) this is the earlier weights' recipe, which copies the
servers' own values and not others.

The weights saved are an exponential moving average of the trained weights
(`ema`, over roughly the last 500 steps), which decodes more reliably than the
last step's weights, which carry the noise of the last few batches.
"""

from __future__ import annotations

import math
import os
import random
import re
import string
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace

from decodeloop.formats.calls.compact import Call, CompactSyntax
from decodeloop.formats.lab import ASSISTANT, SYSTEM, TOOL, USER, CharTokenizer
from decodeloop.lab.corpus import HELDOUT_STATES
from decodeloop.lab.train.backprop import loss_and_grads
from decodeloop.lab.train.places import CITIES
from decodeloop.lab.transformer import DEFAULT_WEIGHTS, NO_PREVIOUS, Config, init_params, np, save_weights

LETTERS = string.ascii_lowercase
SYLLABLES = (
    "an",
    "ar",
    "el",
    "en",
    "er",
    "et",
    "ette",
    "ton",
    "ville",
    "ber",
    "burg",
    "ra",
    "la",
    "le",
    "lo",
    "ma",
    "mo",
    "na",
    "no",
    "ri",
    "ro",
    "sa",
    "se",
    "ta",
    "te",
    "ll",
    "ee",
    "oo",
    "port",
    "field",
    "wood",
    "dale",
    "ford",
    "ham",
    "ing",
    "ey",
    "ia",
    "que",
    "qu",
    "al",
)
REAL_CITIES = frozenset(city for city, _ in CITIES)
# words per made-up name, and how often: names of two and three words are where copying goes
# wrong (the quotes a call needs, a space that looks like the end of the name), so they are
# more common here than among real cities
WORDS_PER_NAME = ((1, 2, 3), (50, 40, 10))
# last words of training cities' names (Iowa City, Great Falls): a made-up name ends with one of
# them a quarter of the time, so a made-up first word before a familiar one is quoted as a whole
PLACE_WORDS = ("City", "Falls", "Beach", "Rapids", "Island", "Bay", "Rock", "Green", "Haven")
# share of one-word names that are long (10 to 16 letters): without them a long name nearly
# always has a space, and a model learns to quote a long one-word name (city=Charlottesville")
LONG_WORD = 0.25
MADE_UP_STATES = sorted(
    a + b for a in string.ascii_uppercase for b in string.ascii_uppercase if a + b not in HELDOUT_STATES
)


MAX_TRANSCRIPTS = 1_000_000  # steps * batch_size: the corpus and its encoding are held at once (gigabytes here)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2800
    batch_size: int = 16
    lr: float = 6e-3
    warmup: int = 50
    min_lr_ratio: float = 0.1  # cosine decay ends at this fraction of lr
    betas: tuple = (0.9, 0.98)
    clip: float = 1.0  # global gradient norm
    seed: int = 0
    sort_pool: int = 32  # batches drawn together and sorted by length, to cut padding
    made_up: float = 0.5  # share of episodes moved to a made-up place (see made_up_place)
    parts: int = 2  # each step's rows are cut into this many parts, their gradients
    # summed in order: fixed, so the thread count never changes the weights
    threads: int = 2  # threads running the parts
    ema: float = 0.998  # the weights saved are this moving average of the weights trained
    call_weight: float = 3.0  # loss weight of a call's tokens, relative to an answer's
    value_weight: float = 2.0  # loss weight of an answer's tokens copied from the result
    varied: float = 0.5  # share of transcripts holding training's unusual values
    stop_weight: float = 3.0  # loss weight of where a copy stops (stop_positions)
    repeats: float = 0.5  # share of forecasts given two days alike (repeated_conditions)
    bounds_weight: float = 1.0  # loss weight of where the call's values start and end (value_bounds)
    forecasts: float | None = 0.3  # share of forecasts among the transcripts (None: one in five, as in eval)


@dataclass
class Batches:
    """Transcripts as the trainer sees them: one shared prefix, then each transcript's own tokens."""

    prefix: np.ndarray  # [P] tokens every transcript starts with (cropped to what matters)
    before: list  # the config.lookback tokens before the cropped prefix
    suffixes: list  # per transcript: (inputs [T], targets [T], weights [T])


def made_up_place(episode, rng: random.Random):
    """The same episode about a made-up place: a random city name and state code wherever
    the episode names its place (question, call, result, answer).

    The corpus has a few hundred real cities; a model can memorise those instead of
    copying them, and then fails on every held-out city. A name never seen before
    can only be copied. Held-out state codes and real city names are never drawn.
    """
    if "city" not in episode.arguments:
        return episode
    city, state = episode.arguments["city"], episode.arguments["state"]
    words = [_made_up_word(rng) for _ in range(rng.choices(*WORDS_PER_NAME)[0])]
    if len(words) == 1 and rng.random() < LONG_WORD:
        words = [_made_up_word(rng, long=True)]
    if len(words) > 1 and rng.random() < 0.2:
        words[0] = rng.choice(("St.", "Fort", "New", "Lake", "Port"))
    if len(words) > 1 and rng.random() < 0.25:
        words[-1] = rng.choice(PLACE_WORDS)
    new_city = " ".join(words)
    new_state = rng.choice(MADE_UP_STATES)
    if new_city in REAL_CITIES:
        return episode
    old, new = f"{city}, {state}", f"{new_city}, {new_state}"
    arguments = {**episode.arguments, "city": new_city, "state": new_state}
    return replace(
        episode,
        user=episode.user.replace(old, new),
        arguments=arguments,
        call=CompactSyntax().render(Call(episode.tool, {k: str(v) for k, v in arguments.items()})),
        result=episode.result.replace(old, new),
        answer=episode.answer.replace(old, new),
    )


FORECAST_LINE = re.compile(r"^(\S+) (-?\d+°F), (.+)$")


def repeated_conditions(episode, rng: random.Random):
    """The same forecast with one day's conditions set to a later day's (the last day's half
    the time), in the result and in the answer that quotes it.

    Two lines that end alike (`°F, light rain` on Tuesday and on Friday) are where a copy
    goes wrong: the tokens before the line break match both, so only what the model knows of
    which line it is on tells it whether to go on to Wednesday or to stop. The servers' own
    values repeat a condition often enough to make that mistake and too seldom to learn from.
    """
    lines = episode.result.split("\n")
    parsed = [m for line in lines if (m := FORECAST_LINE.match(line))]
    if episode.tool != "get_forecast" or len(lines) < 2 or len(parsed) < len(lines):
        return episode
    later = len(lines) - 1 if rng.random() < 0.5 else rng.randrange(1, len(lines))
    earlier = rng.randrange(later)
    conditions = [m.group(3) for m in parsed]
    conditions[earlier] = conditions[later]
    new = [f"{m.group(1)} {m.group(2)}, {c}" for m, c in zip(parsed, conditions)]
    result, quoted = "\n".join(new), "\n".join(lines)
    if quoted not in episode.answer:
        return episode
    return replace(
        episode, result=result, answer=episode.answer.replace(quoted, result), copied=[*episode.values, *conditions]
    )


def _made_up_word(rng: random.Random, long: bool = False) -> str:
    if rng.random() < 0.5:
        word = "".join(rng.choice(LETTERS) for _ in range(rng.randint(10, 16) if long else rng.randint(2, 9)))
    else:  # a few syllables from a small set: letters and pairs repeat, as in Fayetteville
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(4, 6) if long else rng.randint(2, 4)))
    if rng.random() < 0.03:
        word = word[0] + "'" + word[1:]  # as in Coeur d'Alene
    return word.capitalize()


def encode(
    episodes,
    system: str,
    config: Config,
    tokenizer=None,
    call_weight: float = 1.0,
    value_weight: float = 1.0,
    stop_weight: float = 1.0,
    bounds_weight: float = 1.0,
) -> Batches:
    """Episodes as the shared prefix (system prompt through <|user|>) and one row each."""
    tokenizer = tokenizer or CharTokenizer()
    head_text = SYSTEM + system + USER
    head = tokenizer.encode_markup(head_text)
    rows = []
    for episode in episodes:
        markup = episode.markup(system)
        if not markup.startswith(head_text):
            raise ValueError("every transcript must start with the same system prompt")
        # the head ends at a special token, so it tokenizes the same alone: encoded once, not per transcript
        own = tokenizer.encode_markup(markup[len(head_text) :])
        # the shared head holds no assistant turn, so its weights are all 0: only the rest is walked
        # (positions below count from the end of the head)
        weights = assistant_weights(own, tokenizer, call_weight)
        spans = copied_spans(episode, own, tokenizer)
        weights[list(copied_positions(spans))] *= value_weight
        weights[stop_positions(episode, own, tokenizer, spans)] *= stop_weight
        weights[value_bounds(episode, tokenizer)] *= bounds_weight
        # position j predicts token j+1; the suffix runs from the first token after the prefix
        own = np.array(own)
        rows.append((own[:-1], own[1:], weights[1:]))
    # only the last n_layer * (window-1) prefix positions reach any suffix position, and
    # rotary positions make the crop exact: the suffix's logits are those of the full context
    keep = config.n_layer * (config.window - 1)
    cut = max(0, len(head) - keep)
    before = [head[i] if i >= 0 else NO_PREVIOUS for i in range(cut - config.lookback, cut)]
    return Batches(np.array(head[cut:]), before, rows)


def assistant_weights(ids: list[int], tokenizer, call_weight: float = 1.0) -> np.ndarray:
    """The weight of predicting ids[j]: 1.0 for each token the assistant writes, call_weight in a
    turn that ends in a call (ends at <|tool|>), 0.0 for everything else."""
    assistant, tool = tokenizer.special(ASSISTANT), tokenizer.special(TOOL)
    specials = set(tokenizer.special_tokens.values())
    out, start = np.zeros(len(ids)), None  # start: where the assistant's current turn began
    for j in [j for j, token in enumerate(ids) if token in specials]:
        if start is not None:  # this special token ends the turn
            out[start : j + 1] = call_weight if ids[j] == tool else 1.0
            start = None
        elif ids[j] == assistant:
            start = j + 1
    if start is not None:  # a turn still open at the end
        out[start:] = 1.0
    return out


def copied_positions(spans: list[tuple[int, int]]) -> set[int]:
    """The positions of the answer's tokens that copy a piece of the tool result (copied_spans)."""
    return {j for at, end in spans for j in range(at, end)}


def stop_positions(episode, ids: list[int], tokenizer, spans: list[tuple[int, int]]) -> list[int]:
    """Positions in ids (a transcript, or any end of one) where a copy out of the result stops: the
    token after each piece the answer copies, and in an answer that quotes the result line by line
    (a forecast), each line break after its first line, the first word of the line it starts, and
    the <|eos|>.

    What follows a value in the result is often not what follows it in the answer, and the
    tokens before two quoted lines' ends are often the same (`°F, light rain` on Tuesday and
    on Friday), so these are the decisions a copy gets wrong most: a number whose zeros go on,
    a forecast that stops a line early, skips to another day or loops back to the first."""
    out = {end for _, end in spans if end < len(ids)}
    if "\n" in episode.answer:
        answer_at = _answer_at(episode, ids, tokenizer)
        at = episode.answer.index("\n") + 1
        while (at := episode.answer.find("\n", at)) >= 0:
            word = episode.answer.find(" ", at)
            start = answer_at + len(tokenizer.encode(episode.answer[:at]))
            out.update(range(start, answer_at + len(tokenizer.encode(episode.answer[: word if word >= 0 else at + 1]))))
            at += 1
        out.add(len(ids) - 1)
    return sorted(out)


CALL_VALUE = re.compile(r'=("(?:[^"\\]|\\.)*"|[^ \]]*)')


def value_bounds(episode, tokenizer) -> list[int]:
    """Positions in the transcript after the system prompt's <|user|> (where encode's rows start)
    of where each argument value of the call starts and of the token after it: a quote or the
    value's first character, then a space or the closing bracket.

    Whether a name needs quotes (a space in it) is decided before any of it is copied, and
    whether the copy is over after the last letter; one wrong there and the call does not parse."""
    call_at = len(tokenizer.encode(episode.user)) + 1  # the question, then <|assistant|>
    out = []
    for m in CALL_VALUE.finditer(episode.call):
        for at in (m.start(1), m.end(1)):
            out.append(call_at + len(tokenizer.encode(episode.call[:at])))
    return out


def copied_spans(episode, ids: list[int], tokenizer) -> list[tuple[int, int]]:
    """[start, end) in ids (a transcript, or any end of one) of each occurrence in the answer of a
    piece of the result (episode.copied)."""
    answer_at = _answer_at(episode, ids, tokenizer)
    out = []
    for piece in episode.copied or episode.values:
        # every occurrence, but a one-letter piece (a wind direction, last in its answer) only the last:
        # "N" is in "New"
        starts = [episode.answer.rfind(piece) if len(piece) == 1 else episode.answer.find(piece)]
        while len(piece) > 1 and starts[-1] >= 0:
            starts.append(episode.answer.find(piece, starts[-1] + 1))
        for start in (s for s in starts if s >= 0):
            at = answer_at + len(tokenizer.encode(episode.answer[:start]))
            out.append((at, at + len(tokenizer.encode(piece))))
    return out


def _answer_at(episode, ids: list[int], tokenizer) -> int:
    """Where the answer starts in ids: the transcript ends with the answer, then <|eos|>."""
    return len(ids) - 1 - len(tokenizer.encode(episode.answer))


def pad(rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of different lengths to [B, T] arrays; padding sits at the end, weighted 0, so causal
    attention keeps it out of every real position."""
    T = max(len(r[0]) for r in rows)
    inputs, targets, weights = (np.zeros((len(rows), T), dtype) for dtype in (np.int64, np.int64, np.float32))
    for b, (x, y, w) in enumerate(rows):
        inputs[b, : len(x)], targets[b, : len(y)], weights[b, : len(w)] = x, y, w
    return inputs, targets, weights


def batch_order(n_rows: int, lengths, tc: TrainConfig, rng) -> list[np.ndarray]:
    """Indices of each step's rows: pools of rows sorted by length, cut into batches, shuffled."""
    order = rng.permutation(n_rows)
    pool = tc.sort_pool * tc.batch_size
    batches = []
    for start in range(0, n_rows - tc.batch_size + 1, pool):
        chunk = order[start : start + pool]
        chunk = chunk[np.argsort([lengths[i] for i in chunk], kind="stable")]
        group = [chunk[i : i + tc.batch_size] for i in range(0, len(chunk) - tc.batch_size + 1, tc.batch_size)]
        batches += [group[i] for i in rng.permutation(len(group))]
    return batches


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    progress = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


class Adam:
    def __init__(self, params: dict, tc: TrainConfig) -> None:
        self.tc = tc
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, params: dict, grads: dict, lr: float) -> float:
        """Update params in place; returns the gradient norm before clipping. Consumes grads (overwritten)."""
        b1, b2 = self.tc.betas
        norm = math.sqrt(sum(float(np.vdot(g, g)) for g in grads.values()))
        scale = min(1.0, self.tc.clip / (norm + 1e-6))
        self.t += 1
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for k, g in grads.items():  # in place: g is this step's own array
            m, v = self.m[k], self.v[k]
            g *= scale
            m *= b1
            m += (1 - b1) * g
            g *= g
            g *= 1 - b2
            v *= b2
            v += g
            update = v / c2  # lr * (m / c1) / (sqrt(v / c2) + 1e-8)
            np.sqrt(update, out=update)
            update += 1e-8
            np.divide(m, update, out=update)
            update *= lr / c1
            params[k] -= update.astype(params[k].dtype, copy=False)
        return norm


class Progress:
    """A progress bar on a terminal; elsewhere a line every `every` steps."""

    def __init__(self, total: int, stream=None, every: int = 100) -> None:
        self.total, self.stream, self.every = total, stream or sys.stderr, every
        self.tty = self.stream.isatty()
        self.started = time.perf_counter()

    def __call__(self, step: int, loss: float) -> None:
        elapsed = time.perf_counter() - self.started
        done = step + 1
        if self.tty:
            bar = "#" * (30 * done // self.total)
            self.stream.write(f"\r{done:5d}/{self.total} [{bar:<30}] loss {loss:.4f}  {elapsed:6.1f} s")
            if done == self.total:
                self.stream.write("\n")
            self.stream.flush()
        elif done % self.every == 0 or done == self.total:
            print(f"step {done:5d}/{self.total}  loss {loss:.4f}  {elapsed:7.1f} s", file=self.stream, flush=True)


def train(config: Config, tc: TrainConfig, progress=None) -> tuple[dict, dict]:
    """Train from scratch; returns the weights (float32) and the run's record for the weight file."""
    from decodeloop.lab.corpus import episodes, system_prompt

    started = time.perf_counter()
    rng = np.random.default_rng(tc.seed)
    params = init_params(config, rng, np.float32)
    places = random.Random(tc.seed)
    corpus = [
        made_up_place(e, places) if places.random() < tc.made_up else e
        for e in episodes(tc.seed, tc.steps * tc.batch_size, "train", varied=tc.varied, forecasts=tc.forecasts)
    ]
    if tc.repeats:
        alike = random.Random(f"repeats:{tc.seed}")
        corpus = [
            repeated_conditions(e, alike) if e.tool == "get_forecast" and alike.random() < tc.repeats else e
            for e in corpus
        ]
    data = encode(
        corpus,
        system_prompt(),
        config,
        call_weight=tc.call_weight,
        value_weight=tc.value_weight,
        stop_weight=tc.stop_weight,
        bounds_weight=tc.bounds_weight,
    )
    lengths = [len(row[0]) for row in data.suffixes]
    order = batch_order(len(data.suffixes), lengths, tc, rng)
    adam = Adam(params, tc)
    # the saved weights average the last few hundred steps: the last step alone carries its batch's noise
    averaged = {name: value.copy() for name, value in params.items()}
    losses = []
    with ThreadPoolExecutor(tc.threads) as pool:
        for step, rows in enumerate(order[: tc.steps]):
            inputs, targets, weights = pad([data.suffixes[i] for i in rows])
            loss, grads = loss_and_grads(
                params, config, data.prefix, inputs, targets, weights, parts=tc.parts, run=pool.map, before=data.before
            )
            adam.step(params, grads, lr_at(step, tc))
            for name, value in params.items():
                averaged[name] += (1 - tc.ema) * (value - averaged[name])
            losses.append(loss)
            if progress:
                progress(step, loss)
    meta = {
        "train": asdict(tc),
        "corpus": "decodeloop.lab.corpus.episodes(seed, steps * batch_size, 'train', varied, forecasts), "
        "then made_up_place and repeated_conditions",
        "final_loss": float(np.mean(losses[-50:])),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return averaged, meta


DEFAULT_OUT = "transformer.npz"  # in the current directory: training never replaces the shipped weights unasked


def output_path(out: str | None) -> str:
    """Where training writes: `out` as given, else transformer.npz in the current directory. The shipped
    weights (DEFAULT_WEIGHTS) are replaced only when `out` names them: the default path never does, even
    from their own directory (ValueError, before any training)."""
    if out is not None:
        return out
    if _same_file(DEFAULT_OUT, DEFAULT_WEIGHTS):
        raise ValueError(
            f"the default output, {DEFAULT_OUT} here, is the shipped weights file "
            f"({DEFAULT_WEIGHTS}); to replace it, name it: --out {DEFAULT_WEIGHTS}"
        )
    return DEFAULT_OUT


def main(
    out: str | None = None,
    steps: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    lr: float | None = None,
    threads: int = 2,
    stream=None,
    config: Config | None = None,
) -> int:
    """`decodeloop train transformer`: train and write the weight file (see `output_path` for where)."""
    defaults = TrainConfig()
    tc = replace(
        defaults,
        steps=steps or defaults.steps,
        seed=seed,
        batch_size=batch_size or defaults.batch_size,
        lr=lr or defaults.lr,
        threads=threads,
    )
    config = config or Config()
    stream = stream or sys.stderr
    try:
        out = output_path(out)
    except ValueError as e:
        print(f"decodeloop train: {e}", file=stream)
        return 2
    if os.path.isdir(out):
        print(f"decodeloop train: --out {out} is a directory; name the .npz file to write", file=stream)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    print(
        f"training the transformer: {tc.steps} steps of {tc.batch_size} transcripts, seed {tc.seed}, "
        f"{tc.threads} thread(s); the weights go to {out}",
        file=stream,
        flush=True,
    )
    params, meta = train(config, tc, Progress(tc.steps, stream))
    save_weights(out, params, config, meta)
    print(
        f"wrote {out} ({os.path.getsize(out) / 1e6:.1f} MB): final loss {meta['final_loss']:.4f}, "
        f"{meta['seconds']:.0f} s",
        file=stream,
    )
    if not _same_file(out, DEFAULT_WEIGHTS):
        print(f"run them: python3 decode_loop_transformer.py --weights {out}", file=stream)
    return 0


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
