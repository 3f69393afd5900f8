"""CulturalFrames (Nayak et al., arXiv:2506.08835), the expectations track's paper: its record and its human results,
as the rows the track shows and as plain records beside computed ones.

Copied from the text of the paper (the version in ``papers/culturalframes_expectations.txt``); nothing here is
computed. The paper has two tables only (Table 1: example prompts; Table 2: annotator demographics): every number
below is stated in the text of Sec. 4-6, which points to Fig. 3 (human scores per model), Fig. 5 (failure types) and
Fig. 7 (metric-human Spearman). Values shown only as bars in a figure (the quality correlations, and CLIPScore,
HPSv2, TIFA and VQAScore for every criterion) are not transcribed.

Statistic and column names match ``benchmark.expectations.human`` and ``benchmark.expectations.meta_eval``, so
reported and computed rows line up.
"""

from __future__ import annotations

from benchmark.papers import CULTURALFRAMES
from benchmark.track import PaperCorrelation, PaperModel, PaperRow, Papers


ALL = "all"
# The models as the paper names them (``benchmark.datasets.culturalframes.MODEL_NAMES`` maps the release's names).
MODELS = {m.name: m for m in (
    PaperModel("GPT-Image", "OpenAI GPT-Image (API)", "closed"),
    PaperModel("Imagen 3", "Google Imagen 3 (Vertex AI)", "closed"),
    PaperModel("SD-3.5-Large", "stabilityai/stable-diffusion-3.5-large", "open"),
    PaperModel("FLUX.1-dev", "black-forest-labs/FLUX.1-dev", "open"),
)}

# (model, statistic, value, where in the paper).
HUMAN = (
    ("GPT-Image", "mean_alignment", 0.85, "Sec. 5, Fig. 3 (prompts with an image from every model)"),
    ("Imagen 3", "mean_alignment", 0.79, "Sec. 5, Fig. 3 (prompts with an image from every model)"),
    ("SD-3.5-Large", "mean_alignment", 0.66, "Sec. 5, Fig. 3 (prompts with an image from every model)"),
    ("FLUX.1-dev", "mean_alignment", 0.63, "Sec. 5, Fig. 3 (prompts with an image from every model)"),
    # "ranged from 10% to 16%, with SD-3.5-Large ... the most and Flux the least": the range's endpoints.
    ("SD-3.5-Large", "stereotype_rate", 0.16, "Sec. 5 (upper end of the stated 10-16% range)"),
    ("FLUX.1-dev", "stereotype_rate", 0.10, "Sec. 5 (lower end of the stated 10-16% range)"),
    (ALL, "failure_rate", 0.44, "Sec. 5 and Abstract: ratings below 1"),
    (ALL, "explicit_only_share", 0.503, "Sec. 5, Fig. 5: share of failures"),
    (ALL, "implicit_only_share", 0.312, "Sec. 5, Fig. 5: share of failures"),
    (ALL, "both_share", 0.179, "Sec. 5, Fig. 5: share of failures"),
    (ALL, "explicit_share", 0.68, "Abstract and Sec. 7: explicit only + both"),
    (ALL, "implicit_share", 0.491, "Sec. 5: implicit only + both"),
)
# Krippendorff's alpha per criterion (Sec. 4). The paper does not state the level of measurement.
AGREEMENT = (("alignment", 0.37), ("quality", 0.28), ("overall", 0.36))
# Metric-human Spearman per criterion (Sec. 6, Fig. 7): (metric, criterion, value, where).
META_EVAL = (
    ("VIEScore (GPT-4o)", "alignment", 0.30, "Sec. 6, Fig. 7"),
    ("VIEScore (GPT-4o)", "overall", 0.31, "Sec. 6, Fig. 7"),
    ("VIEScore (GPT-4o), annotator instructions", "alignment", 0.32, "Sec. 6 ('explicit instructions'), Fig. 24"),
)
# Human-human Spearman (the paper's 'Human' bar; how it is formed is not stated), Sec. 6, Fig. 7.
CEILINGS = {"alignment": 0.38, "overall": 0.42}
# Spearman between human criteria, over all ratings (Sec. 4): (criterion, other, value).
CRITERION_CORRELATIONS = (("overall", "alignment", 0.68), ("overall", "quality", 0.45),
                          ("overall", "stereotype", -0.21))
# Size of the study (Abstract, Sec. 4).
COUNTS = {"prompts": 983, "images": 3637, "ratings": 10911, "countries": 10, "domains": 5, "models": 4,
          "imagen3_refused_prompts": 290, "gpt_image_refused_prompts": 5}
# Mean 1-5 coverage of human concerns by VIEScore's explanations, judged by an LLM (Sec. 6).
EXPLANATION_COVERAGE = (("VIEScore (GPT-4o)", 2.19), ("VIEScore (GPT-4o), annotator instructions", 2.37))

# The per-model statistics as leaderboard rows: (metric, label, higher is better).
_LEADERBOARD = {"mean_alignment": ("human_alignment", "mean human alignment score, 0-1 (human)", True),
                "stereotype_rate": ("human_stereotype_rate", "share of images raters judged stereotypical (human)",
                                    False)}

EXPECTATIONS = Papers(
    CULTURALFRAMES,
    rows=tuple(PaperRow(MODELS[model], *_LEADERBOARD[statistic], value, source)
               for model, statistic, value, source in HUMAN if model != ALL),
    correlations=(
        *(PaperCorrelation(metric, criterion, value, CEILINGS.get(criterion), source)
          for metric, criterion, value, source in META_EVAL),
        *(PaperCorrelation("human (another rater)", criterion, value, value, "Sec. 6, Fig. 7 ('Human')")
          for criterion, value in CEILINGS.items())))


def human_rows() -> list[dict]:
    """Rows in the columns of ``human.human_aggregates`` (CIs and counts unknown: None)."""
    return [{"model": model, "country": ALL, "domain": ALL, "statistic": statistic, "value": value,
             "ci_low": None, "ci_high": None, "n_images": None, "n_ratings": None, **EXPECTATIONS.reported(source)}
            for model, statistic, value, source in HUMAN]


def agreement_rows() -> list[dict]:
    """Rows in the columns of ``human.agreement``."""
    return [{"criterion": criterion, "level_of_measurement": None, "alpha": value, "n_images": COUNTS["images"],
             "n_ratings": COUNTS["ratings"], **EXPECTATIONS.reported("Sec. 4, 'Inter-rater Agreement'")}
            for criterion, value in AGREEMENT]


def ranking_rows() -> list[dict]:
    """The Metrics tab's rows of the paper, in the columns of ``meta_eval.meta_evaluate``'s ranking table."""
    return [EXPECTATIONS.correlation_record(c) for c in EXPECTATIONS.correlations]


def leaderboard_rows() -> list[dict]:
    """The expectations track's rows of the paper, in the leaderboard's aggregate schema (``results.AGGREGATE``)
    less the track and protocol columns."""
    return [EXPECTATIONS.record(row) for row in EXPECTATIONS.rows]
