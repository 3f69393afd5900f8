"""Progress bars for the command line: one tqdm bar per stage, created on its first update (so a quick
rejection prints no empty bar)."""

from __future__ import annotations

from collections.abc import Callable

from tqdm import tqdm


class Bars:
    def __init__(self, enabled: bool = True, unit: str = "item"):
        self.enabled, self.unit, self.bars = enabled, unit, {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(desc=stage, total=total, unit=self.unit, leave=False)
        bar.update(done - bar.n)

    def stage(self, name: str) -> Callable[[int, int], None]:
        """A (done, total) callback for one stage."""
        return lambda done, total: self(name, done, total)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def quiet_datasets() -> None:
    """Our commands show their own progress; the datasets library's per-call bars would only add noise."""
    import datasets

    datasets.disable_progress_bars()
