"""A tiny random Qwen2.5-VL (the classes of CAIRE's best judge, and of the expectations judge) with a tokenizer
written here, saved as a model folder (``save_tiny_vlm``; the ``tiny_qwen_vl`` fixture), and what the judge tests
read of it: a random image, a token's id and the model's own next-token logits."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from culturelens.testing.tiny_models import bytes_to_unicode


def _byte_alphabet() -> list[str]:
    """The byte-level alphabet in byte order (byte b -> its character)."""
    mapping = bytes_to_unicode()
    return [mapping[b] for b in range(256)]


CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_tokenizer():
    """Qwen2.5-VL's special tokens over a byte-level BPE whose only merges make "Yes" and "No" single tokens;
    digits are single bytes (the tiny judge's, and the real-size one's in benchmarks/judge_cost.py)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(_byte_alphabet())}
    merges = [("Y", "e"), ("Ye", "s"), ("N", "o")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                                   "<|video_pad|>"])


# The tiny judge's sizes: two text layers 32 wide, one vision block (also what benchmarks/judge_cost.py counts
# tokens with, over the real processor's vocabulary).
TINY_TEXT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_key_value_heads": 1,
             "rope_parameters": {"rope_type": "default", "mrope_section": [2, 2, 4], "rope_theta": 10000.0}}
TINY_VISION = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 32,
               "fullatt_block_indexes": [0]}


def save_tiny_vlm(folder, seed: int = 0):
    """A randomly initialised Qwen2.5-VL (2 text layers, 1 vision block) and its processor (``tiny_tokenizer``),
    via save_pretrained."""
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor,
                              Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

    tokenizer = tiny_tokenizer()
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=56 * 56, patch_size=14, merge_size=2,
                                              temporal_patch_size=2),
        tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)
    token = tokenizer.convert_tokens_to_ids
    special = {"bos_token_id": token("<|endoftext|>"), "eos_token_id": token("<|im_end|>"),
               "pad_token_id": token("<|endoftext|>")}
    config = Qwen2_5_VLConfig(
        text_config={"vocab_size": len(tokenizer), **TINY_TEXT, "max_position_embeddings": 4096, **special},
        vision_config={**TINY_VISION, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "window_size": 56},
        image_token_id=token("<|image_pad|>"), video_token_id=token("<|video_pad|>"),
        vision_start_token_id=token("<|vision_start|>"), vision_end_token_id=token("<|vision_end|>"), **special)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    with torch.no_grad():  # a spread-out output layer, so that the random model has clear preferences
        model.lm_head.weight.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def random_image(seed: int, size: int = 56) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8))


def model_next_logits(judge, image, prompt: str) -> np.ndarray:
    """The model's next-token logits after one (image, prompt), computed here without the judge's machinery."""
    inputs = judge.processor(text=[prompt], images=[image], return_tensors="pt")
    with torch.no_grad():
        return judge.model(**inputs).logits[0, -1].float().numpy()


def token_id(judge, text: str) -> int:
    ids = judge.tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == 1
    return ids[0]
