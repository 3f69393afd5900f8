"""A vision-language model as judge (``transformers``: AutoModelForImageTextToText + AutoProcessor).

One core reads the model's next-token distribution after a chat prompt with one image and constrains it to a
closed set of answers (``benchmark.judges.constrained``); three uses sit on it:

- ``judge_batch`` (and ``produce_batch``, the same as a cached producer): CAIRE's 1-5 cultural relevance
  (Yayavaram et al., arXiv:2506.09109, Sec. 3.2, Eq. 3): ``s = argmax_{k in 1..5} P(k | I, T, c, R)``, the
  prompt of Fig. 9, answer after "Final Score: ".
- ``p_yes``: VQAScore-style P("Yes") (Lin et al., arXiv:2404.01291), here renormalised over {"Yes", "No"}:
  ``exp(z_Yes) / (exp(z_Yes) + exp(z_No))`` (the original reads P("Yes") from the full vocabulary).
- ``viescore``: VIEScore-style 0-10 rating (Ku et al., arXiv:2312.14867) with CulturalFrames' explicit
  instructions (Nayak et al., arXiv:2506.08835, Fig. 24), the score read in one constrained step rather than
  after a generated reasoning; ``benchmark.judges.expectations`` rates explicit and implicit expectations apart
  with the same core, as a cached producer.
"""

from __future__ import annotations

import copy
import inspect
import textwrap
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from transformers import DynamicCache

from benchmark.judges.base import Context, Judge, Judgement, JudgeRequest, JudgeUnavailable, how_to_provide_judge
from benchmark.judges.constrained import Tokens, answer_probabilities, branching_nodes
from benchmark.judges.prompts import (CAIRE_ANSWER_PREFIX, CAIRE_SYSTEM, VIESCORE_ANSWER_PREFIX,
                                      VIESCORE_ANSWERS, VIESCORE_LEVELS, caire_prompt, viescore_prompt,
                                      vqascore_question)

DEFAULT_JUDGE = "Qwen/Qwen2.5-VL-7B-Instruct"  # CAIRE's best scorer (Table 1: F1 65.5 with Wikipedia text)
YES_NO = ("Yes", "No")
# How the probabilities are computed, in every judge id (so in every products-cache key and metric version): the
# prefix an image's prompts share runs once, into a key-value cache (``SharedPrefix``). Values differ from a
# forward pass over each whole prompt by rounding only, but they are not those values bit for bit.
COMPUTATION = "shared prefix"


@dataclass(frozen=True)
class SharedPrefix:
    """What the chat prompts of one image have in common, as the model reads them: ``inputs``, the processor's
    output for the leading tokens all prompts share (the image's pixels and its expanded image tokens included),
    ``length`` tokens long; ``tails``, each prompt's own tokens after it (at least its last token).

    Each prompt is tokenised whole, as the processor tokenises it, so the split never changes a token: the
    prefix is a prefix of every prompt's own token sequence."""

    inputs: dict
    length: int
    tails: tuple[Tokens, ...]

    @classmethod
    def of(cls, judge: VLMJudge, image: Image.Image, prompts: Sequence[str]) -> SharedPrefix:
        full = judge.processor(text=[prompts[0]], images=[image.convert("RGB")], return_tensors="pt")
        expanded = full["input_ids"][0].tolist()
        texts = [judge.tokenizer(prompt)["input_ids"] for prompt in prompts]
        common = min(len(t) for t in texts) - 1  # a tail keeps at least the token whose logits are read
        for text in texts[1:]:
            common = next((k for k in range(common) if text[k] != texts[0][k]), common)
        grown = len(expanded) - len(texts[0])  # image tokens the processor added
        image_at = next((k for k, (a, b) in enumerate(zip(expanded, texts[0])) if a != b), len(texts[0]))
        if image_at >= common or expanded[common + grown:] != texts[0][common:]:
            raise ValueError(f"the prompts of one image do not share the image's tokens as a prefix (judge "
                             f"{judge.id}): put the image before the text that differs between them")
        length = common + grown
        inputs = {key: value[:, :length] if torch.is_tensor(value) and value.shape == full["input_ids"].shape
                  else value for key, value in full.items()}
        inputs = type(full)(inputs).to(judge.device, dtype=judge.model.dtype)
        return cls(inputs, length, tuple(tuple(text[common:]) for text in texts))


class VLMJudge(Judge):
    """A chat VLM loaded by Hub id or local folder. ``max_entity_tokens`` caps the Wikipedia text put in the
    prompt (None: no cap); a cut text is flagged in the Judgement, never silent."""

    evidence = "probabilities"

    def __init__(self, model: str = DEFAULT_JUDGE, *, revision: str | None = None, device: str | None = None,
                 batch_size: int = 4, max_entity_tokens: int | None = 2048):
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float32
        if self.device.startswith("cuda"):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        try:
            self.processor = AutoProcessor.from_pretrained(model, revision=revision)
            network = AutoModelForImageTextToText.from_pretrained(model, revision=revision, dtype=dtype,
                                                                  device_map=self.device)
        except (OSError, ValueError, KeyError) as error:
            raise JudgeUnavailable(f"cannot load judge model {model!r}: "
                                   f"{textwrap.shorten(str(error), 240, placeholder=' ...')} "
                                   + how_to_provide_judge(model)) from None
        if not getattr(self.processor, "chat_template", None):
            raise JudgeUnavailable(f"judge model {model!r} has no chat template: use an instruction-tuned VLM")
        self.model = network.eval()
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"  # every row's next-token position is then the last column
        self.batch_size, self.max_entity_tokens = batch_size, max_entity_tokens
        commit = getattr(self.model.config, "_commit_hash", None)
        self.id = f"{model}@{commit or revision or 'local'}, {COMPUTATION}"
        self._added = [t.content for t in self.tokenizer.added_tokens_decoder.values()]
        self._answers: dict[tuple[str, tuple[str, ...]], tuple[Tokens, ...]] = {}
        accepted = inspect.signature(self.model.forward).parameters
        # transformers 5.24 names the key-value cache ``cache``, earlier releases ``past_key_values``
        self._cache_argument = "cache" if "cache" in accepted else "past_key_values"
        self.tokens_fed = 0  # token positions run through the language model, padding included

    # --- prompts ----------------------------------------------------------------------------------------------
    def render(self, user_text: str, system: str | None = None, answer_prefix: str = "") -> str:
        """The chat prompt (system, then the image and ``user_text``), opened for the assistant's answer."""
        messages = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
        messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": user_text}]})
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + answer_prefix

    def cut(self, text: str) -> tuple[str, bool]:
        """``text`` limited to ``max_entity_tokens`` tokens, and whether it was cut."""
        if self.max_entity_tokens is None:
            return text, False
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) <= self.max_entity_tokens:
            return text, False
        return self.tokenizer.decode(ids[:self.max_entity_tokens]), True

    def answer_tokens(self, prompt: str, answers: Sequence[str]) -> tuple[Tokens, ...]:
        """Each answer's tokens as they follow ``prompt``, tokenised in context (so that a tokenizer adding a
        word-start marker is handled). Added tokens (chat markup) are split off before anything else, so the
        context after the last one decides, and the result is cached per such tail. ValueError if the prompt's
        last token would merge with an answer."""
        cut = max((prompt.rfind(t) + len(t) for t in self._added if t in prompt), default=0)
        key = (prompt[cut:], tuple(answers))
        if key not in self._answers:
            tail = key[0]
            base = self.tokenizer.encode(tail, add_special_tokens=False)
            sequences = []
            for answer in answers:
                full = self.tokenizer.encode(tail + answer, add_special_tokens=False)
                if full[:len(base)] != base:
                    raise ValueError(f"the prompt's end {tail[-20:]!r} merges with answer {answer!r} when tokenised; "
                                     "end the answer prefix differently")
                sequences.append(tuple(full[len(base):]))
            self._answers[key] = tuple(sequences)
        return self._answers[key]

    # --- the core ---------------------------------------------------------------------------------------------
    def answer_distribution(self, images: Sequence[Image.Image], prompts: Sequence[str],
                            answers: Sequence[str]) -> np.ndarray:
        """(B, len(answers)) constrained-decoding probabilities of ``answers`` after each (image, prompt).

        An image pays once for what its prompts share (``SharedPrefix``): rows holding the same image object are
        one group; the tokens its prompts have in common (the system text, the image, and for CAIRE the entity
        text) run through the model once, into a key-value cache, and only each prompt's own tail runs after it,
        the tails batched ``batch_size`` rows at a time. A tail carries the tokens of the answer trie's deepest
        branching node with it, so every branching node's logits come from that one pass (causal attention:
        a position never sees the tokens after it). The values are the full prompt's up to rounding
        (tests/test_judges.py, ``test_judge_prefix_*``: within 1e-5 on the CPU in float32). The processor (on
        the CPU) prepares the next image on another thread while the model reads this one."""
        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} images but {len(prompts)} prompts")
        out = np.zeros((len(prompts), len(answers)))
        groups: dict[int, list[int]] = {}
        for i, image in enumerate(images):
            groups.setdefault(id(image), []).append(i)
        # Every prompt's answer tokens before the processor's thread starts: a fast tokenizer is not to be used
        # from two threads at once.
        sequences = [self.answer_tokens(prompt, answers) for prompt in prompts]
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-processor") as ahead:
            prefixes = ahead.map(lambda rows: SharedPrefix.of(self, images[rows[0]], [prompts[i] for i in rows]),
                                 groups.values())
            for rows, prefix in zip(groups.values(), prefixes):
                for i, p in zip(rows, self._shared_prefix_distributions(prefix, [sequences[i] for i in rows])):
                    out[i] = p
        return out

    @torch.inference_mode()
    def _shared_prefix_distributions(self, prefix: SharedPrefix, answers: Sequence[tuple[Tokens, ...]]
                                     ) -> list[np.ndarray]:
        """Per prompt of one image, the probabilities of its ``answers`` (token sequences) after ``prefix``."""
        cache = DynamicCache(config=self.model.config)
        self.model(**prefix.inputs, use_cache=True, logits_to_keep=1, **{self._cache_argument: cache})
        self.tokens_fed += prefix.length
        out: list[np.ndarray | None] = [None] * len(answers)
        by_answers: dict[tuple[Tokens, ...], list[int]] = {}
        for i, sequences in enumerate(answers):
            by_answers.setdefault(sequences, []).append(i)
        for sequences, members in by_answers.items():
            nodes = branching_nodes(sequences)
            # Each branching node read from one pass: a tail ends with the tokens of the deepest node on its path.
            deepest = [node for node in nodes if not any(o != node and o[:len(node)] == node for o in nodes)]
            for start in range(0, len(members), self.batch_size):
                chunk = members[start:start + self.batch_size]
                tails = [(i, path) for i in chunk for path in deepest]
                logits = self._tail_logits(cache, [prefix.tails[i] + path for i, path in tails],
                                           [len(prefix.tails[i]) - 1 for i, _ in tails])
                for i in chunk:
                    node_logits = {}
                    for (j, path), row in zip(tails, logits):
                        if j == i:
                            node_logits.update({node: row[len(node)] for node in nodes if path[:len(node)] == node})
                    out[i] = answer_probabilities(sequences, node_logits)
        return out

    def _tail_logits(self, prefix_cache, tails: list[Tokens], ends: list[int]) -> list[np.ndarray]:
        """Per tail, the next-token logits (K, V) at its positions ``end``, ``end + 1``, ... to its last token,
        with the tails run after the shared prefix held in ``prefix_cache`` (which is left as it was). Tails are
        padded at the end: a causal model's logits at a position ignore what follows it."""
        width = max(len(t) for t in tails)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(tails), width), pad, dtype=torch.long)
        for row, tail in enumerate(tails):
            ids[row, :len(tail)] = torch.tensor(tail, dtype=torch.long)
        cache = copy.deepcopy(prefix_cache)
        cache.batch_repeat_interleave(len(tails))
        positions = sorted({p for tail, end in zip(tails, ends) for p in range(end, len(tail))})
        keep = torch.tensor(positions, dtype=torch.long, device=self.device)
        logits = self.model(input_ids=ids.to(self.device), use_cache=True, **{self._cache_argument: cache},
                            logits_to_keep=keep).logits.float().cpu().numpy()
        self.tokens_fed += ids.numel()
        column = {p: c for c, p in enumerate(positions)}
        return [logits[row, [column[p] for p in range(end, len(tail))]]
                for row, (tail, end) in enumerate(zip(tails, ends))]

    # --- the judges -------------------------------------------------------------------------------------------
    def _entity_text(self, request: JudgeRequest) -> tuple[str | None, bool]:
        return self.cut(request.entity_text) if request.entity_text else (request.entity_text, False)

    def prompt(self, context: Context) -> str:
        """CAIRE's Fig. 9 chat prompt for one request, the entity text cut to ``max_entity_tokens``, opened after
        "Final Score: "."""
        request, rubric = context
        text, _ = self._entity_text(request)
        return self.render(caire_prompt(request.label, rubric, request.entity_name, text), CAIRE_SYSTEM,
                           CAIRE_ANSWER_PREFIX)

    def truncated(self, request: JudgeRequest) -> bool:
        return self._entity_text(request)[1]

    def produce_batch(self, images: Sequence[Image.Image], contexts: Sequence[Context]) -> list[np.ndarray]:
        """P(k | I, T, c, R) over each context's rubric levels (CAIRE Eq. 3), constrained to the level digits;
        contexts are grouped by rubric, whose levels are the answers."""
        out: list[np.ndarray | None] = [None] * len(contexts)
        by_rubric: dict = {}
        for i, (_, rubric) in enumerate(contexts):
            by_rubric.setdefault(rubric, []).append(i)
        for rubric, rows in by_rubric.items():
            prompts = [self.prompt(contexts[i]) for i in rows]
            answers = [str(s) for s in rubric.scores]
            probabilities = self.answer_distribution([images[i] for i in rows], prompts, answers)
            for i, p in zip(rows, probabilities):
                out[i] = p
        return out

    def p_yes_batch(self, images: Sequence[Image.Image], questions: Sequence[str]) -> np.ndarray:
        """P("Yes") renormalised over {"Yes", "No"}, per (image, question)."""
        prompts = [self.render(question) for question in questions]
        return self.answer_distribution(images, prompts, YES_NO)[:, 0]

    def p_yes(self, image: Image.Image, question: str) -> float:
        return float(self.p_yes_batch([image], [question])[0])

    def vqascore(self, image: Image.Image, text: str) -> float:
        """VQAScore of ``text`` for ``image``: P("Yes") to 'Does this figure show "{text}"? ...'."""
        return self.p_yes(image, vqascore_question(text))

    def viescore_batch(self, images: Sequence[Image.Image], prompts: Sequence[str], explicit_example: str = "",
                       implicit_example: str = "") -> list[Judgement]:
        """0-10 ratings (argmax over the 11 constrained answers) with their probabilities."""
        rendered = [self.render(viescore_prompt(p, explicit_example, implicit_example),
                                answer_prefix=VIESCORE_ANSWER_PREFIX) for p in prompts]
        probabilities = self.answer_distribution(images, rendered, VIESCORE_ANSWERS)
        return [Judgement(VIESCORE_LEVELS[int(np.argmax(p))], tuple(float(x) for x in p)) for p in probabilities]

    def viescore(self, image: Image.Image, prompt: str, explicit_example: str = "",
                 implicit_example: str = "") -> Judgement:
        return self.viescore_batch([image], [prompt], explicit_example, implicit_example)[0]
