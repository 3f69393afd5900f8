"""CRT (De Rosa Palmini & Cetinic, arXiv:2511.11435), the iconicity track's paper: its record and Table 1."""

from __future__ import annotations

from benchmark.metrics.crt_protocol import CRA_REFERENCE, CRT_FROM_MEANS, VR
from benchmark.track import PaperModel, PaperRow


MODELS = {m.name: m for m in (
    PaperModel("FLUX.1-schnell", "black-forest-labs/FLUX.1-schnell", "open"),
    PaperModel("Imagen 4", "Google Imagen 4 (API)", "closed"),
    PaperModel("SD 2.1", "stabilityai/stable-diffusion-2-1", "open"),
    PaperModel("SD3", "Stable Diffusion 3 (variant not stated)", "open"),
    PaperModel("SDXL", "stabilityai/stable-diffusion-xl-base-1.0", "open"),
)}

# Table 1: CRA / VR / VR@k / CRT, per model, still and moving references. CRA there is the share of references
# with at least one recognised image (the counts of the paper's Table 7 divided by the number of references
# reproduce it), and CRT is Eq. 3 applied to the column means.
_TABLE_1 = {
    # model: {subset: (CRA, VR, VR@k, CRT)}
    "FLUX.1-schnell": {"still": (0.401, 0.108, 0.108, 0.358), "moving": (0.679, 0.245, 0.251, 0.512)},
    "Imagen 4": {"still": (0.623, 0.281, 0.244, 0.448), "moving": (0.816, 0.212, 0.216, 0.643)},
    "SD 2.1": {"still": (0.489, 0.263, 0.258, 0.361), "moving": (0.867, 0.289, 0.311, 0.617)},
    "SD3": {"still": (0.535, 0.165, 0.170, 0.447), "moving": (0.875, 0.281, 0.304, 0.629)},
    "SDXL": {"still": (0.572, 0.254, 0.239, 0.426), "moving": (0.684, 0.191, 0.187, 0.553)},
}
# The same metric names and labels as the scored iconicity metrics, so both sit in one table.
_COLUMNS = (
    (*CRA_REFERENCE, True),
    (*VR, False),
    ("vr_at_k", "VR@k, visual reuse on the references every compared model recognised", False),
    (*CRT_FROM_MEANS, True),
)
# Sec. 4: n = 10 images per title.
TABLE_1 = tuple(PaperRow(MODELS[model], metric, label, higher, value, "Table 1", "kind", subset, images_per_prompt=10)
                for model, subsets in _TABLE_1.items() for subset, values in subsets.items()
                for (metric, label, higher), value in zip(_COLUMNS, values))
