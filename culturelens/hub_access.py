"""Whether the Hugging Face Hub can be reached, checked once and within seconds.

Every verb that may reach the Hub first asks (``offline_unless_hub_reachable``); when it cannot, the verb works
offline, from local files and the cache (``HF_HUB_OFFLINE=1``), instead of retrying the Hub for half a minute.
"""

from __future__ import annotations

import sys
from collections.abc import MutableMapping

from benchmark.settings import HUB_ENDPOINT, HUB_OFFLINE


def offline_requested() -> bool:
    """Whether offline mode is on: ``HF_HUB_OFFLINE``, as huggingface_hub read it when it was imported (it reads
    the variable once), else as it will read it."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        return bool(constants.HF_HUB_OFFLINE)
    return HUB_OFFLINE.resolve()


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub (``HF_ENDPOINT``, default huggingface.co) answers an HTTP request within about
    ``timeout`` seconds, through the proxy the environment names if any (a proxy that lets only some hosts
    through fails here as it would later); False at once when ``HF_HUB_OFFLINE`` is set."""
    import urllib.error
    import urllib.request

    if offline_requested():
        return False
    endpoint = HUB_ENDPOINT.resolve()
    try:
        opener = urllib.request.build_opener()  # reads the proxy settings now (urlopen's opener keeps its first)
        with opener.open(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout) as response:
            return response.status < 400
    except urllib.error.HTTPError as error:
        return error.code < 400
    except (OSError, ValueError):  # refused, timed out, no such host, a proxy's refusal, a malformed endpoint
        return False


def offline_unless_hub_reachable(environ: MutableMapping[str, str] | None = None) -> bool:
    """Check the Hub once; when it cannot be reached, set ``HF_HUB_OFFLINE=1`` in ``environ`` (a child's; None:
    this process's) and say so in one line. Returns whether the work goes offline."""
    if offline_requested():
        return True
    if hub_reachable():
        return False
    print("the Hugging Face Hub cannot be reached: working offline, from local files and the Hugging Face cache "
          "only (HF_HUB_OFFLINE=1)", file=sys.stderr)
    HUB_OFFLINE.put("1", environ)
    if environ is None:  # this process: libraries imported already read the variable once, at import
        for module, names in (("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
                              ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))):
            if module in sys.modules:
                for name in names:
                    setattr(sys.modules[module], name, True)
    return True


def hub_has_dataset(repo: str) -> bool:
    """Whether the Hub (reachable: the verb checked it first) says dataset ``repo`` exists; False offline."""
    if offline_requested():
        return False
    from huggingface_hub import HfApi

    try:
        return HfApi().repo_exists(repo, repo_type="dataset")
    except Exception:  # noqa: BLE001 - a proxy, a timeout, an outage: all mean the repo cannot be reached
        return False
