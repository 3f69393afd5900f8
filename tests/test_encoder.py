"""The open_clip loading code, run on a tiny random CLIP saved in the test (no downloads)."""

from __future__ import annotations

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from benchmark.encoders.open_clip import ClipEncoder
from benchmark.encoders.spec import BackboneUnavailable, ClipSpec


def test_encoder_loads_the_checkpoint_it_is_given(tiny_clip):
    encoder = ClipEncoder(tiny_clip, device="cpu")
    assert encoder.revision.startswith("sha256:") and encoder.spec.id == f"open_clip:{tiny_clip.model}:tiny-clip.safetensors"
    # Independent reference: a fresh model of the same architecture with the saved weights loaded by hand.
    reference = open_clip.create_model(tiny_clip.model)
    reference.load_state_dict(load_file(tiny_clip.pretrained))
    reference.eval()
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (80, 80, 3), dtype=np.uint8))
    pixels = encoder.preprocess(image).unsqueeze(0)
    with torch.no_grad():
        expected = torch.nn.functional.normalize(reference.encode_image(pixels), dim=-1).numpy()
        tokens = open_clip.get_tokenizer(tiny_clip.model)(["a photo of jollof rice"])
        expected_text = torch.nn.functional.normalize(reference.encode_text(tokens), dim=-1).numpy()
    assert encoder.encode_images(pixels) == pytest.approx(expected, abs=1e-5)
    text, truncated = encoder.encode_texts(["a photo of jollof rice"])
    assert text == pytest.approx(expected_text, abs=1e-5) and truncated == [False]
    assert np.linalg.norm(text, axis=1) == pytest.approx([1.0])


def test_long_prompts_are_flagged_as_truncated(tiny_clip):
    encoder = ClipEncoder(tiny_clip, device="cpu")
    _, truncated = encoder.encode_texts(["short prompt", "a very long prompt " * 30])
    assert truncated == [False, True]


def test_a_missing_checkpoint_is_a_clear_error_naming_the_model_and_the_fix(tiny_clip, tmp_path):
    spec = ClipSpec(tiny_clip.model, str(tmp_path / "absent.safetensors"), tiny_clip.config)
    with pytest.raises(BackboneUnavailable) as error:
        ClipEncoder(spec)
    message = str(error.value)
    assert tiny_clip.model in message and "absent.safetensors" in message and "--clip-pretrained" in message


def test_unknown_architectures_and_tags_are_clear_errors():
    with pytest.raises(BackboneUnavailable, match="no model named 'No-Such-CLIP'"):
        ClipEncoder(ClipSpec("No-Such-CLIP", "openai"))
    with pytest.raises(BackboneUnavailable, match="no pretrained tag 'nonsense'"):
        ClipEncoder(ClipSpec("ViT-B-32", "nonsense"))


def test_default_backbone_offline_fails_with_instructions(monkeypatch):
    """ViT-B-32 'openai' is not in this machine's cache: a clear error, never a random-weights fallback."""
    with pytest.raises(BackboneUnavailable) as error:
        ClipEncoder(ClipSpec())
    assert "ViT-B-32" in str(error.value) and "Hugging Face cache" in str(error.value)
