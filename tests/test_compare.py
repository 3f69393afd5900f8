"""`culturelens compare` on results folders written here with known per-prompt values."""

from __future__ import annotations

import re

import numpy as np
import pytest
import pyarrow.parquet as pq
from scipy import stats as scipy_stats

from benchmark import results
from tests.helpers import culturelens_here


def _results(folder, model, metric_values: dict[str, dict[str, float]]):
    rows = [{"submission_id": model, "model": model, "prompt_id": prompt, "seed": 0, "metric": metric,
             "track": "iconicity", "value": value}
            for metric, values in metric_values.items() for prompt, value in values.items()]
    folder.mkdir(parents=True)
    pq.write_table(results.table(rows, results.PER_IMAGE), folder / "per_image.parquet")
    return folder


def _run(*argv):
    result = culturelens_here("compare", *argv)
    return result.returncode, result.stdout + result.stderr


def test_paired_tests_vr_at_k_and_perturbation_deltas(tmp_path):
    prompts = [f"r{i}" for i in range(12)]
    a_crt = {p: 0.5 + 0.02 * i for i, p in enumerate(prompts)}
    b_crt = {p: 0.4 + 0.025 * i for i, p in enumerate(prompts)}
    a = _results(tmp_path / "a", "A", {"crt": a_crt, "cra_image": {p: 1.0 for p in prompts},
                                         "vr": {p: 0.2 for p in prompts}})
    b = _results(tmp_path / "b", "B", {"crt": b_crt, "cra_image": {p: 1.0 for p in prompts},
                                         "vr": {p: (0.4 if i < 6 else None) for i, p in enumerate(prompts)}})
    a_after = _results(tmp_path / "a2", "A", {"crt": {p: v - 0.1 for p, v in a_crt.items()},
                                              "cra_image": {p: 0.5 for p in prompts}})
    b_after = _results(tmp_path / "b2", "B", {"crt": b_crt, "cra_image": {p: (0.0 if i < 3 else 1.0)
                                                                          for i, p in enumerate(prompts)}})
    code, text = _run(str(a), str(b), "--metrics", "crt", "--perturbed", str(a_after), str(b_after))
    assert code == 0, text
    expected_p = scipy_stats.wilcoxon(list(a_crt.values()), list(b_crt.values())).pvalue
    line = next(l for l in text.splitlines() if l.strip().startswith("A") and "B" in l)
    assert f"{np.mean(np.subtract(list(a_crt.values()), list(b_crt.values()))):.4f}" in line
    assert f"{round(expected_p, 4)}" in line
    vr_section = text.split("== VR@k")[1].split("==")[0]
    assert re.search(r"A\s+0\.2\s+6", vr_section) and re.search(r"B\s+0\.4\s+6", vr_section)  # 6 shared refs
    assert "A under perturbation: delta-CRA -0.5000" in text and "delta-CRT -0.1000" in text
    assert "B under perturbation: delta-CRA -0.2500" in text and "over the 9 still recognised" in text


def test_compare_explains_bad_inputs(tmp_path):
    code, text = _run(str(tmp_path / "nothing"))
    assert code == 2 and "no per_image.parquet" in text and "Traceback" not in text  # an error: one line, exit 2
    a = _results(tmp_path / "a", "same", {"vr": {"p1": 0.1}})
    b = _results(tmp_path / "b", "same", {"vr": {"p1": 0.2}})
    code, text = _run(str(a), str(b))
    assert code == 2 and "for the same model name" in text


def test_holm_runs_over_every_test_compare_prints(tmp_path):
    """Three models and two metrics: six tests, one family. Each printed p_holm is Holm's over all six raw
    p-values (computed here from scipy's Wilcoxon), not over a metric's three."""
    from benchmark.stats import holm

    rng = np.random.default_rng(5)
    prompts = [f"r{i}" for i in range(15)]
    values = {model: {metric: dict(zip(prompts, rng.normal(centre, 0.1, 15).round(6)))
                      for metric, centre in (("crt", 0.5 + shift), ("vr", 0.3 - shift))}
              for model, shift in (("A", 0.1), ("B", 0.0), ("C", 0.05))}
    folders = [str(_results(tmp_path / m, m, per_metric)) for m, per_metric in values.items()]
    code, text = _run(*folders, "--metrics", "crt", "vr")
    assert code == 0, text
    raw = [scipy_stats.wilcoxon(list(values[a][metric].values()), list(values[b][metric].values())).pvalue
           for metric in ("crt", "vr") for a, b in (("A", "B"), ("A", "C"), ("B", "C"))]
    adjusted = holm(raw)
    assert text.count("Holm-corrected over all 6 tests below") == 2
    printed = []
    for section in text.split("== ")[1:]:
        for line in section.splitlines():
            cells = line.split()
            if len(cells) == 8 and cells[0] in "ABC":
                printed.append((float(cells[6]), float(cells[7])))
    assert [p for p, _ in printed] == pytest.approx([round(p, 4) for p in raw], abs=1e-4)
    assert [h for _, h in printed] == pytest.approx([round(h, 4) for h in adjusted], abs=1e-4)
