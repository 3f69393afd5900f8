"""A maintainer deploys the leaderboard as a Hugging Face Space, as README.md says: the front matter configures it,
the Space installs ``requirements.txt`` (the app alone: no PyTorch, diffusers, dreamsim or open_clip) and starts
``app.py`` with the variables a Space sets.

The environment the app runs in here is a fresh virtual environment holding exactly the distributions pip would
install for ``requirements.txt``: their dependency closure (extras and markers evaluated) resolved against the
versions installed in this checkout's environment, each distribution's files linked in, ``*.dist-info`` included.
Nothing else is in it, so ``import torch`` fails there as on a Space, and ``importlib.metadata`` knows no torch
either. Installing from PyPI instead would need the network and minutes per run; the closure is what that install
would bring, at the versions the rest of the suite tests. ``app.py`` runs as a Space runs it, ``python app.py``,
from a folder of its own, with the Space's variables (``SYSTEM=spaces``, ``SPACE_ID``, ``SPACE_HOST``, the OAuth
client a Space with ``hf_oauth: true`` gets) and a folder standing in for ``/data`` (``CULTURELENS_SPACE_STORAGE``).
The OpenID provider behind the sign-in button is a local stand-in answering the discovery document in its real
format.
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from leaderboard import operator_settings
from leaderboard.search import NOT_OFFERED
from tests.helpers import free_port, until

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements.txt"
MODEL_LIBRARIES = ("torch", "diffusers", "dreamsim", "open_clip", "sentence_transformers", "transformers")
HEAVY_DISTRIBUTIONS = {"torch", "torchvision", "triton", "diffusers", "dreamsim", "open-clip-torch",
                       "sentence-transformers", "transformers", "accelerate"}
WARNING = "Results on this Space will not survive a restart"
CLIENT_ID = "2b7e1f0c-space-client"


BROUGHT = "# what the lines above bring"  # requirements.txt's line between the app's packages and what they bring
SPACE_RUNTIME = {"spaces"}  # requirements.txt's packages a Space runs with that the full install has no use for


def _requirements(block: str = "both") -> list[Requirement]:
    """requirements.txt's pins: the app's packages (``block="app"``), what they bring (``"brought"``), or both."""
    app, _, brought = REQUIREMENTS.read_text(encoding="utf-8").partition(f"\n{BROUGHT}\n")
    text = {"app": app, "brought": brought, "both": f"{app}\n{brought}"}[block]
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def _closure(requirements: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The distributions pip installs for ``requirements``, resolved against those installed here."""
    installed = {canonicalize_name(d.metadata["Name"]): d for d in importlib.metadata.distributions()}
    chosen: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, frozenset]] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        assert name in installed, f"{requirement} is not installed here: the light environment cannot be made"
        chosen[name] = installed[name]
        for line in installed[name].requires or []:
            needed = Requirement(line)
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra})
                                             for extra in ("", *requirement.extras)):
                todo.append(needed)
    return chosen


@pytest.fixture(scope="session")
def light_python(tmp_path_factory) -> Path:
    """The interpreter of a virtual environment holding exactly what ``requirements.txt`` installs."""
    root = tmp_path_factory.mktemp("light-env") / "venv"
    venv.create(root, with_pip=False, symlinks=True)
    site = next(root.glob("lib/python*/site-packages"))
    entries = {}
    for distribution in _closure(_requirements()).values():
        assert distribution.files, f"{distribution.metadata['Name']} lists no files (no RECORD)"
        for file in distribution.files:
            top = Path(file).parts[0]
            if top != "..":  # scripts installed outside site-packages
                entries[top] = Path(distribution.locate_file(top))
    for name, source in entries.items():
        (site / name).symlink_to(source)
    return root / "bin" / "python"


def test_space_light_requirements_bring_no_model_library():
    """requirements.txt brings neither PyTorch (nor its CUDA libraries) nor any model library, yet each package of
    the app it pins is one pyproject.toml declares, with its extras, at a version within pyproject.toml's range (the
    Space installs what the tests test); the one other is the Space runtime's own."""
    brought = set(_closure(_requirements()))
    assert not brought & HEAVY_DISTRIBUTIONS and not {n for n in brought if n.startswith("nvidia-")}, brought
    assert {"gradio", "authlib", "itsdangerous", "duckdb", "datasets", "psycopg-binary"} <= brought
    declared = {canonicalize_name(Requirement(d).name): Requirement(d)
                for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    app = _requirements("app")
    assert {canonicalize_name(r.name) for r in app} - set(declared) == SPACE_RUNTIME
    for requirement in app:
        if (full := declared.get(canonicalize_name(requirement.name))) is not None:
            (pin,) = requirement.specifier
            assert requirement.extras == full.extras and full.specifier.contains(pin.version), requirement


def test_space_front_matter_configures_a_gradio_space_with_sign_in():
    """README.md's front matter is a Space's configuration: the Gradio SDK at the version and Python the tests run,
    app.py, Hugging Face sign-in, the leaderboard tag and a short description within the Hub's 60 characters."""
    import gradio

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n", 2)[1])
    assert (meta["sdk"], meta["app_file"], meta["hf_oauth"]) == ("gradio", "app.py", True)
    assert meta["sdk_version"] == gradio.__version__, "the Space would run a Gradio the tests do not: update README.md"
    assert meta["python_version"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "leaderboard" in meta["tags"] and 0 < len(meta["short_description"]) <= 60
    assert (ROOT / meta["app_file"]).is_file()


def test_space_store_lives_on_persistent_storage_else_the_page_warns(tmp_path):
    """On a Space, the store defaults to the persistent storage's culturelens/ folder when the Space has one; without
    it, and without the two Hub repos to restore from, the page warns that results will not survive a restart. Off a
    Space nothing changes, and a store the operator names is used as named."""
    data = tmp_path / "data"
    data.mkdir()
    space = {"SPACE_ID": "org/culturelens", "CULTURELENS_SPACE_STORAGE": str(data)}
    with_storage = operator_settings.service(public=True, environ=space)
    assert with_storage.store == data / "culturelens" and with_storage.restart_warning is None
    none = str(tmp_path / "no")
    without = operator_settings.service(public=True, environ={**space, "CULTURELENS_SPACE_STORAGE": none})
    assert without.store == Path(".culturelens") and WARNING in without.restart_warning
    mirrored = operator_settings.service(public=True, environ={
        **space, "CULTURELENS_SPACE_STORAGE": none, "CULTURELENS_HUB_REQUESTS": "org/requests",
        "CULTURELENS_HUB_RESULTS": "org/results"})
    assert mirrored.restart_warning is None  # restored from the repos at start
    named = operator_settings.service(public=True, environ={**space, "CULTURELENS_STORE": str(tmp_path / "elsewhere")})
    assert named.store == tmp_path / "elsewhere" and WARNING in named.restart_warning
    off_space = operator_settings.service(public=False, environ={"CULTURELENS_SPACE_STORAGE": str(data)})
    assert off_space.store == Path(".culturelens") and off_space.restart_warning is None


class _Provider(http.server.BaseHTTPRequestHandler):
    """Hugging Face's OpenID provider, as far as a sign-in's first step reads it: the discovery document."""

    def do_GET(self):  # noqa: N802 - the standard library's name
        if self.path != "/.well-known/openid-configuration":
            self.send_error(404)
            return
        base = f"http://127.0.0.1:{self.server.server_port}"
        body = json.dumps({"issuer": base, "authorization_endpoint": f"{base}/oauth/authorize",
                           "token_endpoint": f"{base}/oauth/token", "userinfo_endpoint": f"{base}/oauth/userinfo",
                           "jwks_uri": f"{base}/oauth/jwks", "response_types_supported": ["code"],
                           "scopes_supported": ["openid", "profile"], "subject_types_supported": ["public"],
                           "id_token_signing_alg_values_supported": ["RS256"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _openid_provider() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@contextlib.contextmanager
def _space(python: Path, workdir: Path, storage: Path, cube_source: Path, provider: str,
           without: tuple[str, ...] = ()) -> Iterator[str]:
    """``python app.py`` as a Space starts it, in ``workdir``, its persistent storage at ``storage`` (present or
    not), the variables ``without`` names left out; yields its URL once it answers, and stops it as a Space's
    restart does (SIGTERM). Its output is ``workdir/space.log``."""
    port = free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "HF_HOME": str(workdir / "hf"),
           "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
           "SYSTEM": "spaces", "SPACE_ID": "org/culturelens", "SPACE_AUTHOR_NAME": "org",
           "SPACE_REPO_NAME": "culturelens", "SPACE_HOST": "org-culturelens.hf.space",
           "OAUTH_CLIENT_ID": CLIENT_ID, "OAUTH_CLIENT_SECRET": "space-client-secret",
           "OAUTH_SCOPES": "openid profile", "OPENID_PROVIDER_URL": provider,
           "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "CULTURELENS_SPACE_STORAGE": str(storage), "CULTURELENS_CUBE_SOURCE": str(cube_source)}
    env = {name: value for name, value in env.items() if name not in without}
    log_path = workdir / "space.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen([str(python), str(ROOT / "app.py")], cwd=workdir, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"

    def answers() -> bool:
        assert process.poll() is None, f"app.py exited: {log_path.read_text()[-3000:]}"
        try:
            return urllib.request.urlopen(url, timeout=2).status == 200
        except OSError:
            return False

    try:
        until(answers, 180, f"app.py answering on {url}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.mark.slow
def test_space_starts_without_torch_with_the_leaderboard_and_a_sign_in_button(light_python, tiny_upstream,
                                                                              tmp_path):
    """app.py started as a Space, in the light environment (no PyTorch, diffusers, dreamsim, open_clip), with
    persistent storage: HTTP 200, the papers' rows ranked (CRT Table 1: Imagen 4 first on moving references, CRT
    0.643), the Submit tab's "Sign in with Hugging Face" button leading to the OpenID provider with the Space's
    client id, the store on the persistent storage, no restart warning, and search by meaning said to be off."""
    from gradio_client import Client

    from benchmark.metrics.iconicity import CRT_FROM_MEANS

    for module in MODEL_LIBRARIES:
        found = subprocess.run([str(light_python), "-c", f"import {module}"], capture_output=True, text=True)
        assert found.returncode == 1 and f"No module named '{module}'" in found.stderr, module
    data = tmp_path / "data"
    data.mkdir()
    with _openid_provider() as provider, _space(light_python, tmp_path, data, tiny_upstream, provider) as url:
        assert urllib.request.urlopen(url, timeout=30).status == 200
        rows = Client(url, verbose=False).predict("iconicity", CRT_FROM_MEANS[0], "kind", "moving",
                                                  api_name="/leaderboard")
        assert (rows[0]["model"], rows[0]["value"], rows[0]["provenance"]) == ("Imagen 4", 0.643, "reported")
        config = json.loads(urllib.request.urlopen(url + "config", timeout=30).read())
        props = [c.get("props", {}) for c in config["components"]]
        assert [p["value"] for p in props if p.get("value") == "Sign in with Hugging Face"]
        texts = " ".join(str(p.get("value")) for p in props)
        assert WARNING not in texts and NOT_OFFERED in texts
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as redirect:
            opener.open(url + "login/huggingface", timeout=30)
        assert redirect.value.code == 302
        target = urllib.parse.urlsplit(redirect.value.headers["Location"])
        assert f"{target.scheme}://{target.netloc}{target.path}" == f"{provider}/oauth/authorize"
        assert urllib.parse.parse_qs(target.query)["client_id"] == [CLIENT_ID]
    store = data / operator_settings.SPACE_STORE
    assert (store / "queue.sqlite").is_file() and (store / "datasets" / "culturelens__cube-1k" / "README.md").is_file()
    assert not (tmp_path / ".culturelens").exists()


@pytest.mark.slow
@pytest.mark.browser
def test_space_without_persistent_storage_says_results_will_not_survive_a_restart(light_python, tiny_upstream,
                                                                                   tmp_path):
    """The same Space without persistent storage (and no Hub repos): a visitor's first view says, above the tabs,
    that results will not survive a restart; the store is on the Space's own disk. On the Datasets tab, search by
    words is there and search by meaning is said to be off in this install."""
    from tests.browser import chromium, open_page, screenshot, wait_for_text

    with _openid_provider() as provider, \
            _space(light_python, tmp_path, tmp_path / "data", tiny_upstream, provider) as url, chromium() as browser:
        page = open_page(browser, url, shows=WARNING)
        notice = page.locator("#cl-notice")
        tabs = page.locator("[role=tab]").first
        assert notice.is_visible() and notice.bounding_box()["y"] < tabs.bounding_box()["y"]
        screenshot(page, "space-no-persistent-storage")
        page.get_by_role("tab", name="Datasets").click()
        wait_for_text(page, "Search by meaning is not offered on this server")
        assert page.get_by_label("Contains (any column)").is_visible()
        assert page.get_by_label("Semantic search over prompts").count() == 0
    assert (tmp_path / ".culturelens" / "queue.sqlite").is_file()


# --- issue 50, finding 10: the app-only install says what it cannot do, in one sentence -----------------------------
def _light_run(python: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` in the light environment, from ``workdir``, with this checkout importable (a Space runs
    from its repository's folder) and no network."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "HF_HOME": str(workdir / "hf"),
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(python), *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # imports the app's libraries in a fresh interpreter, three times
def test_no_dead_end_app_only_install_says_in_one_sentence_what_to_install_to_score(light_python, tmp_path):
    """In the Space's install (requirements.txt: no PyTorch), `culturelens score` as the README writes it, and
    `culturelens.score` and `culturelens.metrics` as its Python section shows them: one sentence naming what is
    missing and the install that has it (exit status 2 on the command line), no ModuleNotFoundError traceback, and
    nothing written."""
    from benchmark.errors import FULL_INSTALL_MODULES

    example = ROOT / "submissions" / "example"
    cli = _light_run(light_python, tmp_path, "-m", "culturelens", "score", str(example), "--out", "runs/demo")
    assert cli.returncode == 2 and "Traceback" not in cli.stderr, cli.stderr[-3000:]
    assert cli.stderr.strip() == (
        "error: `culturelens score` needs torch, which this install leaves out (requirements.txt installs the "
        "leaderboard app alone, as a Space does): install the full package from the repository, `pip install -e .` "
        "in a checkout (or `pip install` the wheel `pip wheel --no-deps .` makes there), then run it again")
    code = ("import culturelens\nfrom PIL import Image\n"
            "for call in (lambda: culturelens.score('%s'),\n"
            "             lambda: culturelens.metrics.CLIPScore()(Image.new('RGB', (8, 8)), 'a')):\n"
            "    try:\n        call()\n"
            "    except culturelens.CultureLensError as error:\n"
            "        print(type(error).__name__, isinstance(error, ModuleNotFoundError), error)\n") % example
    api = _light_run(light_python, tmp_path, "-c", code)
    assert api.returncode == 0, api.stderr[-3000:]
    lines = api.stdout.splitlines()
    assert [line.split(" needs ")[0] for line in lines] == ["FullInstallNeeded True culturelens.score",
                                                            "FullInstallNeeded True culturelens.metrics.CLIPScore"]
    assert all(line.endswith("needs torch, which this install leaves out (requirements.txt installs the leaderboard "
                             "app alone, as a Space does): install the full package from the repository, `pip "
                             "install -e .` in a checkout (or `pip install` the wheel `pip wheel --no-deps .` makes "
                             "there), then run it again") for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no runs/, no .culturelens/

    # What the sentence covers is what the Space's install leaves out: every module of pyproject.toml's
    # dependencies that requirements.txt does not bring, and none that it does.
    missing = _light_run(light_python, tmp_path, "-c", "import importlib.util as u; print(' '.join(m for m in %r if "
                         "u.find_spec(m) is None))" % (FULL_INSTALL_MODULES,))
    assert missing.stdout.split() == list(FULL_INSTALL_MODULES)
    brought = set(_closure(_requirements()))
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        name = canonicalize_name(Requirement(line).name)
        if name not in brought:
            distribution = importlib.metadata.distribution(name)
            tops = {Path(f).parts[0].removesuffix(".py") for f in distribution.files or ()
                    if not Path(f).parts[0].endswith((".dist-info", ".libs", ".data")) and Path(f).parts[0] != ".."}
            assert tops & set(FULL_INSTALL_MODULES), (name, sorted(tops))


def test_no_dead_end_space_requirements_pin_the_tested_set():
    """requirements.txt pins every package a Space installs (the app's, and all they bring) to one version each, and
    each is the version installed here, where the tests run: a Space rebuilt next year installs the tested set. The
    second block is exactly what the first brings (none missing, none stale). A failure lists the lines to write."""
    pins = {}
    for requirement in _requirements():
        (pin,) = requirement.specifier
        assert pin.operator == "==", f"{requirement}: pin one version (==)"
        pins[canonicalize_name(requirement.name)] = pin.version
    brought = _closure(_requirements("app"))
    wanted = {name: distribution.version for name, distribution in brought.items()}
    assert pins == wanted, "requirements.txt should pin: " + ", ".join(
        f"{name}=={version}" for name, version in sorted(wanted.items()) if pins.get(name) != version)


OAUTH_VARIABLES = ("OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET", "OAUTH_SCOPES", "OPENID_PROVIDER_URL")


@pytest.mark.slow
def test_no_dead_end_space_starts_without_a_traceback_with_or_without_sign_in(light_python, tiny_upstream, tmp_path):
    """The Space's install started as a Space starts it logs no traceback (Gradio's reloader finds `spaces`), and
    its Datasets tab names an install that works. The same Space without the OAuth variables (no `hf_oauth: true`)
    starts too, with no sign-in button: the Submit tab says submissions are closed and what the maintainer sets, a
    submission gets that answer, and the log says it in one line."""
    from gradio_client import Client

    from leaderboard.search import NOT_OFFERED
    from leaderboard.ui.site import SIGN_IN_MISSING

    def texts(url: str) -> str:
        config = json.loads(urllib.request.urlopen(url + "config", timeout=30).read())
        return " ".join(str(c.get("props", {}).get("value")) for c in config["components"])

    with _openid_provider() as provider:
        signed = tmp_path / "signed"
        signed.mkdir()
        with _space(light_python, signed, signed / "data", tiny_upstream, provider) as url:
            shown = texts(url)
            assert "Sign in with Hugging Face" in shown and SIGN_IN_MISSING not in shown
            assert NOT_OFFERED in shown and "`pip install -e .` in a checkout" in shown
            assert "pip install culturelens" not in shown
        log = (signed / "space.log").read_text()
        assert "Traceback" not in log and "`spaces` package is required" not in log, log[-3000:]

        bare = tmp_path / "no-oauth"
        bare.mkdir()
        with _space(light_python, bare, bare / "data", tiny_upstream, provider, without=OAUTH_VARIABLES) as url:
            shown = texts(url)
            assert "Sign in with Hugging Face" not in shown and SIGN_IN_MISSING in shown
            answer = Client(url, verbose=False).predict(None, "org/generations", api_name="/submit_form")
            assert answer == f"### Not submitted\n\n{SIGN_IN_MISSING}"
        log = (bare / "space.log").read_text()
        assert "Traceback" not in log, log[-3000:]
        assert "this Space has no Hugging Face sign-in (no OAuth variables): it takes no submissions until its " \
               "README.md front matter says hf_oauth: true" in log
