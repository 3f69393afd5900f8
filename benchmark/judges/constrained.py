"""Constrained decoding over a closed set of answers: the probability of each answer when the model may only
emit one of them.

An answer is a token sequence (``"10]"`` may be two or three tokens); the answers form a trie. Constrained
decoding renormalises the next-token distribution over the children allowed at each node, so

    P(answer) = prod_t  exp(z_t[a_t]) / sum_{u in children(a_<t)} exp(z_t[u])

with z_t the next-token logits after the prompt and a_<t. A node with one child contributes 1, so only the
branching nodes need a forward pass: one for single-token answers (CAIRE's digits 1..5, Eq. 3 of Yayavaram et
al., arXiv:2506.09109; VQAScore's Yes/No), two for 0..10 under a one-digit-per-token tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Tokens = tuple[int, ...]


def restricted_softmax(logits: np.ndarray, token_ids: Sequence[int]) -> np.ndarray:
    """softmax of ``logits[..., token_ids]`` alone: (..., V) -> (..., len(token_ids)), each row summing to 1."""
    z = np.asarray(logits, dtype=np.float64)[..., list(token_ids)]
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def branching_nodes(answers: Sequence[Tokens]) -> dict[Tokens, Tokens]:
    """The trie's prefixes with two or more continuations -> those continuations (first-seen order).

    ValueError if an answer is empty, repeated, or a prefix of another (then "1" could stop or go on to "10":
    give the answers a common terminator, e.g. "1]" and "10]").
    """
    answers = [tuple(a) for a in answers]
    if not answers or any(len(a) == 0 for a in answers):
        raise ValueError("constrained decoding needs at least one answer, and no answer may be empty")
    if len(set(answers)) != len(answers):
        raise ValueError(f"two answers tokenise identically: {answers}")
    for a in answers:
        for b in answers:
            if a != b and b[:len(a)] == a:
                raise ValueError(f"answer tokens {a} are a prefix of {b}: add a terminator to every answer")
    children: dict[Tokens, list[int]] = {}
    for a in answers:
        for t in range(len(a)):
            nxt = children.setdefault(a[:t], [])
            if a[t] not in nxt:
                nxt.append(a[t])
    return {prefix: tuple(nxt) for prefix, nxt in children.items() if len(nxt) > 1}


def answer_probabilities(answers: Sequence[Tokens], node_logits: Mapping[Tokens, np.ndarray]) -> np.ndarray:
    """P(answer) under constrained decoding, from the next-token logits at each branching node.

    ``node_logits[prefix]``: (V,) or (B, V) logits after the prompt followed by ``prefix``, for every key of
    ``branching_nodes(answers)``. Returns (len(answers),) or (B, len(answers)); rows sum to 1.
    """
    nodes = branching_nodes(answers)
    missing = [p for p in nodes if p not in node_logits]
    if missing:
        raise ValueError(f"no logits for branching prefix(es) {missing}")
    conditional = {prefix: restricted_softmax(node_logits[prefix], nxt) for prefix, nxt in nodes.items()}
    columns = []
    for answer in answers:
        p = 1.0
        for t in range(len(answer)):
            prefix = tuple(answer[:t])
            if prefix in nodes:
                p = p * conditional[prefix][..., nodes[prefix].index(answer[t])]
        columns.append(np.broadcast_to(p, next(iter(conditional.values()))[..., 0].shape) if conditional
                       else np.asarray(p))
    return np.stack(columns, axis=-1)
