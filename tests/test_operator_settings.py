"""Quota and upload limits an operator sets (flag, then environment, then default), and who is held to the quota."""

from __future__ import annotations

import pytest

from benchmark.datasets import cube_1k
from benchmark.datasets.prompts import local_folder
from benchmark.submission import Limits
from leaderboard import operator_settings as settings
from leaderboard.store import Store
from culturelens.testing.submissions import make_submission


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                            ("127.0.0.2", True), ("0.0.0.0", False), ("::", False),
                                            ("192.168.1.10", False), ("myhost.example.org", False)])
def test_only_a_loopback_address_keeps_the_server_to_this_machine(host, loopback):
    assert settings.is_loopback(host) is loopback


def test_the_public_quota_holds_visitors_of_an_open_server_and_not_the_operator():
    assert settings.quota(public=True, environ={}) == {"quota": 5, "attempt_quota": 20, "quota_hours": 24.0}
    assert settings.quota(public=False, environ={}) == {"quota": None, "attempt_quota": None, "quota_hours": 24.0}


def test_a_quota_the_operator_sets_applies_everywhere_and_the_flag_wins():
    environ = {"CULTURELENS_QUOTA": "50", "CULTURELENS_ATTEMPT_QUOTA": "none", "CULTURELENS_QUOTA_HOURS": "1.5"}
    assert settings.quota(public=False, environ=environ) == {"quota": 50, "attempt_quota": None, "quota_hours": 1.5}
    assert settings.quota(public=True, submissions="2", hours="12", environ=environ) == {
        "quota": 2, "attempt_quota": None, "quota_hours": 12.0}
    assert settings.quota(public=True, submissions="none", environ={})["quota"] is None


@pytest.mark.parametrize("keywords, message", [
    ({"submissions": "-1"}, "quota (its flag): '-1' is not a whole number >= 0 or 'none'"),
    ({"attempts": "lots"}, "attempt quota (its flag): 'lots' is not a whole number >= 0 or 'none'"),
    ({"hours": "0"}, "quota hours (its flag): '0' is not a number of hours > 0"),
    ({"environ": {"CULTURELENS_QUOTA": "5.5"}}, "quota (CULTURELENS_QUOTA): '5.5' is not a whole number >= 0 or 'none'"),
])
def test_a_setting_that_cannot_be_read_is_refused_naming_where_it_was_set(keywords, message):
    with pytest.raises(settings.SettingError) as refused:
        settings.quota(public=True, **{"environ": {}, **keywords})
    assert str(refused.value) == message


def test_limits_come_from_the_environment_then_the_flags():
    limits = settings.limits(["max_files=10", "max_compression_ratio=50.5"],
                             environ={"CULTURELENS_LIMITS": "max_files=3, min_side=32"})
    assert (limits.max_files, limits.min_side, limits.max_compression_ratio) == (10, 32, 50.5)
    assert limits.max_pixels == Limits().max_pixels
    with pytest.raises(settings.SettingError, match=r"^--limit: max_files must be a number > 0, not '0'$"):
        settings.limits(["max_files=0"], environ={})
    with pytest.raises(settings.SettingError, match=r"^CULTURELENS_LIMITS: 'files=3' is not NAME=VALUE with NAME one "
                                                    r"of max_upload_bytes, max_files, "):
        settings.limits([], environ={"CULTURELENS_LIMITS": "files=3"})


def test_a_store_without_a_quota_takes_every_submission_and_says_so(tmp_path, tiny_upstream):
    store = Store(tmp_path / "store", **settings.quota(public=False, environ={}))
    cube_1k.build(str(tiny_upstream), local_folder(store.datasets, cube_1k.HUB_REPO))
    ids = list(store.prompts(cube_1k.HUB_REPO, cube_1k.CONFIG).table.index)
    for n in range(settings.PUBLIC_QUOTA + 1):
        outcome = store.submit(make_submission(tmp_path / f"s{n}", ids, model_name=f"model {n}"), "operator")
        assert outcome.job is not None, outcome.report.errors
    assert store.quota_note == "quota: none (this server's operator sets it: `culturelens serve --quota`)"
    public = Store(tmp_path / "public", **settings.quota(public=True, environ={}))
    assert public.quota_note == "quota: 5 accepted submissions and 20 uploads (rejected ones included) per 24 h"


def test_the_attempts_a_job_gets_come_from_the_flag_then_the_environment_and_reach_the_queue(tmp_path):
    assert settings.max_attempts(None, environ={}) == 3
    assert settings.max_attempts(None, environ={"CULTURELENS_MAX_ATTEMPTS": "5"}) == 5
    assert settings.max_attempts("1", environ={"CULTURELENS_MAX_ATTEMPTS": "5"}) == 1
    with pytest.raises(settings.SettingError, match=r"^max attempts \(CULTURELENS_MAX_ATTEMPTS\): '0' is not a whole "
                                                    r"number >= 1$"):
        settings.max_attempts(None, environ={"CULTURELENS_MAX_ATTEMPTS": "0"})
    assert Store(tmp_path / "store", max_attempts=settings.max_attempts("2", environ={})).queue.max_attempts == 2


# --- the queue's location -----------------------------------------------------------------------------------------
def test_the_queue_comes_from_the_flag_then_the_environment_else_the_stores_file():
    environ = {"CULTURELENS_QUEUE": "postgresql://env@db.example/queue"}
    assert settings.queue(None, environ={}) is None and settings.queue(None, environ={"CULTURELENS_QUEUE": ""}) is None
    assert settings.queue(None, environ=environ) == "postgresql://env@db.example/queue"
    assert settings.queue("postgres://flag@db.example/q", environ=environ) == "postgres://flag@db.example/q"


@pytest.mark.parametrize("value, message", [
    ("mysql://ada:s3cret@db.example/q", "queue (its flag): queue mysql://ada:***@db.example/q: only postgresql:// "
                                        "(or postgres://) URLs name a queue server; for an SQLite queue give a path"),
    ("postgresql://ada:s3cret@db.example:port/q", "queue (its flag): queue postgresql://ada:***@db.example:port/q: "
                                                 "Port could not be cast to integer value as 'port'"),
    ("postgresql://ada:s3%zzcret@db.example/q", "queue (its flag): queue postgresql://ada:***@db.example/q: not a "
                                                "PostgreSQL connection URL (invalid percent-encoded token: \"***\")"),
    ("postgresql://ada@db.example/q?password=s3cret&colour=red", "queue (its flag): queue postgresql://ada@db.example"
     "/q?password=***&colour=red: not a PostgreSQL connection URL (invalid URI query parameter: \"colour\")"),
    ("ada:s3cret@db.example/q", "queue (its flag): not a postgresql://USER@HOST/DATABASE URL (the default queue, the "
                                "store's own queue.sqlite, needs no setting)"),
])
def test_a_queue_url_that_cannot_be_read_is_refused_without_its_password(value, message):
    with pytest.raises(settings.SettingError) as refused:
        settings.queue(value, environ={})
    assert str(refused.value) == message and "s3cret" not in message


def test_an_unreachable_queue_server_is_named_without_its_password(tmp_path):
    from leaderboard.queue import QueueUnavailable

    url = f"postgresql://ada:s3cret@/queue?host={tmp_path}"  # no server listens there
    with pytest.raises(QueueUnavailable) as refused:
        Store(tmp_path / "store", queue=url)
    message = str(refused.value)
    assert message.startswith(f"cannot open the queue at postgresql://ada:***@/queue?host={tmp_path}: ")
    assert f'connection to server on socket "{tmp_path}/.s.PGSQL.5432" failed' in message and "s3cret" not in message


def test_serves_worker_gets_the_same_queue_in_its_environment_not_on_its_command_line(monkeypatch):
    import argparse

    from culturelens.verbs.service import local_worker

    monkeypatch.setenv("CULTURELENS_QUEUE", "postgresql://stale@old/q")
    args = argparse.Namespace(store="/srv/store", backbones=None)
    url = "postgresql://ada:s3cret@db.example/q"
    command, env = local_worker(args, url)
    assert command[-4:] == ["culturelens", "worker", "--store", "/srv/store"] and "s3cret" not in " ".join(command)
    assert env["CULTURELENS_QUEUE"] == url
    assert "CULTURELENS_QUEUE" not in local_worker(args, None)[1]  # the store's own file, like serve's
