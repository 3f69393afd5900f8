"""Judges (CAIRE, arXiv:2506.09109, Eq. 3; VQAScore; VIEScore): constrained decoding on a tiny random
Qwen2.5-VL built here, checked against the model's own logits; the probe baseline on the tiny open_clip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmark.judges.base import CAIRE_RUBRIC, JudgeRequest, JudgeUnavailable
from benchmark.judges.constrained import answer_probabilities, branching_nodes, restricted_softmax
from benchmark.judges.prompts import caire_prompt, viescore_prompt, vqascore_question
from culturelens.testing.tiny_qwen import model_next_logits, random_image, token_id

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def judge(tiny_qwen_vl):
    from benchmark.judges.vlm import VLMJudge

    return VLMJudge(str(tiny_qwen_vl), device="cpu", batch_size=4, max_entity_tokens=64)


# --- constrained decoding, by hand ---------------------------------------------------------------------------
def test_restricted_softmax_uses_only_the_allowed_tokens():
    logits = np.array([5.0, 0.0, np.log(3.0), 100.0])
    assert restricted_softmax(logits, [1, 2]) == pytest.approx([0.25, 0.75])


def test_answer_probabilities_multiply_along_the_trie():
    # "1]" = (1, 9), "10]" = (1, 0, 9), "2]" = (2, 9): branching at the root and after "1" only
    answers = [(1, 9), (1, 0, 9), (2, 9)]
    assert branching_nodes(answers) == {(): (1, 2), (1,): (9, 0)}
    root = np.full(12, -50.0)
    root[[1, 2]] = [np.log(3.0), 0.0]  # P(1) = 3/4, P(2) = 1/4
    after_one = np.full(12, -50.0)
    after_one[[9, 0]] = [0.0, np.log(4.0)]  # P("]" | 1) = 1/5, P("0" | 1) = 4/5
    p = answer_probabilities(answers, {(): root, (1,): after_one})
    assert p == pytest.approx([0.75 * 0.2, 0.75 * 0.8, 0.25])


def test_answers_that_prefix_each_other_are_refused():
    with pytest.raises(ValueError, match="prefix"):
        branching_nodes([(1,), (1, 0)])


# --- prompts --------------------------------------------------------------------------------------------------
def test_caire_prompt_carries_entity_text_label_and_rubric():
    text = caire_prompt("Ukrainian", CAIRE_RUBRIC, "Pysanka", "A pysanka is a decorated egg")
    assert "closely associated with the image: Pysanka." in text
    assert "from Wikipedia: A pysanka is a decorated egg." in text
    assert "how culturally relevant the image is to Ukrainian:" in text
    assert "* 4 — Relevant: The content reflects" in text and text.endswith("a single number ONLY.")
    baseline = caire_prompt("Ukrainian", CAIRE_RUBRIC)
    assert "Wikipedia" not in baseline and "Assign a score from 1 to 5" in baseline
    with pytest.raises(ValueError, match="entity_name"):
        JudgeRequest(random_image(0), "Ukrainian", entity_text="text without a name")


def test_viescore_and_vqascore_prompts_follow_the_papers():
    assert vqascore_question("a tea ceremony") == 'Does this figure show "a tea ceremony"? Please answer yes or no.'
    text = viescore_prompt("A family dinner in Poland")
    assert text.endswith("Text Prompt: A family dinner in Poland") and "implicit elements may include" not in text
    assert "implicit elements may include:\n\npierogi" in viescore_prompt("x", implicit_example="pierogi")


# --- the VLM judge on a tiny random model ---------------------------------------------------------------------
def test_caire_score_is_the_argmax_of_the_digit_logits_and_always_on_the_scale(judge):
    labels = ["Japanese", "Yoruba", "Polish", "Mexican"]
    requests = [JudgeRequest(random_image(i, size=40 + 8 * (i % 3)), labels[i % 4],
                             *((f"Entity {i}", "word " * (i * 7)) if i % 2 else (None, None)))
                for i in range(16)]
    judgements = judge.judge_batch(requests)
    digits = [token_id(judge, str(k)) for k in range(1, 6)]
    unconstrained_digit = []
    for request, j in zip(requests, judgements):
        assert j.score in (1, 2, 3, 4, 5)
        assert sum(j.probabilities) == pytest.approx(1.0) and min(j.probabilities) >= 0
        assert j.score == int(np.argmax(j.probabilities)) + 1
        text, _ = judge.cut(request.entity_text) if request.entity_text else (None, False)
        prompt = judge.render(caire_prompt(request.label, CAIRE_RUBRIC, request.entity_name, text),
                              "You are an expert in evaluating the cultural relevance of images.", "Final Score: ")
        logits = model_next_logits(judge, request.image.convert("RGB"), prompt)
        expected = np.exp(logits[digits] - logits[digits].max())
        assert j.probabilities == pytest.approx(expected / expected.sum(), abs=1e-4)
        unconstrained_digit.append(int(np.argmax(logits)) in digits)
    assert not all(unconstrained_digit)  # unconstrained, the random model would answer something else
    assert np.ptp([j.probabilities for j in judgements], axis=0).max() > 1e-3  # the image and prompt matter


def test_batched_judging_equals_one_at_a_time(judge):
    requests = [JudgeRequest(random_image(40 + i), "Brazilian", f"E{i}", "samba " * (3 + 9 * i)) for i in range(3)]
    together = judge.judge_batch(requests)
    alone = [judge.judge(r.image, r.entity_text, CAIRE_RUBRIC, r.label, entity_name=r.entity_name) for r in requests]
    for a, b in zip(together, alone):
        assert a.score == b.score and a.probabilities == pytest.approx(b.probabilities, abs=1e-4)
    assert judge.score(requests[0].image, requests[0].entity_text, CAIRE_RUBRIC, "Brazilian",
                       entity_name="E0") == alone[0].score


def test_long_entity_text_is_cut_and_flagged(judge):
    j = judge.judge(random_image(1), "x" * 500, CAIRE_RUBRIC, "Japanese", entity_name="Long")
    assert j.truncated
    assert not judge.judge(random_image(1), "short", CAIRE_RUBRIC, "Japanese", entity_name="Short").truncated


def test_p_yes_is_the_yes_no_softmax(judge):
    yes, no = token_id(judge, "Yes"), token_id(judge, "No")
    for seed in range(4):
        image, question = random_image(seed), vqascore_question(f"a festival number {seed}")
        p = judge.p_yes(image, question)
        logits = model_next_logits(judge, image, judge.render(question))
        assert 0.0 <= p <= 1.0
        assert p == pytest.approx(1.0 / (1.0 + np.exp(logits[no] - logits[yes])), abs=1e-4)
    assert judge.vqascore(image, "a festival number 3") == pytest.approx(p)


def test_viescore_rates_0_to_10_with_two_tokens_for_10(judge):
    digits = [token_id(judge, str(k)) for k in range(10)]
    for seed in range(3):
        image, prompt = random_image(seed), f"A wedding in Chile, scene {seed}"
        j = judge.viescore(image, prompt)
        assert j.score in range(11) and len(j.probabilities) == 11
        assert sum(j.probabilities) == pytest.approx(1.0)
        rendered = judge.render(viescore_prompt(prompt), answer_prefix="output score = [")
        logits = model_next_logits(judge, image, rendered)
        first = restricted_softmax(logits, digits)  # the first digit; "1" then splits between "1]" and "10]"
        assert j.probabilities[1] + j.probabilities[10] == pytest.approx(first[1], abs=1e-4)
        assert [j.probabilities[k] for k in (0, *range(2, 10))] == pytest.approx(
            [first[k] for k in (0, *range(2, 10))], abs=1e-4)


# --- an image pays once for what its prompts share -------------------------------------------------------------
CUBE_COUNTRIES = ["Brazil", "France", "India", "Italy", "Japan", "Nigeria", "Turkey", "United States"]
PREFIX_TOLERANCE = 1e-5  # the shared prefix against a forward pass over each whole prompt, float32 on the CPU


def _counting(module) -> list:
    calls = []
    handle = module.register_forward_hook(lambda *_: calls.append(1))
    return calls, handle


def test_judge_prefix_relevance_equals_each_whole_prompt_for_the_eight_cube_countries(judge):
    """Two images x CUBE's 8 countries, each image linked to one entity whose text all its labels share: every
    probability equals the model's own over the whole prompt, and the vision tower runs once per image."""
    images = [random_image(70, size=56), random_image(71, size=84)]
    requests = [JudgeRequest(image, label, f"Entity {n}", "a stew of black beans with pork " * (3 + n))
                for n, image in enumerate(images) for label in CUBE_COUNTRIES]
    calls, handle = _counting(judge.model.model.visual)
    try:
        judgements = judge.judge_batch(requests)
    finally:
        handle.remove()
    assert len(calls) == 2  # today's path ran it 16 times, once per image-label
    digits = [token_id(judge, str(k)) for k in range(1, 6)]
    for request, j in zip(requests, judgements):
        whole = model_next_logits(judge, request.image, judge.prompt((request, CAIRE_RUBRIC)))
        assert j.probabilities == pytest.approx(restricted_softmax(whole, digits), abs=PREFIX_TOLERANCE)
    assert np.ptp([j.probabilities for j in judgements[:8]], axis=0).max() > 1e-3  # the label still matters


def test_judge_prefix_runs_the_shared_tokens_once_and_each_labels_tail_after_them(judge):
    """The token positions the language model runs for one image and 8 labels: the prompts' common tokens
    once (the image's expanded ones included), then each label's own tail, padded to the longest of its batch of
    4; against 8 whole prompts, one pass each, as before."""
    image = random_image(72, size=56)
    requests = [JudgeRequest(image, label, "Feijoada", "a stew of black beans with pork " * 4)
                for label in CUBE_COUNTRIES]
    prompts = [judge.prompt((r, CAIRE_RUBRIC)) for r in requests]
    whole = [judge.processor(text=[p], images=[image], return_tensors="pt")["input_ids"][0].tolist() for p in prompts]
    shared = next(k for k in range(len(whole[0])) if len({tuple(w[:k + 1]) for w in whole}) > 1)
    tails = [len(w) - shared for w in whole]
    expected = shared + 4 * max(tails[:4]) + 4 * max(tails[4:])
    before = judge.tokens_fed
    judge.judge_batch(requests)
    assert judge.tokens_fed - before == expected
    assert expected < sum(len(w) for w in whole)  # what 8 whole prompts cost


def test_judge_prefix_is_named_in_the_judge_id_so_a_full_prompt_cache_entry_is_not_read(judge, tmp_path):
    """Values computed over each whole prompt (the judge before the shared prefix) were cached under the
    model's id alone: the judge's id names its computation, so those entries miss and are computed again."""
    from benchmark.cache import EmbeddingCache, product_key
    from benchmark.features.producers import produce

    assert judge.id.endswith(", shared prefix")
    image = random_image(73)
    context = (JudgeRequest(None, "Japan", "Tea", "green tea"), CAIRE_RUBRIC)
    cache = EmbeddingCache(tmp_path / "products.sqlite")
    old_id = judge.id.removesuffix(", shared prefix")
    cache.put_many([(*product_key("sha-73", old_id, judge.prompt(context), "Japan"), np.full(5, 0.2))])
    fresh = produce(judge, [(0, context)], [image], ["sha-73"], cache)[0]
    assert not np.allclose(fresh, 0.2)
    assert fresh == pytest.approx(judge.judge(image, "green tea", CAIRE_RUBRIC, "Japan", entity_name="Tea")
                                  .probabilities, abs=PREFIX_TOLERANCE)


def test_a_missing_judge_model_is_a_clear_error():
    from benchmark.judges.vlm import VLMJudge

    with pytest.raises(JudgeUnavailable, match="culturelens-test/no-such-vlm.*save_pretrained"):
        VLMJudge("culturelens-test/no-such-vlm", device="cpu")


# --- the probe baseline on the tiny open_clip -----------------------------------------------------------------
def test_probe_picks_the_level_whose_probe_is_nearest(tiny_clip):
    import open_clip
    from safetensors.torch import load_file

    from benchmark.encoders import load_backbone
    from benchmark.judges.probe import ProbeJudge, probe_texts

    backbone = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    judge = ProbeJudge(backbone)
    assert probe_texts("Japanese")[0] == "This image is Not relevant to Japanese"
    assert probe_texts("Japanese")[4] == "This image is Highly relevant to Japanese"
    model = open_clip.create_model(tiny_clip.model)
    model.load_state_dict(load_file(tiny_clip.weights))
    model.eval()
    _, _, preprocess = open_clip.create_model_and_transforms(tiny_clip.model)
    tokenizer = open_clip.get_tokenizer(tiny_clip.model)
    requests = [JudgeRequest(random_image(s, size=64), label) for s in range(3) for label in ("Japanese", "Yoruba")]
    judgements = judge.judge_batch(requests)
    for request, j in zip(requests, judgements):
        with torch.no_grad():
            image = model.encode_image(preprocess(request.image)[None])
            texts = model.encode_text(tokenizer(probe_texts(request.label)))
        cosines = torch.nn.functional.cosine_similarity(image, texts).numpy()
        assert j.similarities == pytest.approx(cosines, abs=1e-5)
        assert j.score == int(np.argmax(cosines)) + 1 and j.probabilities is None


def test_probe_needs_a_text_encoder(tiny_dino):
    from benchmark.encoders import load_backbone
    from benchmark.judges.probe import ProbeJudge

    with pytest.raises(ValueError, match="no text encoder"):
        ProbeJudge(load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu"))
