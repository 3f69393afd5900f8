"""Backbone loading code, run on tiny random models saved in the test (no downloads)."""

from __future__ import annotations

import json

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file
from transformers import AutoModel

from benchmark.encoders import load_backbone
from benchmark.encoders.base import grid_tiles
from benchmark.encoders.spec import (
    DEFAULT_REGISTRY,
    BackboneSpec,
    BackboneUnavailable,
    load_registry,
)


def _image(size=80, seed=0) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8))


def test_open_clip_backbone_loads_the_checkpoint_it_is_given(tiny_clip):
    backbone = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    assert backbone.revision.startswith("sha256:") and backbone.spec.uid.endswith(":tiny-clip.safetensors")
    # Independent reference: a fresh model of the same architecture with the saved weights loaded by hand.
    reference = open_clip.create_model(tiny_clip.model)
    reference.load_state_dict(load_file(tiny_clip.weights))
    reference.eval()
    pixels = backbone.prepare(_image(), "image").unsqueeze(0)
    with torch.no_grad():
        expected = torch.nn.functional.normalize(reference.encode_image(pixels), dim=-1).numpy()
        tokens = open_clip.get_tokenizer(tiny_clip.model)(["a photo of jollof rice"])
        expected_text = torch.nn.functional.normalize(reference.encode_text(tokens), dim=-1).numpy()
    assert backbone.embed(pixels) == pytest.approx(expected, abs=1e-5)
    text = backbone.embed_texts(["a photo of jollof rice"])
    assert text == pytest.approx(expected_text, abs=1e-5)
    assert np.linalg.norm(text, axis=1) == pytest.approx([1.0])


def test_dino_backbone_gives_global_and_4x4_grid_features(tiny_dino):
    backbone = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    image = _image(64)
    grid = backbone.embed(backbone.prepare(image, "grid").unsqueeze(0))
    assert grid.shape == (1, 16, 32)
    # Tile k of the grid is the k-th 16x16 crop, row by row, embedded as an image of its own.
    reference = AutoModel.from_pretrained(tiny_dino.model).eval()
    tile = image.crop((16, 0, 32, 16))  # row 0, column 1
    with torch.no_grad():
        pooled = reference(pixel_values=backbone.transform(tile).unsqueeze(0)).pooler_output
    assert grid[0, 1] == pytest.approx(torch.nn.functional.normalize(pooled, dim=-1)[0].numpy(), abs=1e-5)
    assert backbone.embed(backbone.prepare(image, "image").unsqueeze(0)).shape == (1, 32)
    with pytest.raises(BackboneUnavailable, match="no text encoder"):
        backbone.embed_texts(["x"])


def test_grid_tiles_cover_the_image_row_by_row():
    image = Image.fromarray(np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3))
    tiles = grid_tiles(image, 4)
    assert len(tiles) == 16 and all(t.size == (2, 2) for t in tiles)
    assert np.array_equal(np.asarray(tiles[5]), np.asarray(image)[2:4, 2:4])


def test_long_prompts_are_flagged_as_truncated(tiny_clip):
    backbone = load_backbone("clip", {"clip": tiny_clip}, device="cpu")
    assert backbone.truncated(["short prompt", "a very long prompt " * 30]) == [False, True]


def test_cache_keys_change_with_weights_and_preprocessing(tiny_clip, tiny_dino):
    clip = load_backbone("clip", {"clip": tiny_clip}, device="cpu")
    dino = load_backbone("dino", {"dino": tiny_dino}, device="cpu")
    assert clip.key != dino.key and clip.revision in clip.key and clip.preprocess_version in clip.key


def test_a_missing_checkpoint_is_a_clear_error_naming_the_backbone_and_the_fix(tiny_clip, tmp_path):
    spec = BackboneSpec("open_clip", tiny_clip.model, str(tmp_path / "absent.safetensors"), tiny_clip.config)
    with pytest.raises(BackboneUnavailable) as error:
        load_backbone("clip-vit-b-32", {"clip-vit-b-32": spec})
    message = str(error.value)
    assert "clip-vit-b-32" in message and "absent.safetensors" in message and "--backbones" in message
    with pytest.raises(BackboneUnavailable, match="cannot load backbone 'dinov2-base'"):
        load_backbone("dinov2-base", {"dinov2-base": BackboneSpec("hf_vision", str(tmp_path / "no-dino"))})


def test_unknown_ids_architectures_and_tags_are_clear_errors():
    with pytest.raises(BackboneUnavailable, match="unknown backbone 'nope'"):
        load_backbone("nope", DEFAULT_REGISTRY)
    with pytest.raises(BackboneUnavailable, match="no model named 'No-Such-CLIP'"):
        load_backbone("x", {"x": BackboneSpec("open_clip", "No-Such-CLIP", "openai")})
    with pytest.raises(BackboneUnavailable, match="no pretrained tag 'nonsense'"):
        load_backbone("x", {"x": BackboneSpec("open_clip", "ViT-B-32", "nonsense")})


def test_default_backbones_offline_fail_with_instructions():
    """The papers' weights are not in this machine's cache: clear errors, never a random-weights fallback."""
    for backbone_id in ("clip-vit-b-32", "dinov2-base", "hpsv2"):
        with pytest.raises(BackboneUnavailable) as error:
            load_backbone(backbone_id, DEFAULT_REGISTRY, device="cpu")
        assert backbone_id in str(error.value) and "Hugging Face cache" in str(error.value)


def test_backbones_file_overrides_and_validates(tmp_path, tiny_clip):
    path = tmp_path / "backbones.json"
    path.write_text(json.dumps({"clip-vit-b-32": tiny_clip.to_dict(), "mine": {"family": "hf_vision", "model": "x"}}))
    registry = load_registry(path)
    assert registry["clip-vit-b-32"] == tiny_clip and registry["mine"].model == "x"
    assert registry["dinov2-base"] == DEFAULT_REGISTRY["dinov2-base"]
    path.write_text(json.dumps({"x": {"family": "open_clip", "model": "m", "wieghts": "typo"}}))
    with pytest.raises(ValueError, match="unknown keys \\['wieghts'\\]"):
        load_registry(path)


# --- images prepared on the device (the CPU only decodes) -----------------------------------------------------
DEVICE_TOLERANCE = 5e-3  # largest |embedding difference| (L2, unit vectors) of device-prepared inputs, real size


def test_device_transforms_dino_on_the_cpu_are_the_processors_own_bit_for_bit(tiny_dino):
    """DINOv2's processor runs the same torchvision operations on a tensor as on a PIL image: prepared from the
    decoded pixels, a batch at a time, the inputs (image and 4x4 grid tiles) equal the processor's on each PIL
    image or tile, bit for bit (a non-square image, so resize and crop both act)."""
    from benchmark.encoders.base import pixels_of, prepare
    from benchmark.encoders.hf_vision import ProcessorPreparation

    backbone = load_backbone("dinov2-base", {"dinov2-base": tiny_dino}, device="cpu")
    assert isinstance(backbone.preparation, ProcessorPreparation)  # not the PIL fallback
    images = [Image.fromarray(np.random.default_rng(s).integers(0, 256, (70, 90, 3), dtype=np.uint8))
              for s in range(3)]
    pixels = torch.stack([pixels_of(image) for image in images])
    for kind in ("image", "grid"):
        prepared = backbone.preparation.prepare(pixels, kind)
        assert torch.equal(prepared, torch.stack([prepare(backbone.transform, image, kind) for image in images]))


def test_device_transforms_clip_runs_open_clips_steps_on_tensors_within_a_few_levels(tiny_clip):
    """open_clip's resize, crop, ToTensor and Normalize run on the uint8 pixels as torchvision runs them on
    tensors. PIL resizes in fixed point, rounding to whole levels between its two passes, so a pixel may land a
    few levels away (measured: at most 4 of 255 at 1024 px -> 224 px): the inputs have their own cache key, and
    the metrics reading them their own version."""
    from benchmark.encoders.base import ComposePreparation, pixels_of, prepare
    from benchmark.metrics.alignment import ClipScore

    backbone = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    assert isinstance(backbone.preparation, ComposePreparation)
    rng = np.random.default_rng(4)
    image = Image.fromarray(rng.integers(0, 256, (96, 72, 3), dtype=np.uint8)).resize((700, 900), Image.BICUBIC)
    prepared = backbone.preparation.prepare(pixels_of(image).unsqueeze(0), "image")[0]
    reference = prepare(backbone.transform, image, "image")
    levels = (prepared - reference).abs() * backbone.preparation.std * 255
    assert levels.max() <= 6 and levels.mean() < 0.5
    assert backbone.image_key == backbone.key + "/tensor-1"  # image embeddings: their own cache key
    assert ClipScore().info.version == "1; images tensor-1"


@pytest.mark.slow
def test_device_transforms_bound_the_embedding_difference_on_real_size_backbones(tmp_path):
    """open_clip ViT-B-32 and ViT-L-14 and DINOv2-base at their real sizes (random weights), on a 1,024 px
    image: the embedding of the device-prepared inputs is within ``DEVICE_TOLERANCE`` (L2) of the PIL-prepared
    one's, so every cosine a metric reads (CLIPScore, CRA's similarities, VR's patch similarities) moves by at
    most that much; DINOv2's inputs are the processor's own bit for bit on the CPU."""
    from benchmark.encoders.base import prepare
    from culturelens.testing.tiny_models import real_size_backbones

    registry = real_size_backbones(tmp_path)
    rng = np.random.default_rng(5)
    image = Image.fromarray(rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)).resize((1024, 1024), Image.BICUBIC)
    for backbone_id in ("clip-vit-b-32", "clip-vit-l-14", "dinov2-base"):
        backbone = load_backbone(backbone_id, registry, device="cpu")
        reference = prepare(backbone.transform, image, "image").unsqueeze(0)
        prepared = backbone.prepare(image, "image").unsqueeze(0)
        difference = np.linalg.norm(backbone.embed(prepared) - backbone.embed(reference))
        assert difference <= DEVICE_TOLERANCE, backbone_id
        if backbone_id == "dinov2-base":
            assert torch.equal(prepared, reference)
            assert torch.equal(backbone.prepare(image, "grid"), prepare(backbone.transform, image, "grid"))
        else:
            assert difference > 0  # not the same inputs: hence the new key and version


def test_device_transforms_a_transform_they_cannot_run_falls_back_to_pil_and_keeps_its_key(tiny_clip):
    """A Compose with a step that has no tensor form (here a PIL filter) is prepared through the transform itself,
    image by image: the inputs are the transform's own, and the cache key stays the PIL one."""
    from PIL import ImageFilter
    from torchvision import transforms

    from benchmark.encoders.base import Preparation, pixels_of, prepare

    backbone = load_backbone("clip-vit-b-32", {"clip-vit-b-32": tiny_clip}, device="cpu")
    blurred = transforms.Compose([transforms.Lambda(lambda i: i.filter(ImageFilter.BLUR)),
                                  *backbone.preprocess.transforms])
    backbone.preprocess, backbone._preparation = blurred, None
    assert type(backbone.preparation) is Preparation and backbone.image_key == backbone.key
    image = _image(64)
    prepared = backbone.preparation.prepare(pixels_of(image).unsqueeze(0), "image")[0]
    assert torch.equal(prepared, prepare(blurred, image, "image"))


def test_grid_cuts_rounded_and_at_w_floor_4_with_the_remainder_last():
    from benchmark.encoders.base import grid_edges

    assert grid_edges(10, 4, "rounded") == [0, 2, 5, 8, 10]  # round(2.5) = 2, round(5) = 5, round(7.5) = 8
    assert grid_edges(10, 4, "floor") == [0, 2, 4, 6, 10]  # 10 // 4 = 2; the last cell takes 10 - 6 = 4
    image = Image.fromarray(np.arange(10 * 10 * 3, dtype=np.uint8).reshape(10, 10, 3))
    assert [t.size[0] for t in grid_tiles(image, 4, "floor")[:4]] == [2, 2, 2, 4]
    assert [t.size[1] for t in grid_tiles(image, 4, "floor")[::4]] == [2, 2, 2, 4]
    assert [t.size[0] for t in grid_tiles(image, 4)[:4]] == [2, 3, 3, 2]
    assert np.array_equal(np.asarray(grid_tiles(image, 4, "floor")[15]), np.asarray(image)[6:10, 6:10])
    with pytest.raises(ValueError, match="grid cut must be one of rounded, floor"):
        grid_edges(10, 4, "ceil")


def test_a_backbone_with_the_floor_cut_prepares_its_grid_and_the_harness_decoder_too(tiny_dino, tmp_path):
    from dataclasses import replace

    from benchmark.features.embeddings import (
        DecodedBatch,
        FileSource,
        _Decode,
        prepared_batch,
    )
    from benchmark.metrics.base import Need

    backbone = load_backbone("d", {"d": replace(tiny_dino, grid_cut="floor")}, device="cpu")
    image = _image(10)
    expected = torch.stack([backbone.transform(t) for t in grid_tiles(image, 4, "floor")])
    assert torch.equal(backbone.prepare(image, "grid"), expected)
    image.save(tmp_path / "0.png")
    need = Need("d", "grid", 4)
    row, needs, pixels = _Decode(FileSource(tmp_path, ["0.png"]), [(0, (need,))])[0]
    [(_, rows, prepared)] = prepared_batch(DecodedBatch([([row], [needs], pixels.unsqueeze(0))]), {"d": backbone})
    assert rows == [0] and torch.equal(prepared[0], expected)
    rounded = load_backbone("d", {"d": tiny_dino}, device="cpu")
    assert not torch.equal(rounded.prepare(image, "grid"), expected) and rounded.key != backbone.key


def test_mean_pooling_is_the_mean_of_all_output_tokens(tiny_dino):
    from dataclasses import replace

    backbone = load_backbone("d", {"d": replace(tiny_dino, pooling="mean")}, device="cpu")
    pixels = backbone.prepare(_image(), "image").unsqueeze(0)
    reference = AutoModel.from_pretrained(tiny_dino.model).eval()
    with torch.no_grad():
        tokens = reference(pixel_values=pixels).last_hidden_state.numpy()  # (1, 1 + 16 patches, 32), CLS first
    assert tokens.shape == (1, 17, 32)
    mean = tokens.mean(axis=1)
    expected = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    assert backbone.embed(pixels) == pytest.approx(expected, abs=1e-5)
    cls = load_backbone("d", {"d": tiny_dino}, device="cpu")
    assert np.abs(cls.embed(pixels) - expected).max() > 1e-3 and cls.key != backbone.key
    assert backbone.spec.uid == cls.spec.uid + "#pooling=mean"


def test_the_authors_backbones_are_registered_and_options_are_checked(tmp_path):
    assert DEFAULT_REGISTRY["clip-vit-b-16"] == BackboneSpec("open_clip", "ViT-B-16", "openai")
    authors = DEFAULT_REGISTRY["dinov2-base-mean-floor"]
    assert authors.uid == "hf_vision:facebook/dinov2-base#pooling=mean#grid_cut=floor"
    assert BackboneSpec("hf_vision", "m", pooling="cls", grid_cut="rounded").uid == BackboneSpec("hf_vision", "m").uid
    with pytest.raises(ValueError, match="pooling is an option of hf_vision backbones, not of open_clip"):
        BackboneSpec("open_clip", "ViT-B-16", "openai", pooling="mean")
    path = tmp_path / "backbones.json"
    path.write_text(json.dumps({"dino": {"family": "hf_vision", "model": "m", "pooling": "max"}}))
    with pytest.raises(ValueError, match=r"backbones\.json: dino: pooling must be one of cls, mean, not 'max'"):
        load_registry(path)
