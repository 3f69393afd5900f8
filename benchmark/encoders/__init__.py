"""Image and text backbones behind one registry. Production loads real checkpoints; tests build tiny
ones of the same classes and load them through the same code.

``spec`` says what exists (light, no torch); ``load_backbone`` loads one.
"""

from __future__ import annotations

from benchmark.encoders.spec import BackboneSpec, BackboneUnavailable


def load_backbone(backbone_id: str, registry: dict[str, BackboneSpec], device: str | None = None):
    """Load registry entry ``backbone_id``; BackboneUnavailable if it is unknown or cannot be loaded."""
    spec = registry.get(backbone_id)
    if spec is None:
        raise BackboneUnavailable(f"unknown backbone {backbone_id!r}; known: {', '.join(sorted(registry))}")
    if spec.family == "open_clip":
        from benchmark.encoders.open_clip import OpenClipBackbone

        return OpenClipBackbone(backbone_id, spec, device)
    if spec.family == "dreamsim":
        from benchmark.encoders.dreamsim import DreamSimBackbone

        return DreamSimBackbone(backbone_id, spec, device)
    from benchmark.encoders.hf_vision import HFVisionBackbone

    return HFVisionBackbone(backbone_id, spec, device)
