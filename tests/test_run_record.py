"""The run record (`benchmark.run_record.RunRecord`, every results folder's run.json) and the scoring options
(`benchmark.scoring_options.ScoringOptions`): results published in every earlier format still read, one record is
always one text, and the command line and the Python API build the same options."""

from __future__ import annotations

import json

import pytest

from benchmark import results
from benchmark.reproduce import unrecorded
from benchmark.run_record import BackboneUsed, RunRecord, ScoringSettings, SuiteScored
from benchmark.scoring_options import ScoringOptions
from leaderboard.queue.base import Request, refusal

# run.json as the harness wrote it when results were first published (commit 30ea114: one backbone) ...
FIRST = """{
  "submission_id": "20261121T211500-0123456789-ab12", "harness_version": "0.1.0", "backbone": "clip-vit-b-32",
  "backbone_revision": "sha256:cee75ac0f96b24a1", "dataset": "culturelens/cube-1k:cube_1k:test@1a2b3c4d5e6f7a8b",
  "seeds": [0, 1], "images": 12, "missing": 0, "prompts_truncated": 0, "scored_at": "2026-11-21T21:15:00+00:00"
}"""
# ... with a backbone registry and metric versions (commit cf13164) ...
REGISTRY = """{
  "submission_id": "s-cf", "harness_version": "0.1.0",
  "backbones": {"clip-vit-b-32": {"uid": "open_clip:ViT-B-32:openai", "revision": "abc", "preprocess": "open_clip-1"}},
  "metrics": {"clip_score": "1", "clip_cosine": "1"}, "dataset": "culturelens/cube-1k:cube_1k:test@1a2b",
  "seeds": [0], "images": 6, "missing": 0, "embeddings_cached": 0, "embeddings_computed": 12,
  "scored_at": "2026-11-21T21:41:57+00:00"
}"""
# ... and as the worker wrote a suite submission's until the record was typed: keys in the order the dict was
# built, the settings, a part's record under "parts", and the request and lease the worker answered.
SUITE = """{
  "submission_id": "s-suite", "harness_version": "0.1.0",
  "suite": {"repo": "culturelens/suite", "version": 1, "parts": ["cube-1k"], "missing": ["culturalframes"],
            "unscored": {}},
  "parts": {"cube-1k": {
      "submission_id": "s-suite", "harness_version": "0.1.0",
      "backbones": {"clip-vit-b-32": {"uid": "u", "revision": "r", "preprocess": "p"}},
      "metrics": {"clip_score": "1"}, "skipped": {}, "dataset": "culturelens/cube-1k:cube_1k:test@ff",
      "seeds": [0, 1], "settings": {"metric_settings": {"tau_patch": 0.6, "artifact_index": null},
                                    "tracks": null},
      "backbone_specs": {"clip-vit-b-32": {"family": "open_clip", "model": "ViT-B-32", "weights": "openai"}},
      "dataset_digest": "0123456789abcdef", "batch_size": 32, "images": 20, "missing": 0, "embeddings_cached": 0,
      "embeddings_computed": 30, "scored_at": "2026-11-25T10:00:00+00:00", "excluded": 0, "errors": {},
      "protocols": {"clip_score": "{}"}}},
  "metrics": {"clip_score": "1"}, "skipped": {"expectations_met": "the submission has no culturalframes part"},
  "backbones": {"clip-vit-b-32": {"uid": "u", "revision": "r", "preprocess": "p"}},
  "backbone_specs": {"clip-vit-b-32": {"family": "open_clip", "model": "ViT-B-32", "weights": "openai"}},
  "settings": {"metric_settings": {"tau_patch": 0.6, "artifact_index": null}, "tracks": null}, "batch_size": 32,
  "images": 20, "missing": 0, "embeddings_cached": 0, "embeddings_computed": 30, "excluded": 0, "errors": {},
  "protocols": {"clip_score": "{}"}, "scored_at": "2026-11-25T10:00:01+00:00", "request": 2, "lease": "L-7"
}"""


def test_run_record_reads_every_format_results_were_published_in():
    first, registry, suite = (RunRecord.parse(text) for text in (FIRST, REGISTRY, SUITE))
    assert first.images == 12 and first.seeds == [0, 1] and first.backbones is None
    assert first.model_extra == {"backbone": "clip-vit-b-32", "backbone_revision": "sha256:cee75ac0f96b24a1",
                                 "prompts_truncated": 0}  # kept as they were, written back as they were
    assert json.loads(first.to_json()) == json.loads(FIRST)
    # what `culturelens reproduce` refuses them for, in its words
    assert unrecorded(first) == ["settings", "backbone_specs", "batch_size", "dataset_digest", "backbones", "metrics"]
    assert unrecorded(registry) == ["settings", "backbone_specs", "batch_size", "dataset_digest"]
    assert registry.backbones["clip-vit-b-32"] == BackboneUsed(uid="open_clip:ViT-B-32:openai", revision="abc",
                                                               preprocess="open_clip-1")
    assert unrecorded(suite) == [] and suite.is_suite and list(suite.scored_parts) == ["cube-1k"]
    assert suite.parts["cube-1k"].settings == ScoringSettings(metric_settings={"tau_patch": 0.6,
                                                                               "artifact_index": None})
    assert suite.suite == SuiteScored(repo="culturelens/suite", version=1, parts=["cube-1k"],
                                      missing=["culturalframes"])
    # a record without a request answers the first; the queue reads the lease and request it carries
    assert (first.request_answered, suite.request_answered) == (1, 2)
    assert refusal(first, Request(1, "FINISHED", ()), sealed=True) is None  # finished before leases: its seal counts
    assert refusal(suite, Request(2, "RUNNING", ("L-7",))) is None
    assert refusal(suite, Request(3, "RUNNING", ("L-7",))) == "it answers request 2, not its current request 3"
    assert refusal(first, Request(1, "RUNNING", ("L-1",))) == \
        "its run.json carries none of the leases the queue issued for its request 1"


def _keys_in_order(text: str) -> list[list[str]]:
    orders: list[list[str]] = []
    json.loads(text, object_pairs_hook=lambda pairs: orders.append([k for k, _ in pairs]) or dict(pairs))
    return orders


def test_run_record_is_written_in_one_canonical_text(tmp_path):
    """Sorted keys at every level, fields that do not apply left out (but a setting's null kept), the same bytes
    however the record was built, and read back to the same record."""
    suite = RunRecord.parse(SUITE)
    text = suite.to_json()
    assert all(keys == sorted(keys) for keys in _keys_in_order(text))
    rebuilt = RunRecord.model_validate(dict(reversed(list(json.loads(SUITE).items()))))
    assert rebuilt.to_json() == text and RunRecord.parse(text) == suite and RunRecord.parse(text).to_json() == text
    part = json.loads(text)["parts"]["cube-1k"]
    assert "suite" not in part and "request" not in part and "lease" not in part  # a part's None fields left out
    assert part["settings"] == {"metric_settings": {"artifact_index": None, "tau_patch": 0.6}, "tracks": None}
    plain = RunRecord(submission_id="s", images=3, settings=None)
    assert json.loads(plain.to_json()) == {"images": 3, "submission_id": "s"}
    assert plain.to_json() == RunRecord(images=3, submission_id="s").to_json()
    assert text.isascii() and text.startswith('{\n  "backbone_specs": {')
    folder = results.write_folder(tmp_path / "r", [], [], [], suite.answering(3, "L-8"))
    assert (folder / "run.json").read_text() == suite.answering(3, "L-8").to_json()
    assert RunRecord.parse((folder / "run.json").read_bytes()).lease == "L-8"


@pytest.mark.parametrize("text", ["[]", "{", "null", '{"images": "many"}', '{"lease": 5}', '{"parts": {"a": 1}}'])
def test_run_record_refuses_text_that_is_not_one(text):
    assert RunRecord.parse(text) is None
    assert refusal(RunRecord.parse(text), Request(1, "FINISHED", ())) == "it has no run.json holding a run record"


def test_scoring_options_are_the_same_from_the_command_line_and_from_keywords(monkeypatch, tmp_path):
    from culturelens import cli, options

    calibration = tmp_path / "w1kp.npz"
    calibration.write_bytes(b"not read here")
    monkeypatch.setenv("CULTURELENS_W1KP_CALIBRATION", str(calibration))  # each reads the environment alike
    args = cli.parser().parse_args(["score", "sub.zip", "--out", "o", "--tracks", "awareness", "iconicity",
                                    "--tau", "0.8", "--batch-size", "8", "--device", "cpu"])
    from_flags = options.scoring_options(vars(args))
    from_keywords = options.scoring_options({"tracks": ["awareness", "iconicity"], "tau": 0.8, "batch_size": 8,
                                             "device": "cpu"})
    assert from_flags.record() == from_keywords.record()
    assert (from_flags.batch_size, from_flags.device, from_flags.tracks) == (8, "cpu", ("awareness", "iconicity"))
    recorded = from_flags.record()
    assert recorded.metric_settings["tau"] == 0.8 and recorded.metric_settings["w1kp_calibration"] == str(calibration)
    assert recorded.tracks == ["awareness", "iconicity"]
    # what `culturelens reproduce` rebuilds from the run record is the same
    again = ScoringOptions.from_record(recorded, from_flags.registry, batch_size=8)
    assert again.record() == recorded and again.tracks == from_flags.tracks
    assert ScoringOptions().record() is None  # metrics built by hand: nothing to record, reproduce refuses
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        ScoringOptions(batch_size=0)
    with pytest.raises(ValueError, match=r"shard \(2, 2\) is not a \(rank, world size\)"):
        ScoringOptions(shard=(2, 2))
