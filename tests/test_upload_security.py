"""Upload security: archive checks that stay linear, a time bound on validation, images validated and scored as
a viewer shows them (EXIF rotation, 16-bit greyscale, MPO, transparency), control and invisible characters in
the manifest, our own disk failing (ServerFault, nothing left in staging) and the upload size limit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from pydantic import ValidationError

from benchmark.datasets.prompts import PromptSet
from benchmark.features.embeddings import _Decode
from benchmark.images import open_as_viewed
from benchmark.metrics.base import Need
from benchmark.submission import Limits, Manifest, Rejected, stage
from benchmark.submission.archive import parse_name, unpack
from benchmark.submission.validate import check_image
from culturelens.testing.submissions import make_submission, manifest, zip_folder

REPO_ROOT = Path(__file__).resolve().parents[1]
PROMPT_IDS = ["p0", "p1", "p2"]
RED, BLUE = (255, 0, 0), (0, 0, 255)


def _prompts(_manifest=None) -> PromptSet:
    """The prompt set a submission answers (three prompts): the loader ``stage`` calls."""
    table = pd.DataFrame({"prompt": ["a", "b", "c"]}, index=pd.Index(PROMPT_IDS, name="prompt_id"))
    return PromptSet("culturelens/cube-1k", "cube_1k", "test", "test", table)


def _close(pixel, colour, tolerance=3) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def _red_over_blue(width: int = 96, height: int = 64) -> Image.Image:
    """Left half red, right half blue."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[:, : width // 2] = RED
    pixels[:, width // 2:] = BLUE
    return Image.fromarray(pixels)


def _rotated_jpeg(path: Path) -> Path:
    """A JPEG stored 96x64 (red left, blue right) with EXIF orientation 6: shown rotated 90° clockwise, 64x96
    with red on top."""
    exif = Image.Exif()
    exif[0x0112] = 6
    _red_over_blue().save(path, format="JPEG", exif=exif, quality=95)
    return path


def _mpo(path: Path) -> Path:
    """A camera-style MPO: a JPEG (red/blue) with a second, green frame."""
    _red_over_blue().save(path, format="MPO", save_all=True, append_images=[Image.new("RGB", (96, 64), (0, 255, 0))])
    return path


# --- 1. linear archive checks and a time bound ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
def test_a_repeated_name_among_200000_entries_is_rejected_in_seconds(tmp_path):
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for i in range(199_998):
            zf.writestr(f"images/p{i}/0.png", b"")
        zf.writestr("images/twice/0.png", b"")
        zf.writestr("images/twice/0.png", b"")
    (tmp_path / "dest").mkdir()
    started = time.monotonic()
    with pytest.raises(Rejected, match=r"^'images/twice/0.png': appears more than once in the archive$"):
        unpack(archive, tmp_path / "dest")
    elapsed = time.monotonic() - started
    print(f"\n200,000-entry zip with one repeated name rejected in {elapsed:.1f} s")
    assert elapsed < 30  # the quadratic check took 838 s on this archive
    assert list((tmp_path / "dest").iterdir()) == []


def test_validation_over_its_time_limit_is_stopped_with_the_reason(tmp_path):
    source = make_submission(tmp_path / "sub", PROMPT_IDS)
    assert stage(source, tmp_path / "staging", _prompts).ok
    report = stage(source, tmp_path / "staging2", _prompts, Limits(max_validation_seconds=0))
    assert not report.ok
    assert report.errors == ["images/: validation took longer than 0 s (1 of 6 images checked) and was stopped: use "
                             "fewer images per prompt or smaller image files, and time `culturelens validate` on "
                             "the submission first"]
    assert list((tmp_path / "staging2").iterdir()) == []


# --- 2. images as a viewer shows them -----------------------------------------------------------------------------
def test_exif_orientation_is_applied(tmp_path):
    viewed = open_as_viewed(_rotated_jpeg(tmp_path / "0.jpg"))
    assert viewed.mode == "RGB" and viewed.size == (64, 96)
    assert _close(viewed.getpixel((32, 10)), RED) and _close(viewed.getpixel((32, 85)), BLUE)


def test_the_scoring_decoder_and_the_validator_see_the_rotated_image(tmp_path):
    (tmp_path / "images" / "p0").mkdir(parents=True)
    _rotated_jpeg(tmp_path / "images" / "p0" / "0.jpg")
    need = Need("pixels", "image")
    rows = [(tmp_path / "images" / "p0" / "0.jpg").read_bytes()]  # scoring reads a shard row's bytes
    row, needs, pixels = _Decode(rows.__getitem__, [(0, (need,))])[0]
    assert row == 0 and needs == (need,) and tuple(pixels.shape) == (96, 64, 3)
    assert _close(pixels[10, 32].tolist(), RED) and _close(pixels[85, 32].tolist(), BLUE)
    record, problem = check_image(tmp_path, parse_name("images/p0/0.jpg"), Limits())
    assert problem is None and (record.width, record.height) == (64, 96)


def test_the_scoring_decoder_reads_a_plain_png_with_libspng_as_pillow_does(tmp_path):
    """An 8-bit RGB PNG as generators write it takes the fast decoder (libspng), and its pixels are Pillow's,
    from the file and from its bytes alike; a PNG with transparency takes Pillow's way, onto white."""
    from benchmark.images import _spng_rgb, decode_pixels

    rng = np.random.default_rng(7)
    image = Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)).resize((123, 97), Image.BICUBIC)
    image.save(tmp_path / "plain.png")
    data = (tmp_path / "plain.png").read_bytes()
    assert _spng_rgb(data) is not None  # the fast way, not the fallback
    viewed = np.asarray(open_as_viewed(tmp_path / "plain.png"))
    assert np.array_equal(decode_pixels(tmp_path / "plain.png"), viewed)
    assert np.array_equal(decode_pixels(data), viewed)
    Image.new("RGBA", (4, 4), (255, 0, 0, 0)).save(tmp_path / "clear.png")
    assert decode_pixels(tmp_path / "clear.png")[0, 0].tolist() == [255, 255, 255]


def test_16_bit_greyscale_is_scaled_not_clamped(tmp_path):
    Image.fromarray(np.full((64, 64), 32768, np.uint16)).save(tmp_path / "grey.png")
    Image.fromarray(np.full((64, 64), 65535, np.uint16)).save(tmp_path / "white.png")
    Image.fromarray(np.full((64, 64), 257 * 10, np.uint16)).save(tmp_path / "dark.png")
    assert open_as_viewed(tmp_path / "grey.png").getpixel((5, 5)) == (128, 128, 128)  # not (255, 255, 255)
    assert open_as_viewed(tmp_path / "white.png").getpixel((5, 5)) == (255, 255, 255)
    assert open_as_viewed(tmp_path / "dark.png").getpixel((5, 5)) == (10, 10, 10)


def test_mpo_shows_its_first_frame_and_is_accepted_as_jpeg(tmp_path):
    path = _mpo(tmp_path / "camera.jpg")
    with Image.open(path) as image:
        assert image.format == "MPO" and image.n_frames == 2
    viewed = open_as_viewed(path)
    assert viewed.size == (96, 64) and _close(viewed.getpixel((10, 10)), RED)
    source = make_submission(tmp_path / "sub", PROMPT_IDS)
    (source / "images" / "p0" / "0.png").unlink()
    _mpo(source / "images" / "p0" / "0.jpg")
    report = stage(source, tmp_path / "staging", _prompts)
    assert report.ok, report.errors
    assert {(i.path, i.width, i.height) for i in report.images if i.prompt_id == "p0"} == {
        ("images/p0/0.jpg", 96, 64), ("images/p0/1.png", 64, 64)}


def test_transparency_is_composited_onto_white(tmp_path):
    Image.new("RGBA", (64, 64), (255, 0, 0, 0)).save(tmp_path / "clear.png")
    Image.new("RGBA", (64, 64), (255, 0, 0, 128)).save(tmp_path / "half.png")
    palette = Image.new("P", (64, 64), 1)
    palette.putpalette([0, 0, 0, 10, 20, 30])
    palette.save(tmp_path / "palette.png", transparency=1)
    assert open_as_viewed(tmp_path / "clear.png").getpixel((0, 0)) == (255, 255, 255)  # not red, not black
    assert open_as_viewed(tmp_path / "half.png").getpixel((0, 0)) == (255, 127, 127)
    assert open_as_viewed(tmp_path / "palette.png").getpixel((0, 0)) == (255, 255, 255)  # not (10, 20, 30)


# --- 3. control, format and invisible characters in the manifest ---------------------------------------------
def _model(name: str) -> dict:
    return {"name": name, "id": "org/model", "type": "open"}


REFUSED = [
    ("NUL in notes", {"notes": "fine\x00"}, "notes", "U+0000"),
    ("escape sequence in notes", {"notes": "\x1b[2Jcleared"}, "notes", "U+001B"),
    ("right-to-left override in notes", {"notes": "abc\u202edef"}, "notes", "U+202E"),
    ("override in an extra key", {"generation": {"extra": {"lora\u202e": 1}}}, "generation.extra", "U+202E"),
    ("NUL in an extra value", {"generation": {"extra": {"lora": "x\x00"}}}, "generation.extra.lora", "U+0000"),
    ("escape in an extra value", {"generation": {"extra": {"lora": "\x1b[31m"}}}, "generation.extra.lora", "U+001B"),
    ("escape in negative_prompt", {"generation": {"negative_prompt": "blur\x1b"}}, "generation.negative_prompt",
     "U+001B"),
    ("newline in a missing detail", {"missing": [{"prompt_id": "p0", "seed": 0, "reason": "error",
                                                  "detail": "a\nb"}]}, "missing.0.detail", "U+000A"),
    ("Hangul filler in a name", {"model": _model("SDXL\u3164")}, "model.name", "U+3164"),
    ("a name of Hangul fillers", {"model": _model("\u3164\u3164")}, "model.name", "U+3164"),
    ("Hangul choseong filler", {"model": _model("A\u115fB")}, "model.name", "U+115F"),
    ("Hangul jungseong filler", {"model": _model("A\u1160B")}, "model.name", "U+1160"),
    ("halfwidth Hangul filler", {"model": _model("A\uffa0B")}, "model.name", "U+FFA0"),
    ("Braille blank", {"model": _model("A\u2800B")}, "model.name", "U+2800"),
    ("line separator", {"model": _model("A\u2028B")}, "model.name", "U+2028"),
    ("paragraph separator", {"contact": "me\u2029you"}, "contact", "U+2029"),
]


@pytest.mark.parametrize("overrides, where, code", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_control_and_invisible_characters_are_refused_by_code_point(overrides, where, code):
    with pytest.raises(ValidationError) as caught:
        Manifest.model_validate_json(json.dumps(manifest(**overrides)))
    problems = caught.value.errors()
    assert len(problems) == 1
    assert ".".join(map(str, problems[0]["loc"])).startswith(where) and code in problems[0]["msg"]


def test_a_name_of_whitespace_only_is_refused():
    with pytest.raises(ValidationError, match="at least 1 character"):
        Manifest.model_validate_json(json.dumps(manifest(model=_model("\u3000 \u00a0"))))


@pytest.mark.parametrize("name", ["Modèle Café Ñandú", "文心一格 2.0", "نموذج الصور", "Painter 🎨👍🏽", "SDXL ❤️"])
def test_ordinary_names_in_any_script_pass(name):
    parsed = Manifest.model_validate_json(json.dumps(manifest(
        model=_model(name), notes="first line\nsecond line\twith a tab\r\n", generation={"extra": {"ç": "ü", "n": 2}})))
    assert parsed.model.name == name and parsed.generation.extra == {"ç": "ü", "n": 2}


# --- 4. our disk failing is a ServerFault, and leaves nothing in staging ------------------------------------
# Runs in a child process with a real file-size limit (RLIMIT_FSIZE; SIGXFSZ ignored, so a write past it fails
# with EFBIG, as a full disk fails with ENOSPC). argv: source, staging folder, limit in bytes, and "keep" to set
# the limit only after validation, so that writing the shards (Report.keep) is what fails.
FULL_DISK = """
import json, resource, signal, sys
from pathlib import Path
from benchmark.submission import ServerFault, stage
from tests.test_upload_security import _prompts

source, staging, limit, when = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
def full():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    if when == "unpack":
        full()
    report = stage(source, staging, _prompts)
    if when == "keep" and report.ok:
        full()
        report.keep(staging / "kept")
    print(json.dumps({"errors": report.errors}))
except ServerFault as fault:
    print(json.dumps({"fault": str(fault)}))
"""


def _on_a_full_disk(source: Path, staging: Path, limit: int, when: str) -> dict:
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(source), str(staging), str(limit), when],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("when, limit", [("unpack", 4096), ("keep", 0)])
def test_a_full_disk_is_a_server_fault_and_leaves_nothing(tmp_path, when, limit):
    source = zip_folder(make_submission(tmp_path / "sub", PROMPT_IDS), tmp_path / "sub.zip")  # 12 KB images
    staging = tmp_path / "staging"
    outcome = _on_a_full_disk(source, staging, limit, when)
    assert outcome == {"fault": "the server could not store the upload (File too large); this is not a problem "
                                "with the submission: try again later"}
    assert list(staging.iterdir()) == []


# --- 5. the size of the upload itself ------------------------------------------------------------------------
def test_an_upload_over_the_size_limit_is_refused_before_it_is_opened(tmp_path):
    source = zip_folder(make_submission(tmp_path / "sub", PROMPT_IDS), tmp_path / "sub.zip")
    size = source.stat().st_size
    limits = Limits(max_upload_bytes=size - 1)
    (tmp_path / "dest").mkdir()
    with pytest.raises(Rejected, match=rf"^sub\.zip: {size:,} bytes, over the upload limit of {size - 1:,} bytes"):
        unpack(source, tmp_path / "dest", limits)
    assert list((tmp_path / "dest").iterdir()) == []
    assert stage(source, tmp_path / "staging", _prompts, Limits(max_upload_bytes=size)).ok
