"""Results published in the papers, as leaderboard rows marked ``provenance = 'reported'``.

Every number below is copied from the paper's table or text named in its
``source_table``; none is computed here. They are shown beside scored rows,
always with their citation, so that the leaderboard is informative before
anyone submits and scored models can be read against the published ones.
"""

from __future__ import annotations

from benchmark import citations, results
from benchmark.expectations import published
from benchmark.metrics import iconicity

# --- CRT, Table 1: CRA / VR / VR@k / CRT, per model, still and moving references ---------------
# CRA there is the share of references with at least one recognised image (the counts of the paper's Table 7
# divided by the number of references reproduce it), and CRT is Eq. 3 applied to the column means.
_CRT_TABLE_1 = {
    # model: {subset: (CRA, VR, VR@k, CRT)}
    "FLUX.1-schnell": {"still": (0.401, 0.108, 0.108, 0.358), "moving": (0.679, 0.245, 0.251, 0.512)},
    "Imagen 4": {"still": (0.623, 0.281, 0.244, 0.448), "moving": (0.816, 0.212, 0.216, 0.643)},
    "SD 2.1": {"still": (0.489, 0.263, 0.258, 0.361), "moving": (0.867, 0.289, 0.311, 0.617)},
    "SD3": {"still": (0.535, 0.165, 0.170, 0.447), "moving": (0.875, 0.281, 0.304, 0.629)},
    "SDXL": {"still": (0.572, 0.254, 0.239, 0.426), "moving": (0.684, 0.191, 0.187, 0.553)},
}
# The same metric names and labels as the scored iconicity metrics, so both sit in one table.
_CRT_METRICS = (
    (iconicity.RecognitionPerReference.name, iconicity.RecognitionPerReference.label, True),
    (iconicity.VisualReuse.name, iconicity.VisualReuse.label, False),
    ("vr_at_k", "VR@k, visual reuse on the references every compared model recognised", False),
    (*iconicity.CRT_FROM_MEANS, True),
)
_MODEL_IDS = {
    "FLUX.1-schnell": ("black-forest-labs/FLUX.1-schnell", "open"),
    "Imagen 4": ("Google Imagen 4 (API)", "closed"),
    "SD 2.1": ("stabilityai/stable-diffusion-2-1", "open"),
    "SD3": ("Stable Diffusion 3 (variant not stated)", "open"),
    "SDXL": ("stabilityai/stable-diffusion-xl-base-1.0", "open"),
    "Imagen 2": ("Google Imagen 2 (Vertex AI)", "closed"),
    "Playground": ("Playground (version not stated)", "open"),
    "Realistic Vision": ("Realistic Vision (version not stated)", "open"),
    "GPT-Image": ("OpenAI GPT-Image (API)", "closed"),
    "Imagen 3": ("Google Imagen 3 (Vertex AI)", "closed"),
    "SD-3.5-Large": ("stabilityai/stable-diffusion-3.5-large", "open"),
    "FLUX.1-dev": ("black-forest-labs/FLUX.1-dev", "open"),
}

# --- CUBE, Table 6: cultural diversity CD (quality-weighted Vendi, normalised; Eq. 3) -----------
_CUBE_MODELS = ("Imagen 2", "SDXL", "Playground", "Realistic Vision")
_CUBE_TABLE_6 = {
    # kernel (benchmark.metrics.vendi.KERNELS: continent (1,0,0), country (0,1,0), artifact (0,0,1), hierarchical
    # (1/2,1/2,0), uniform (1/3,1/3,1/3)): {concept: values in _CUBE_MODELS order}
    "continent": {"cuisine": (.08, .04, .07, .07), "landmarks": (.04, .06, .04, .05), "art": (.07, .042, .06, .05)},
    "country": {"cuisine": (.15, .11, .14, .13), "landmarks": (.12, .14, .07, .12), "art": (.13, .08, .12, .07)},
    "artifact": {"cuisine": (.24, .14, .23, .20), "landmarks": (.18, .18, .12, .18), "art": (.22, .18, .17, .14)},
    "hierarchical": {"cuisine": (.13, .09, .12, .10), "landmarks": (.10, .11, .06, .10), "art": (.11, .07, .10, .072)},
    "uniform": {"cuisine": (.19, .12, .19, .16), "landmarks": (.14, .15, .09, .12), "art": (.16, .12, .14, .10)},
}
# CUBE, Table 5: mean HPS-v2 quality q of the diversity images.
_CUBE_TABLE_5_Q = {"cuisine": (.27, .21, .29, .27), "landmarks": (.25, .22, .21, .23), "art": (.31, .30, .34, .33)}
# CUBE, Table 3: % of images raters from the country judged culturally relevant ("Yes"), all concepts.
_CUBE_COUNTRIES = ("India", "Japan", "Italy", "United States", "Brazil", "France", "Turkey", "Nigeria")
_CUBE_TABLE_3 = {
    "Imagen 2": (98.4, 90.8, 86.8, 95.0, 94.3, 95.2, 68.1, 73.6),
    "SDXL": (95.2, 84.4, 82.2, 99.2, 52.8, 96.0, 66.4, 86.1),
}

# CUBE, Table 4: mean consensus faithfulness and realism (1-5, human), per concept and country (_CUBE_COUNTRIES
# order); the table's standard deviations among the 3 raters are not a CI over prompts and are left out.
_CUBE_TABLE_4 = {
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

# --- CulturalFrames: the paper's human results (benchmark.expectations.published, each with its section).

# Images per prompt of each paper's reported results, where the paper states it: CRT n = 10 per title (Sec. 4);
# CUBE's diversity 80 per rephrasing (App. H.1, Tables 5 and 6). Others are recorded as not stated (null).
_PAPER_IMAGES = {(citations.CRT, "Table 1"): 10, (citations.CUBE, "Table 5"): 80, (citations.CUBE, "Table 6"): 80}


def paper_protocol(citation: str, table: str) -> dict:
    """The protocol of a reported row: the paper's own data, its images per prompt and its settings ("paper"),
    so that it is ranked only with rows of the same paper table, never with scored ones."""
    return results.protocol_columns({"dataset": f"as published in {citations.SHORT.get(citation, citation)}",
                             "images_per_prompt": _PAPER_IMAGES.get((citation, table)),
                             "metric_version": f"paper ({table})", "backbones": []})


def _row(model: str, track: str, metric: str, label: str, higher: bool, slice_: str, slice_value: str,
         value: float, citation: str, table: str) -> dict:
    model_id, model_type = _MODEL_IDS[model]
    return {"provenance": "reported", "model": model, "model_id": model_id, "model_type": model_type,
            "track": track, "metric": metric, "metric_label": label, "higher_is_better": higher,
            "slice": slice_, "slice_value": slice_value, "value": value, "citation": citation,
            "source_table": table}


def rows() -> list[dict]:
    """Every reported row, in the aggregate results schema (``benchmark.results.AGGREGATE``)."""
    out = []
    for model, subsets in _CRT_TABLE_1.items():
        for subset, values in subsets.items():
            for (metric, label, higher), value in zip(_CRT_METRICS, values):
                out.append(_row(model, "iconicity", metric, label, higher, "kind", subset, value,
                                citations.CRT, "Table 1"))
    for kernel, concepts in _CUBE_TABLE_6.items():
        for concept, values in concepts.items():
            for model, value in zip(_CUBE_MODELS, values):
                out.append(_row(model, "diversity", f"cd_{kernel}",
                                f"Cultural diversity, HPS quality x Vendi / N, {kernel} kernel (Eq. 3)", True,
                                "concept", concept, value, citations.CUBE, "Table 6"))
    for concept, values in _CUBE_TABLE_5_Q.items():
        for model, value in zip(_CUBE_MODELS, values):
            out.append(_row(model, "diversity", "mean_hps_quality", "mean HPS-v2 quality q", True,
                            "concept", concept, value, citations.CUBE, "Table 5"))
    for model, values in _CUBE_TABLE_3.items():
        for country, value in zip(_CUBE_COUNTRIES, values):
            out.append(_row(model, "awareness", "human_relevance_yes_pct",
                            "% images judged culturally relevant by raters of the country (human)", True,
                            "country", country, value, citations.CUBE, "Table 3"))
    for criterion, cells in _CUBE_TABLE_4.items():
        for (concept, model), values in cells.items():
            for country, value in zip(_CUBE_COUNTRIES, values):
                out.append(_row(model, "awareness", f"human_{criterion}", f"mean {criterion}, 1-5 (human)", True,
                                "country_concept", f"{country} / {concept}", value, citations.CUBE, "Table 4"))
    for row in published.leaderboard_rows():
        model_id, model_type = _MODEL_IDS[row["model"]]
        out.append({**row, "model_id": model_id, "model_type": model_type})
    return [{**row, **paper_protocol(row["citation"], row["source_table"])} for row in out]
