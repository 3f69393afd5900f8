"""CultureLens metrics as functions of plain images and prompts, one value per sample.

As torchmetrics' ``CLIPScore()(images, text)`` and t2v_metrics' ``VQAScore(model=...)(images=..., texts=...)`` are
called::

    from culturelens.metrics import CLIPScore
    clip_score = CLIPScore()                      # CLIP ViT-B/32 (openai); backbones="file.json" for local weights
    values = clip_score(images, prompts)          # numpy array, one value per image, in the order given

``images``: PIL images, tensors (C, H, W) or a batch (N, C, H, W), arrays (H, W, C), or paths, or one image;
``prompts``: one text per image, or one text for one image (``benchmark.plain_images``). Each call scores them as the harness scores a submission
(``culturelens.score`` on the same images and prompts), with the metric the leaderboard uses (``.info``: its
version, direction, range and citation), so a value equals the harness's for that image. Backbones and judges
load on the first call and stay loaded. A value the harness leaves empty (an image whose embedding is not
finite, an undefined value) is NaN; ``rows`` gives each sample's value with its note and error.

Image-level metrics give one value per image. A prompt-level metric (``W1KP``) compares the images of one prompt
(the images given with the same text, its seeds) and gives one value per prompt, in the order the prompts first
appear.

A metric that cannot run here (no weights for its backbone, no calibration, no judge) raises ``MetricUnavailable``
(``benchmark.track``: the type ``culturelens.score`` and the command line raise too), naming the keyword that
provides what is missing (``w1kp_calibration=PATH_OR_URL``) and its environment variable; an unknown track is
refused when the metric is made.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.errors import CultureLensError, full_install_for
from benchmark.track import MetricUnavailable


class Metric:
    """The metric ``name`` of track ``track`` as a function of images and prompts (see the module). Keywords as
    ``culturelens.score`` takes them: ``backbones`` (a JSON file pointing backbone ids at local weights),
    ``device``, ``batch_size``, ``num_workers`` (DataLoader processes decoding the images: none by default, the
    images being in memory already), ``cache`` (an embedding cache file to reuse between calls and sessions), and
    the track's settings by name (e.g. ``w1kp_calibration=...``)."""

    def __init__(self, name: str, *, track: str, backbones: str | Path | None = None, device: str | None = None,
                 batch_size: int | None = None, num_workers: int = 0, cache: str | Path | None = None, **settings):
        from benchmark import tracks as registry
        from culturelens import options

        scored = [t.name for t in registry.all_tracks().values() if t.metrics is not None]
        if track not in scored:
            raise registry.UnknownTrack(f"Metric({name!r}, track={track!r}): no track {track!r}; the tracks with "
                                        f"metrics are {', '.join(scored)}")
        declared = {s.name for s in registry.settings_declared()}
        if unknown := sorted(set(settings) - declared):
            raise CultureLensError(f"unknown setting(s) {', '.join(unknown)}; the metric settings are "
                                   f"{', '.join(sorted(declared))}")
        self.name, self.cache = name, Path(cache) if cache else None
        self.options = options.scoring_options({"tracks": [track], "backbones": backbones, "device": device,
                                                "batch_size": batch_size, "num_workers": num_workers, **settings})
        self._loaded = None  # (metric, backbones), on the first call

    def _load(self):
        """The metric built as the track builds it, and its backbones loaded; MetricUnavailable says why not, in
        this interface's keywords; ``FullInstallNeeded`` in the app-only install."""
        with full_install_for(f"culturelens.metrics.{type(self).__name__}"):
            return self._built()

    def _built(self):
        from benchmark import harness
        from benchmark import tracks as registry
        from culturelens.options import in_keywords

        if self._loaded is None:
            # each metric's reason, or its track's, even when none of the track can run
            built, unavailable = registry.build(self.options.metric_settings, dict(self.options.registry),
                                                self.options.tracks)
            reasons = {u.name: u.reason for u in unavailable}
            chosen = [m for m in built if m.info.name == self.name]
            if not chosen:
                reason = reasons.get(self.name) or next(iter(reasons.values()), None)
                if reason is None:
                    raise CultureLensError(f"the {self.options.tracks[0]} track has no metric {self.name!r} (it has "
                                           f"{', '.join(m.info.name for m in built)})")
                raise MetricUnavailable(self.name, f"{self.name} cannot run: {in_keywords(reason)}")
            backbones, loaded, disabled = harness.load_backbones(chosen, dict(self.options.registry),
                                                                 self.options.device)
            if not loaded:
                raise MetricUnavailable(self.name, f"{self.name} cannot run: {in_keywords(disabled[self.name])}")
            self._loaded = (loaded[0], backbones)
        return self._loaded

    @property
    def info(self):
        """The metric's declaration (``benchmark.metrics.base.MetricInfo``): version, direction, unit, range and
        citation (loads it)."""
        return self._load()[0].info

    def rows(self, images, prompts, *, seeds=None) -> pd.DataFrame:
        """One row per sample in the order given (an image; for a prompt-level metric, a prompt): ``input`` (the
        image's position; a prompt's first image's), prompt_id, seed, value, note and error."""
        with full_install_for(f"culturelens.metrics.{type(self).__name__}"):
            return self._rows(images, prompts, seeds)

    def _rows(self, images, prompts, seeds) -> pd.DataFrame:
        from benchmark import harness
        from benchmark.cache import EmbeddingCache
        from benchmark.plain_images import ad_hoc

        given = ad_hoc(images, prompts, seeds=seeds)
        metric, backbones = self._load()
        scores = harness.score(given.store, given.manifest, given.prompts, given.images, [metric], backbones,
                               EmbeddingCache(self.cache) if self.cache else None, submission_id=given.submission_id,
                               options=self.options)
        if metric.info.name in scores.run.skipped:
            raise CultureLensError(f"{metric.info.name} does not apply to these images: "
                                   f"{scores.run.skipped[metric.info.name]}")
        found = scores.per_image
        if metric.info.level == "image":
            order = given.images.merge(found, left_on=["prompt_id", "seed", "path"],
                                       right_on=["prompt_id", "seed", "image_path"], how="left")
        else:
            first = given.images.drop_duplicates("prompt_id")[["prompt_id", "input"]]
            order = first.merge(found.drop(columns="seed"), on="prompt_id", how="left").assign(seed=None)
        return order.sort_values("input")[["input", "prompt_id", "seed", "value", "note", "error"]] \
            .reset_index(drop=True)

    def __call__(self, images, prompts, *, seeds=None) -> np.ndarray:
        """The metric's value for each sample, in the order given (see ``rows``); NaN where it has none."""
        return self.rows(images, prompts, seeds=seeds)["value"].to_numpy(dtype=float)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class CLIPScore(Metric):
    """CLIPScore of each image for its prompt: 2.5 max(cos(CLIP(image), CLIP(prompt)), 0), in [0, 2.5] (Hessel,
    Holtzman, Forbes, Le Bras, Choi, "CLIPScore: A Reference-free Evaluation Metric for Image Captioning",
    arXiv:2104.08718, Eq. 1), under CLIP ViT-B/32 (``clip_backbone`` chooses another). torchmetrics' CLIPScore
    is another scale, max(100 cos, 0): 40 x this value."""

    def __init__(self, **keywords):
        super().__init__("clip_score", track="awareness", **keywords)


class CLIPCosine(Metric):
    """Cosine of each image's and its prompt's CLIP embeddings, in [-1, 1] (Radford et al., "Learning Transferable
    Visual Models From Natural Language Supervision", arXiv:2103.00020), CLIP ViT-B/32 by default."""

    def __init__(self, **keywords):
        super().__init__("clip_cosine", track="awareness", **keywords)


class HPSv2(Metric):
    """HPS v2 score of each image for its prompt, the cosine under the HPS v2 ViT-H-14 (Wu et al., "Human
    Preference Score v2", arXiv:2306.09341): CUBE's quality s (Kannen et al., arXiv:2407.06863, Eq. 3). Needs
    the HPS v2 checkpoint (``backbones`` naming ``hpsv2``)."""

    def __init__(self, **keywords):
        super().__init__("hps_v2", track="awareness", **keywords)


class W1KP(Metric):
    """W1KP of each prompt's images: 1 - the mean over all pairs of d* = F(d), d the squared Euclidean distance of
    their DreamSim features and F the calibration's CDF (Tang et al., "Words Worth a Thousand Pictures: Measuring
    and Understanding Perceptual Variability in Text-to-Image Generation", arXiv:2406.08482, Eq. 1 and Sec. 2.2).
    One value per prompt (at least two images each); ``w1kp_calibration`` is required."""

    def __init__(self, **keywords):
        super().__init__("w1kp", track="variability", **keywords)


class ExpectationsMet(Metric):
    """How far each image meets its prompt's explicit and implicit cultural expectations, min(explicit, implicit)
    on VIEScore's 0-10 scale, as a VLM judge rates them (Nayak et al., "CulturalFrames", arXiv:2506.08835,
    Sec. 3.3; Ku et al., "VIEScore", arXiv:2312.14867, Sec. 3; each rating the judge's expected answer, Liu et
    al., "G-Eval", arXiv:2303.16634, Sec. 2). ``expectations_judge`` (a Hub id or folder) is required."""

    def __init__(self, **keywords):
        super().__init__("expectations_met", track="expectations", **keywords)
