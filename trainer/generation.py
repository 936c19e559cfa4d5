"""Generators: batched sampling with transformers (CPU or GPU) or vLLM (GPU).

Both return, per prompt, the sampled token ids up to and including the first
end-of-turn token, or the end of the first tool call (`</tool_call>`: a turn
that has called a tool has nothing more to say until the tool answers, and
small models rarely close a turn by themselves), and each token's log-prob under
the sampling distribution (softmax of logits / temperature, full vocabulary),
which GRPO's importance ratio needs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trainer.errors import TrainerError
from trainer.models import cache_kwargs, pad_id, returned_cache
from trainer.rollout import Sample
from trainer.settings import GENERATION_BATCH_SIZE

STOP_STRINGS = ("</tool_call>",)
# prompt prefixes a stream keeps for the rows that join later (one per configuration
# its rows decode under, up to this many)
PREFIXES = 8
MIN_HELD = 16  # shorter shared prefixes are not worth a cache of their own


def cut_sample(
    tokens: list[int],
    logprobs: list[float],
    stops: set[int],
    tokenizer: Any = None,
    stop_strings: Sequence[str] = (),
) -> Sample:
    """The sample up to the first stop token, or up to the token completing a stop string."""
    end = next((i + 1 for i, t in enumerate(tokens) if t in stops), len(tokens))
    if tokenizer is not None and stop_strings:
        text = tokenizer.decode(tokens[:end])
        if any(s in text for s in stop_strings):
            end = next(
                i
                for i in range(1, end + 1)
                if any(s in tokenizer.decode(tokens[:i]) for s in stop_strings)
            )
    return Sample(tokens[:end], logprobs[:end])


def _draw(logprobs: torch.Tensor) -> torch.Tensor:
    """One token per row from log-probs [rows, vocab], by inverse CDF: a uniform draw
    looked up in the cumulative sum (float64, so a 262k vocabulary's tail keeps its
    mass). Written by hand because `torch.multinomial` takes about 20x as long on CPU
    for one draw per row from a large vocabulary (41 ms against 2 ms for 8 x 262,144:
    a fifth of a Gemma 3 270M decode step)."""
    cumulative = logprobs.exp().double().cumsum(-1)
    uniform = torch.rand(len(logprobs), 1, dtype=torch.float64, device=logprobs.device)
    token = torch.searchsorted(cumulative, uniform * cumulative[:, -1:], right=True)
    return token.clamp_(max=logprobs.shape[-1] - 1)


def stop_string_ended(
    tokenizer: Any, tokens: list[int], stop_strings: Sequence[str]
) -> bool:
    """Whether the last few tokens complete a stop string (the exact cut is `cut_sample`'s)."""
    tail = tokenizer.decode(tokens[-16:])
    return any(s in tail for s in stop_strings)


@dataclass
class _Kept:
    """One sequence's KV cache: per layer (keys, values) [1, heads, n, dim], None if unused.

    n is the sequence's length, or on a sliding-window layer the window less one:
    all that the next token can attend to there. `config` is the configuration the
    sequence was encoded under (see `TransformersGenerator.configure`): only a row
    of the same configuration may reuse it.
    """

    tokens: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor] | None]
    config: Hashable = None


def _cache(config: Any, rows: Sequence[_Kept], width: int, running: Any = None) -> Any:
    """One batched cache holding `rows`, right-aligned to `width` columns (left padding).

    `running`: a batched cache whose rows come first, each already right-aligned
    (so its last `width` columns hold them: a stream's rows when others join).
    Every row is written once into the new tensors (concatenating padded copies
    would copy each twice: at 16 rows of 2,000 tokens, the 1.5B's cache is 1.8 GB).
    Built like the cache the model makes for itself (`DynamicCache(config=...)`),
    so sliding-window layers keep their window and mask offsets.
    """
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    for index, layer in enumerate(cache.layers if rows or running else []):
        parts = [row.layers[index] for row in rows]
        old = running.layers[index] if running is not None else None
        if any(part is None for part in parts) or (
            old is not None and not old.is_initialized
        ):
            continue
        columns = min(width, layer.sliding_window - 1) if layer.is_sliding else width
        tensors = []
        for i in (0, 1):
            sources = [*([(old.keys, old.values)[i]] if old is not None else []),
                       *(part[i] for part in parts)]  # fmt: skip
            first = sources[0]
            batch = sum(len(t) for t in sources)
            out = first.new_zeros(batch, first.shape[1], columns, first.shape[3])
            at = 0
            for tensor in sources:
                take = min(columns, tensor.shape[-2])
                out[at : at + len(tensor), :, columns - take :] = tensor[:, :, -take:]
                at += len(tensor)
            tensors.append(out)
        layer.update(*tensors)
        if layer.is_sliding:
            layer.cumulative_length = width  # positions seen, not columns kept
    return cache


def _kept(cache: Any, row: int, tokens: list[int], config: Hashable = None) -> _Kept:
    """Row `row` of a batched cache whose last `len(tokens)` columns are its sequence."""
    layers: list[tuple[torch.Tensor, torch.Tensor] | None] = []
    for layer in cache.layers:
        if not layer.is_initialized:
            layers.append(None)
            continue
        n = (
            min(len(tokens), layer.sliding_window - 1)
            if layer.is_sliding
            else len(tokens)
        )
        # Cloned: a view would keep the whole batch's tensor alive.
        layers.append(
            (
                layer.keys[row : row + 1, :, -n:].clone(),
                layer.values[row : row + 1, :, -n:].clone(),
            )
        )
    return _Kept(tokens, layers, config)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _source(
    kept: Sequence[_Kept], prompt: list[int], config: Hashable = None
) -> _Kept | None:
    """The kept sequence of configuration `config` sharing the longest prefix with
    `prompt` (leaving it a token of its own), cut to that prefix; a re-rendered
    earlier turn diverges from what was sampled, and what comes before it still
    need not be encoded again."""
    best, length = None, 0
    for sequence in kept:
        if sequence.config != config:
            continue
        n = min(_common(sequence.tokens, prompt), len(prompt) - 1)
        if n > length and (n == len(sequence.tokens) or _whole(sequence)):
            best, length = sequence, n
    if best is None or length == len(best.tokens):
        return best
    return _Kept(
        best.tokens[:length],
        [
            None if part is None else (part[0][:, :, :length], part[1][:, :, :length])
            for part in best.layers
        ],
        config,
    )


def _whole(sequence: _Kept) -> bool:
    """Whether every layer holds every token (a sliding window dropped none), so the
    sequence can be cut to a prefix."""
    return all(
        part is None or part[0].shape[-2] == len(sequence.tokens)
        for part in sequence.layers
    )


def _shared_prefix(prompts: Sequence[list[int]]) -> int:
    """Length of the prefix all prompts share, leaving each at least one token of its own."""
    shortest = min(len(p) for p in prompts)
    for index in range(shortest - 1):
        if any(p[index] != prompts[0][index] for p in prompts[1:]):
            return index
    return shortest - 1


def _recent(new: Sequence[_Kept], old: Sequence[_Kept], tokens: int) -> list[_Kept]:
    """`new` then `old`, without a sequence that a newer one extends, up to `tokens` in all."""
    kept: list[_Kept] = []
    for sequence in (*new, *old):
        if any(
            k.config == sequence.config
            and k.tokens[: len(sequence.tokens)] == sequence.tokens
            for k in kept
        ):
            continue
        tokens -= len(sequence.tokens)
        if tokens < 0:
            break
        kept.append(sequence)
    return kept


class TransformersGenerator:
    """Sampling with a KV-cached decode loop over left-padded batches.

    Written by hand instead of `model.generate` because the loop needs what
    generate does not give: each sampled token's log-prob computed as it goes
    (no stacked [B, T, V] logits), rows that stop (end of turn, end of a tool
    call) dropped from the batch and its cache at once, no per-step
    logits-processor machinery (which dominates at small model sizes), and no
    prompt token encoded twice: the prefix the prompts of a call share is
    encoded once, identical prompts (a group's first turn) once, and with
    `resume=True` each prompt that extends a sequence of the previous call
    (the episode's next turn) encodes only the environment's answer, appended
    to that sequence's kept cache. Each sequence is extended on its own cache
    before the batch is assembled, so the batch has padding only on the left
    and sliding-window layers see exactly the tokens they would in one pass.

    `configure`, if given, is called before every forward pass with the
    configuration of each row in it (the `config` a stream's row was given; None
    in `generate`), so rows of different configurations (adapters, mixes of
    them) decode in one batch: `router.adapters.AdapterBank.configure_rows`.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = GENERATION_BATCH_SIZE,
        stop_strings: Sequence[str] = STOP_STRINGS,
        reuse: bool = True,
        keep_tokens: int = 0,
        configure: Callable[[Sequence[Hashable]], None] | None = None,
    ) -> None:
        self.model = model
        self.configure = configure
        # > 0: the kept sequences outlive the next call and every call resumes from
        # them, the most recently used first, up to this many tokens in all (a
        # server's conversations come back in any order); 0: only the previous
        # call's are kept, for `resume` (an episode's turns)
        self.keep_tokens = keep_tokens
        self.reuse = (
            reuse  # False: every prompt encoded whole (the benchmarks' reference)
        )
        self.stop_strings = list(stop_strings)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        eos = model.generation_config.eos_token_id
        stops = eos if isinstance(eos, list) else [eos]
        self.stops = {t for t in stops if t is not None} | {tokenizer.eos_token_id}
        self.pad = pad_id(tokenizer)
        self.kept: list[_Kept] = []  # the previous call's sequences, for `resume`
        self.encoded = 0  # prompt tokens run through the model (for benchmarks)

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        temperature: float,
        resume: bool = False,
    ) -> list[Sample]:
        samples: list[Sample] = []
        was_training = self.model.training
        self.model.eval()
        previous = self.kept if resume or self.keep_tokens else []
        self.kept = []
        for start in range(0, len(prompts), self.batch_size):
            stream = DecodeStream(self, temperature, previous)
            chunk = prompts[start : start + self.batch_size]
            done = dict(
                stream.admit([(i, p, max_new_tokens) for i, p in enumerate(chunk)])
            )
            while stream.live:
                done.update(stream.step())
            samples += [done[i] for i in range(len(chunk))]
        self.settle(previous)
        if was_training:
            self.model.train()
        return samples

    def settle(self, previous: Sequence[_Kept]) -> None:
        """After decoding: the kept pool is the new sequences, then `previous` ones
        still fitting `keep_tokens` (without `keep_tokens`, only the new ones)."""
        if self.keep_tokens:
            self.kept = _recent(self.kept, previous, self.keep_tokens)

    def _configure(self, configs: Sequence[Hashable]) -> None:
        """Set up the model for a forward pass over rows of these configurations."""
        if self.configure is not None:
            self.configure(configs)

    def _extend(
        self, source: _Kept | None, tokens: list[int], config: Hashable = None
    ) -> tuple[_Kept, torch.Tensor]:
        """The cache of `tokens` and its last logits under `config`, encoding only
        what `source` lacks."""
        device = next(self.model.parameters()).device
        start = len(source.tokens) if source is not None else 0
        cache = _cache(self.model.config, [source] if source else [], start)
        self._configure([config])
        output = self.model(
            input_ids=torch.tensor([tokens[start:]], device=device),
            attention_mask=torch.ones(1, len(tokens), dtype=torch.long, device=device),
            position_ids=torch.arange(start, len(tokens), device=device)[None],
            **cache_kwargs(cache), use_cache=True, logits_to_keep=1,
        )  # fmt: skip
        self.encoded += len(tokens) - start
        return _kept(returned_cache(output), 0, tokens, config), output.logits[0, -1]

    def _prefill(
        self,
        prompts: Sequence[list[int]],
        previous: Sequence[_Kept],
        hold: Sequence[tuple[Hashable, list[int]]] = (),
        configs: Sequence[Hashable] | None = None,
    ) -> tuple[list[tuple[_Kept, torch.Tensor]], list[_Kept]]:
        """Each prompt's cache and last logits under its configuration (`configs`,
        default None each), each distinct token encoded once per configuration;
        and caches that prompts joining later may start from: the prefix each
        configuration's fresh prompts shared (a task's system prompt and tools),
        and each `hold` (configuration, prefix) of a prompt here (a group's first
        prompt but its last token, for its siblings still queued; the system
        prompt a queued prompt of the same configuration shares)."""
        configs = list(configs) if configs is not None else [None] * len(prompts)
        rows = list(zip(configs, prompts, strict=True))
        if not self.reuse:
            return [self._extend(None, p, c) for c, p in rows], []
        sources = [_source(previous, p, c) for c, p in rows]
        kept: list[_Kept] = []
        for config in dict.fromkeys(configs):
            fresh = [
                p
                for (c, p), s in zip(rows, sources, strict=True)
                if s is None and c == config
            ]
            if len(fresh) > 1 and (shared := _shared_prefix(fresh)) > 0:
                prefix = self._extend(None, fresh[0][:shared], config)[0]
                kept.append(prefix)
                sources = [
                    prefix if s is None and c == config else s
                    for (c, _), s in zip(rows, sources, strict=True)
                ]
        done: dict[tuple[Hashable, tuple[int, ...]], tuple[_Kept, torch.Tensor]] = {}
        for (config, prompt), source in zip(rows, sources, strict=True):
            key = (config, tuple(prompt))
            if key in done:
                continue
            for held_config, prefix in hold:
                if (
                    held_config == config
                    and len(source.tokens if source else ()) < len(prefix) < len(prompt)
                    and prompt[: len(prefix)] == prefix
                ):
                    source = self._extend(source, prefix, config)[0]
                    kept.insert(0, source)
                    hold = [h for h in hold if h != (held_config, prefix)]
                    break
            done[key] = self._extend(source, prompt, config)
        return [done[(c, tuple(p))] for c, p in rows], kept

    def stream(self, temperature: float) -> EpisodeTurns:
        """Episodes' turns decoded continuously (see `EpisodeTurns`); each turn under
        the configuration it is submitted with (see `configure`)."""
        return EpisodeTurns(self, temperature)


class DecodeStream:
    """Rows decoded together one token per step, which join between steps and leave
    as they stop (continuous batching; `generate` admits its rows once).

    `admit` prefills each prompt on its own cache (`_prefill`: shared prefixes and
    kept sequences reused), samples its first token, and rebuilds the batched
    cache, left-padded to the longest row, with the rows already decoding; `step`
    feeds every row its last token and samples the next. A row stops at an
    end-of-turn token, a stop string or its own token budget; what it encoded is
    kept on the generator (the last sampled token was never fed).
    """

    def __init__(
        self,
        generator: TransformersGenerator,
        temperature: float,
        previous: Sequence[_Kept],
    ) -> None:
        self.generator = generator
        self.temperature = temperature
        self.previous = previous
        self.prefixes: list[_Kept] = []  # prompt prefixes encoded here, newest first
        self.device = next(generator.model.parameters()).device
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.attention = torch.zeros(0, 0, dtype=torch.long, device=self.device)
        self.stops = torch.tensor(sorted(generator.stops), device=self.device)

    @property
    def live(self) -> int:
        """Rows still decoding."""
        return len(self.rows)

    @torch.no_grad()
    def admit(
        self,
        prompts: Sequence[tuple[Any, list[int], int]],
        temperatures: Sequence[float] | None = None,
        hold: Sequence[tuple[Hashable, list[int]]] = (),
        configs: Sequence[Hashable] | None = None,
    ) -> list[tuple[Any, Sample]]:
        """Add (key, prompt, token budget) rows, each sampled at its own temperature
        (default: the stream's) and decoded under its own configuration (default
        None; see `TransformersGenerator.configure`); those that stop at once are
        returned (a budget of 0 at once, with nothing sampled). `hold`:
        (configuration, prompt) pairs that rows joining later repeat, whose caches
        `prefixes` keeps (see `_prefill`)."""
        if temperatures is None:
            temperatures = [self.temperature] * len(prompts)
        if configs is None:
            configs = [None] * len(prompts)
        empty = [(key, Sample([], [])) for key, _, budget in prompts if budget <= 0]
        rows = [
            _Row(key, prompt, budget, temperature, config)
            for (key, prompt, budget), temperature, config in zip(
                prompts, temperatures, configs, strict=True
            )
            if budget > 0
        ]
        if not rows:
            return empty
        prefilled, prefixes = self.generator._prefill(
            [r.prompt for r in rows],
            [*self.previous, *self.prefixes],
            hold,
            [r.config for r in rows],
        )
        self.prefixes = [*prefixes, *self.prefixes][:PREFIXES]
        joining = [kept for kept, _ in prefilled]
        lengths = [len(row.sequence) for row in self.rows] + [
            len(k.tokens) for k in joining
        ]
        width = max(lengths)
        self.cache = _cache(
            self.generator.model.config,
            joining,
            width,
            self.cache if self.rows else None,
        )
        joined = len(self.rows)
        self.rows += rows
        self.attention = torch.tensor(
            [[0] * (width - n) + [1] * n for n in lengths], device=self.device
        )
        logits = torch.stack([last for _, last in prefilled])
        return empty + self._sample(logits, self.rows[joined:])

    @torch.no_grad()
    def step(self) -> list[tuple[Any, Sample]]:
        """Feed every row its last token and sample the next; return the rows that stopped."""
        token = torch.tensor(
            [[row.tokens[-1]] for row in self.rows], device=self.device
        )
        self.attention = torch.cat(
            [self.attention, self.attention.new_ones(len(self.rows), 1)], dim=1
        )
        last = torch.tensor(
            [[len(row.sequence)] for row in self.rows], device=self.device
        )
        self.generator._configure([row.config for row in self.rows])
        output = self.generator.model(
            input_ids=token, attention_mask=self.attention, position_ids=last,
            **cache_kwargs(self.cache), use_cache=True,
        )  # fmt: skip
        return self._sample(output.logits[:, -1], self.rows)

    def _sample(
        self, logits: torch.Tensor, rows: Sequence[_Row]
    ) -> list[tuple[Any, Sample]]:
        """Sample a token for `rows` (one row of `logits` each), then drop the rows
        that stopped from the batch and its cache."""
        # each row at its own temperature; 0 is greedy decoding (evaluation, as the
        # paper evaluates), whose log-probs are those of temperature 1
        temperature = torch.tensor(
            [row.temperature or 1.0 for row in rows], device=logits.device
        )
        scaled = torch.log_softmax(logits.float() / temperature[:, None], dim=-1)
        token = scaled.argmax(-1, keepdim=True)  # [rows, 1]
        sampled = [i for i, row in enumerate(rows) if row.temperature]
        if sampled:
            token[sampled] = _draw(scaled[sampled])
        picked = scaled.gather(-1, token).squeeze(-1)
        stopped = torch.isin(token.squeeze(-1), self.stops).tolist()
        generator = self.generator
        for row, value, logp in zip(
            rows, token.squeeze(-1).tolist(), picked.tolist(), strict=True
        ):
            row.tokens.append(value)
            row.logprobs.append(logp)
        done = [
            stop
            or len(row.tokens) >= row.budget
            or (
                bool(generator.stop_strings)
                and stop_string_ended(
                    generator.tokenizer, row.tokens, generator.stop_strings
                )
            )
            for row, stop in zip(rows, stopped, strict=True)
        ]
        finished = {id(row) for row, end in zip(rows, done, strict=True) if end}
        if not finished:
            return []
        keep, out = [], []
        for index, row in enumerate(self.rows):
            if id(row) in finished:
                generator.kept.append(
                    _kept(self.cache, index, row.sequence, row.config)
                )
                out.append(
                    (row.key, cut_sample(row.tokens, row.logprobs, generator.stops,
                                   generator.tokenizer, generator.stop_strings))
                )  # fmt: skip
            else:
                keep.append(index)
        if keep:
            indices = torch.tensor(keep, device=self.device)
            self.cache.batch_select_indices(indices)
            self.attention = self.attention[indices]
        self.rows = [self.rows[i] for i in keep]
        return out


class EpisodeTurns:
    """Rollouts' turns decoded continuously: when an episode's turn ends, its next
    turn joins the running batch at the following step, instead of every episode
    waiting for the slowest turn of the round (what `collect` does with a plain
    `Generator`), so the batch stays full while episodes last.

    At most `batch_size` rows decode at once. A continuing episode takes back the
    slot its turn just left, before any waiting first turn, so it always resumes
    from its own kept cache (the pool holds the turns that ended at the last
    step), unless it now names another configuration (a task routed elsewhere),
    under which it is encoded afresh; a first turn joins when an episode ends, from what an earlier admission
    left in `DecodeStream.prefixes`: the system prompt the first turns shared, or
    its group's whole prompt (held while siblings of an admitted first turn wait).
    """

    def __init__(self, generator: TransformersGenerator, temperature: float) -> None:
        self.generator = generator
        generator.kept = []
        self.rows = DecodeStream(generator, temperature, [])
        self.returned: set[Any] = set()  # keys with a finished turn: next ones continue
        # queued turns: (key, prompt, budget, configuration)
        self.continuing: list[tuple[Any, list[int], int, Hashable]] = []
        self.first: list[tuple[Any, list[int], int, Hashable]] = []

    @property
    def live(self) -> int:
        """Turns submitted and not yet returned."""
        return self.rows.live + len(self.continuing) + len(self.first)

    def submit(
        self, key: Any, prompt: list[int], budget: int, config: Hashable = None
    ) -> None:
        """Queue a turn: `prompt` is the episode's whole sequence so far, decoded
        under `config` (see `TransformersGenerator.configure`)."""
        if config is not None and self.generator.configure is None:
            raise TrainerError(
                "a turn names a configuration, but the generator has no `configure` "
                "to apply it; build it with configure=..."
            )
        queue = self.continuing if key in self.returned else self.first
        queue.append((key, prompt, budget, config))

    @torch.no_grad()
    def step(self) -> list[tuple[Any, Sample]]:
        """Admit queued turns into the free slots, decode one token for every row,
        and return the turns that ended."""
        free = self.generator.batch_size - self.rows.live
        continuing, self.continuing = self.continuing[:free], self.continuing[free:]
        starting = self.first[: free - len(continuing)]
        self.first = self.first[len(starting) :]
        admitted = continuing + starting
        hold = _held(starting, self.first)
        model = self.generator.model
        training = model.training
        if training:
            model.eval()
        done = (
            self.rows.admit(
                [(key, prompt, budget) for key, prompt, budget, _ in admitted],
                hold=hold,
                configs=[config for *_, config in admitted],
            )
            if admitted
            else []
        )
        if self.rows.live:
            done += self.rows.step()
        if training:
            model.train()
        if done:  # the turns that ended are the pool their next turns resume from
            self.rows.previous, self.generator.kept = self.generator.kept, []
            self.returned.update(key for key, _ in done)
        return done


def _held(
    starting: Sequence[tuple[Any, list[int], int, Hashable]],
    queued: Sequence[tuple[Any, list[int], int, Hashable]],
) -> list[tuple[Hashable, list[int]]]:
    """The (configuration, prefix) caches first turns joining now leave to queued
    first turns: a group's whole prompt but its last token, for its siblings still
    queued; else what it shares with the first queued prompt of its configuration
    (the system prompt, for rows of a configuration none of whose rows decoded yet)."""
    same = {(config, tuple(prompt)) for _, prompt, _, config in queued}
    first: dict[Hashable, list[int]] = {}
    for _, prompt, _, config in queued:
        first.setdefault(config, prompt)
    held = []
    for _, prompt, _, config in starting:
        if (config, tuple(prompt)) in same:
            held.append((config, prompt[:-1]))
        elif config in first:
            shared = min(_common(prompt, first[config]), len(prompt) - 1)
            if shared >= MIN_HELD:
                held.append((config, prompt[:shared]))
    return held


@dataclass
class _Row:
    """One row of a stream: its prompt, budget, and what it has sampled."""

    key: Any
    prompt: list[int]
    budget: int
    temperature: float
    config: Hashable = None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def sequence(self) -> list[int]:
        """What the cache holds for this row: the prompt and every sampled token but
        the last (fed at the next step)."""
        return self.prompt + self.tokens[:-1]


class VLLMGenerator:
    """Sampling with a vLLM engine; the adapter saved each iteration goes in as a LoRARequest.

    Written against vLLM's documented offline API (`LLM.generate` with token
    prompts, `SamplingParams(logprobs=0)`, `LoRARequest(name, id, path)`); the
    base weights stay in the engine and are never merged.
    """

    def __init__(
        self, engine: Any, stops: set[int], stop_strings: Sequence[str] = STOP_STRINGS
    ) -> None:
        self.engine = engine
        self.stops = stops
        self.stop_strings = list(stop_strings)
        self.adapter: tuple[str, int, str] | None = None

    def use_adapter(self, path: str, version: int) -> None:
        """Serve the adapter saved at `path` from now on (a new id makes vLLM reload it)."""
        self.adapter = ("trace-policy", version, path)

    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        temperature: float,
        resume: bool = False,
    ) -> list[Sample]:
        """`resume` changes nothing here: vLLM's prefix caching finds shared prefixes itself."""
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        params = SamplingParams(
            temperature=temperature,
            top_p=1.0,
            top_k=-1,
            max_tokens=max_new_tokens,
            logprobs=0,
            stop_token_ids=sorted(self.stops),
            stop=self.stop_strings or None,
            include_stop_str_in_output=True,
        )
        lora = LoRARequest(*self.adapter) if self.adapter else None
        outputs = self.engine.generate(
            [{"prompt_token_ids": list(p)} for p in prompts],
            params,
            lora_request=lora,
            use_tqdm=False,
        )
        samples = []
        for output in outputs:
            completion = output.outputs[0]
            tokens = list(completion.token_ids)
            logprobs = [
                step[token].logprob
                for token, step in zip(tokens, completion.logprobs, strict=True)
            ]
            samples.append(cut_sample(tokens, logprobs, self.stops))
        return samples
