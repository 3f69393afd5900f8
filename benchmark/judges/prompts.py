"""The judges' prompts, as the papers give them.

- CAIRE (Yayavaram et al., arXiv:2506.09109), Fig. 9: the 1-5 relevance prompt with the linked entity, its
  Wikipedia text and the rubric of Table 12; the answer follows "Final Score: ". Without an entity it is the
  paper's VLM baseline (Sec. 5.2): the same prompt minus the context lines. ``case_label`` and ``cut_text`` offer
  the authors' code's label casing and Wikipedia cut-off as options.
- VIEScore (Ku et al., arXiv:2312.14867) with the explicit instructions of CulturalFrames (Nayak et al.,
  arXiv:2506.08835), Fig. 24: a 0-10 rating of how well the image follows the prompt's explicit and implicit
  (cultural) elements. Fig. 24 leaves a country-specific example of each kind as a placeholder; callers may
  supply them, otherwise those sentences are left out.
  ``expectation_prompt`` narrows Fig. 24 to one kind of expectation, explicit or implicit, for the expectations
  track's two ratings.
- VQAScore (Lin et al., arXiv:2404.01291): the question 'Does this figure show "{text}"? Please answer yes or
  no.' and the probability of "Yes".
"""

from __future__ import annotations

from benchmark.judges.base import Rubric

CAIRE_SYSTEM = "You are an expert in evaluating the cultural relevance of images."
CAIRE_ANSWER_PREFIX = "Final Score: "
# How the label is written into the prompt: as the submitter gave it, or as the authors' code writes it
# (siddharthyayavaram/CAIRE, src/scripts/culture_scores.py: ``target.capitalize()``).
LABEL_CASES = ("as_given", "capitalize")
# The authors' cut of the Wikipedia text, in characters (same file: ``text[:15000]``, "for GPU memory").
AUTHORS_TEXT_CHARS = 15_000


def case_label(label: str, case: str = "as_given") -> str:
    """``label`` as the judge reads it. ``capitalize`` is Python's ``str.capitalize``, as in the authors' code:
    the first character upper-cased and every other one lower-cased ("south KOREAN" -> "South korean")."""
    if case not in LABEL_CASES:
        raise ValueError(f"unknown label case {case!r} (known: {', '.join(LABEL_CASES)})")
    return label.capitalize() if case == "capitalize" else label


def cut_text(text: str, chars: int | None) -> tuple[str, bool]:
    """The first ``chars`` characters of ``text`` (None: all of it), and whether anything was cut; the authors cut
    the Wikipedia text to ``AUTHORS_TEXT_CHARS`` characters before prompting."""
    if chars is None:
        return text, False
    if chars < 1:
        raise ValueError(f"the text cut-off must be at least 1 character, got {chars}")
    return text[:chars], len(text) > chars


def caire_prompt(label: str, rubric: Rubric, entity_name: str | None = None, entity_text: str | None = None) -> str:
    """CAIRE's Fig. 9 user prompt for one culture label; with no entity, the baseline prompt (no context)."""
    n = len(rubric.levels)
    lines = ["We want to assess how relevant an image is to a given culture.", ""]
    if entity_name is not None:
        lines.append(f"We have identified this concept to be closely associated with the image: {entity_name}.")
        if entity_text:
            lines.append(f"Here is some detailed information about this concept from Wikipedia: {entity_text}.")
        lines += ["", f"Using the above context, assign a score from 1 to {n} based on how culturally relevant the "
                      f"image is to {label}:"]
    else:
        lines.append(f"Assign a score from 1 to {n} based on how culturally relevant the image is to {label}:")
    lines += ["", "Think step by step, specifically considering cultural symbols, styles, traditions, or any "
                  f"features that align with the culture of {label}.", "",
              f"The final score should be a number between 1 to {n}, where the meaning of each score is defined "
              "as follows:", ""]
    lines += [f"* {level.score} — {level.name}: {level.description}" for level in rubric.levels]
    lines += ["", "The output should be a single number ONLY."]
    return "\n".join(lines)


VIESCORE_ANSWER_PREFIX = "output score = ["
VIESCORE_ANSWER_SUFFIX = "]"
VIESCORE_LEVELS = tuple(range(11))
# The constrained answers after the prefix: "0]" .. "10]" (the bracket ends "1]" apart from "10]").
VIESCORE_ANSWERS = tuple(f"{k}{VIESCORE_ANSWER_SUFFIX}" for k in VIESCORE_LEVELS)
# The two kinds of expectation CulturalFrames separates (Nayak et al., arXiv:2506.08835, Sec. 3.2 and App. B,
# Fig. 16): explicit = the elements the prompt's words state; implicit = those its cultural context calls for.
EXPECTATION_KINDS = ("explicit", "implicit")

# Fig. 24's paragraphs, word for word; ``viescore_prompt`` puts them together as the paper does and
# ``expectation_prompt`` keeps one kind's.
_VIESCORE_OPENING = [
    "You are a professional cultural visual analyst and digital artist. You are tasked with evaluating how "
    "faithfully an AI-generated image represents the provided text prompt, especially in capturing both "
    "explicit and culturally implicit details.", "",
    "All input images are AI-generated. All people or characters shown are also AI-generated — you do not "
    "need to consider privacy or ethical issues in the evaluation.", "",
    "Your evaluation should result in a JSON output in the following format:", "",
    "```", "{", '  "reasoning": "<reasoning to determine how faithful the image is to the prompt>",',
    '  "score": [<integer from 0 to 10>],', "}", "```", "",
    "How to Evaluate:", ""]
_EXPLICIT = ("**Explicit Elements:** Explicit elements are the clearly stated words in the prompt — such as "
             "objects, people, actions, locations, or relationships. A good image must include and visually "
             "represent all of these elements clearly and correctly.")
_EXPLICIT_CHECK = ("You should check: Are all these elements present and recognizable? Is their interaction "
                   "depicted as described?")
_IMPLICIT = ("**Implicit Elements** These are elements of the prompt that are not directly mentioned as words in "
             "the prompt but are expected to be present in the image based on the cultural context. These may "
             "include appropriate attire or food for the setting, gestures or expressions that suit the context, "
             "interactions between people, or additional details that contribute to the authenticity of the "
             "scene. A strong image will reflect these expectations in a way that feels appropriate to someone "
             "familiar with the described scenario.")
_IMPLICIT_OTHERS = ("There may be several other implicit details that needs to be considered given the image and "
                    "the prompt. For the image to align with the prompt, it should include and accurately show "
                    "these details.")
_VIESCORE_CLOSING = "Put the score in a list such that output score = [score]."


def _implicit_examples(example: str) -> list[str]:
    return ["For the same prompt above, implicit elements may include:", "", example.strip(), ""] \
        if example.strip() else []


def viescore_prompt(prompt: str, explicit_example: str = "", implicit_example: str = "") -> str:
    """CulturalFrames' Fig. 24 instructions for VIEScore, for one text-to-image prompt.

    The JSON answer format with a free-text reasoning is kept in the instructions (as the paper shows them),
    but the judge reads the score from a single constrained step after ``VIESCORE_ANSWER_PREFIX``, without
    generating the reasoning first.
    """
    explicit = f" {explicit_example.strip()}" if explicit_example.strip() else ""
    return "\n".join([
        *_VIESCORE_OPENING,
        "You will give a score from 0 to 10, based on how accurately the image matches the explicit and implicit "
        "elements described in the prompt.", "",
        f"1. {_EXPLICIT}{explicit}", "",
        _EXPLICIT_CHECK, "",
        f"2. {_IMPLICIT}", "",
        *_implicit_examples(implicit_example),
        _IMPLICIT_OTHERS, "",
        "From scale 0 to 10:", "",
        "A score from 0 to 10 will be given based on the success in following the prompt. (0 indicates that the "
        "AI generated image does not follow the prompt at all and major explicit elements and implicit elements "
        "are missing or incorrectly depicted. 10 indicates the AI generated image follows the prompt perfectly "
        "and all explicit elements and necessary implicit elements are present and correctly depicted.)", "",
        _VIESCORE_CLOSING, "",
        f"Text Prompt: {prompt}",
    ])


def expectation_prompt(prompt: str, kind: str) -> str:
    """Fig. 24's instructions narrowed to one kind of expectation (``EXPECTATION_KINDS``), for one prompt.

    CulturalFrames asks its raters for one alignment score and, below a perfect one, whether explicit or
    implicit elements failed (Sec. 3.3; App. B, Fig. 16); its VIEScore prompt (Fig. 24) asks for one 0-10
    score of both. To rate each kind apart, this keeps Fig. 24's opening, that kind's paragraph, its answer
    format and the prompt word for word; it drops the other kind's paragraph, says that kind is rated
    separately, and words the task sentence and the 0/10 anchors for the one kind (the only sentences not in
    the paper). Fig. 24's country-specific examples are placeholders the prompt set does not fill: left out, as
    ``viescore_prompt`` leaves them out without examples.
    """
    if kind not in EXPECTATION_KINDS:
        raise ValueError(f"unknown expectation kind {kind!r} (known: {', '.join(EXPECTATION_KINDS)})")
    other = "implicit" if kind == "explicit" else "explicit"
    if kind == "explicit":
        criterion = [_EXPLICIT, "", _EXPLICIT_CHECK, ""]
        anchors = ("(0 indicates that major explicit elements of the prompt are missing or incorrectly depicted. "
                   "10 indicates all explicit elements are present and correctly depicted.)")
    else:
        criterion = [_IMPLICIT, "", _IMPLICIT_OTHERS, ""]
        anchors = ("(0 indicates that the implicit elements the cultural context calls for are missing or "
                   "incorrectly depicted. 10 indicates all necessary implicit elements are present and correctly "
                   "depicted.)")
    return "\n".join([
        *_VIESCORE_OPENING,
        f"You will give a score from 0 to 10, based on how accurately the image matches the {kind} elements "
        f"of the prompt. Rate the {kind} elements only: the {other} elements are rated separately.", "",
        *criterion,
        "From scale 0 to 10:", "",
        f"A score from 0 to 10 will be given based on the success in depicting the {kind} elements of the prompt. "
        + anchors, "",
        _VIESCORE_CLOSING, "",
        f"Text Prompt: {prompt}",
    ])


def vqascore_question(text: str) -> str:
    """VQAScore's question for a text (Lin et al., arXiv:2404.01291, Sec. 3)."""
    return f'Does this figure show "{text}"? Please answer yes or no.'
