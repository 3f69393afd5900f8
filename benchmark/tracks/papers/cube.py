"""CUBE (Kannen et al., arXiv:2407.06863), the paper of the awareness and diversity tracks: its record, the human
judgements of Tables 3 and 4 (awareness) and the diversity of Tables 5 and 6."""

from __future__ import annotations

from benchmark.track import PaperModel, PaperRow


MODELS = {m.name: m for m in (
    PaperModel("Imagen 2", "Google Imagen 2 (Vertex AI)", "closed"),
    PaperModel("SDXL", "stabilityai/stable-diffusion-xl-base-1.0", "open"),
    PaperModel("Playground", "Playground (version not stated)", "open"),
    PaperModel("Realistic Vision", "Realistic Vision (version not stated)", "open"),
)}
COUNTRIES = ("India", "Japan", "Italy", "United States", "Brazil", "France", "Turkey", "Nigeria")
# Images per prompt behind Tables 5 and 6: 80 per rephrasing (App. H.1). Tables 3 and 4 do not state theirs.
DIVERSITY_IMAGES = 80

# --- Table 6: cultural diversity CD (quality-weighted Vendi, normalised; Eq. 3) -------------------------------
_DIVERSITY_MODELS = ("Imagen 2", "SDXL", "Playground", "Realistic Vision")
_TABLE_6 = {
    # kernel (benchmark.metrics.vendi.KERNELS: continent (1,0,0), country (0,1,0), artifact (0,0,1), hierarchical
    # (1/2,1/2,0), uniform (1/3,1/3,1/3)): {concept: values in _DIVERSITY_MODELS order}
    "continent": {"cuisine": (.08, .04, .07, .07), "landmarks": (.04, .06, .04, .05), "art": (.07, .042, .06, .05)},
    "country": {"cuisine": (.15, .11, .14, .13), "landmarks": (.12, .14, .07, .12), "art": (.13, .08, .12, .07)},
    "artifact": {"cuisine": (.24, .14, .23, .20), "landmarks": (.18, .18, .12, .18), "art": (.22, .18, .17, .14)},
    "hierarchical": {"cuisine": (.13, .09, .12, .10), "landmarks": (.10, .11, .06, .10), "art": (.11, .07, .10, .072)},
    "uniform": {"cuisine": (.19, .12, .19, .16), "landmarks": (.14, .15, .09, .12), "art": (.16, .12, .14, .10)},
}
# Table 5: mean HPS-v2 quality q of the diversity images.
_TABLE_5_Q = {"cuisine": (.27, .21, .29, .27), "landmarks": (.25, .22, .21, .23), "art": (.31, .30, .34, .33)}

# --- Table 3: % of images raters from the country judged culturally relevant ("Yes"), all concepts ------------
_TABLE_3 = {
    "Imagen 2": (98.4, 90.8, 86.8, 95.0, 94.3, 95.2, 68.1, 73.6),
    "SDXL": (95.2, 84.4, 82.2, 99.2, 52.8, 96.0, 66.4, 86.1),
}
# Table 4: mean consensus faithfulness and realism (1-5, human), per concept and country (COUNTRIES order); the
# table's standard deviations among the 3 raters are not a CI over prompts and are left out.
_TABLE_4 = {
    "faithfulness": {
        ("cuisine", "Imagen 2"): (2.8, 2.4, 2.6, 3.4, 1.9, 3.1, 2.2, 2.7),
        ("cuisine", "SDXL"): (2.1, 1.8, 2.2, 3.7, 1.5, 2.8, 1.8, 2.1),
        ("landmarks", "Imagen 2"): (3.6, 2.2, 2.6, 3.8, 2.5, 4.0, 3.6, 2.4),
        ("landmarks", "SDXL"): (2.7, 2.0, 2.2, 3.3, 2.5, 4.0, 3.0, 1.9),
        ("art", "Imagen 2"): (3.5, 2.8, 4.2, 3.3, 2.9, 3.7, 2.5, 2.1),
        ("art", "SDXL"): (3.2, 2.0, 3.0, 3.9, 2.2, 3.2, 2.1, 2.0),
    },
    "realism": {
        ("cuisine", "Imagen 2"): (4.2, 2.0, 3.2, 2.2, 4.4, 3.4, 2.4, 3.3),
        ("cuisine", "SDXL"): (3.6, 1.4, 2.2, 1.9, 2.1, 2.8, 2.2, 3.3),
        ("landmarks", "Imagen 2"): (3.8, 1.7, 2.1, 2.4, 2.5, 3.2, 2.7, 2.9),
        ("landmarks", "SDXL"): (3.7, 1.5, 2.7, 2.1, 3.5, 3.9, 2.5, 3.6),
        ("art", "Imagen 2"): (3.4, 2.3, 2.6, 1.3, 2.4, 1.9, 1.6, 2.2),
        ("art", "SDXL"): (2.8, 1.4, 1.6, 1.4, 1.3, 2.1, 1.6, 3.0),
    },
}

DIVERSITY = (
    *(PaperRow(MODELS[model], f"cd_{kernel}", f"Cultural diversity, HPS quality x Vendi / N, {kernel} kernel (Eq. 3)",
               True, value, "Table 6", "concept", concept, DIVERSITY_IMAGES)
      for kernel, concepts in _TABLE_6.items() for concept, values in concepts.items()
      for model, value in zip(_DIVERSITY_MODELS, values)),
    *(PaperRow(MODELS[model], "mean_hps_quality", "mean HPS-v2 quality q", True, value, "Table 5", "concept", concept,
               DIVERSITY_IMAGES)
      for concept, values in _TABLE_5_Q.items() for model, value in zip(_DIVERSITY_MODELS, values)),
)
AWARENESS = (
    *(PaperRow(MODELS[model], "human_relevance_yes_pct",
               "% images judged culturally relevant by raters of the country (human)", True, value, "Table 3",
               "country", country)
      for model, values in _TABLE_3.items() for country, value in zip(COUNTRIES, values)),
    *(PaperRow(MODELS[model], f"human_{criterion}", f"mean {criterion}, 1-5 (human)", True, value, "Table 4",
               "country_concept", f"{country} / {concept}")
      for criterion, cells in _TABLE_4.items() for (concept, model), values in cells.items()
      for country, value in zip(COUNTRIES, values)),
)
