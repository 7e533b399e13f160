"""The check's probe cache (pure file logic): an image's torch facts kept by image ID."""

from __future__ import annotations

import json

from imagekit.checks.probecache import ProbeCache, cached, probe_key

FACTS = {"torch": "/usr/lib/python3/dist-packages/torch", "nccl": None, "ops": {"X": "ok"}}


def _counting(facts):
    calls = []

    def probe():
        calls.append(1)
        return dict(facts)

    return probe, calls


def test_a_second_check_of_the_same_image_reads_the_kept_answer(tmp_path):
    cache = ProbeCache(tmp_path)
    key = probe_key("sha256:aaa", "probe code", "FusedAdamBuilder", "")
    probe, calls = _counting(FACTS)
    assert cached(cache, key, probe) == FACTS and len(calls) == 1
    assert cached(cache, key, probe) == {**FACTS, "cached": True} and len(calls) == 1
    other_image = probe_key("sha256:bbb", "probe code", "FusedAdamBuilder", "")
    with_gpus = probe_key("sha256:aaa", "probe code", "FusedAdamBuilder", "all")
    new_probe = probe_key("sha256:aaa", "probe code v2", "FusedAdamBuilder", "")
    for key_ in (other_image, with_gpus, new_probe):
        cached(cache, key_, probe)
    assert len(calls) == 4  # each is a different question: probed, not read


def test_a_failed_probe_is_never_kept(tmp_path):
    cache = ProbeCache(tmp_path)
    probe, calls = _counting({"error": "python3: not found"})
    cached(cache, "k" * 64, probe)
    cached(cache, "k" * 64, probe)
    assert len(calls) == 2 and not list(tmp_path.iterdir())


def test_entries_that_are_broken_foreign_or_misfiled_are_ignored(tmp_path):
    cache = ProbeCache(tmp_path)
    key = probe_key("sha256:aaa", "probe")
    cache.put(key, FACTS)
    path = tmp_path / f"{key}.json"
    assert cache.get(key) == FACTS
    path.chmod(0o666)  # writable by others: could have been planted
    assert cache.get(key) is None
    path.chmod(0o644)
    path.write_text("{not json")
    assert cache.get(key) is None
    path.write_text(json.dumps({"format": 1, "key": "another", "facts": FACTS}))
    assert cache.get(key) is None  # an entry copied under another image's name
    path.write_text(json.dumps({"format": 99, "key": key, "facts": FACTS}))
    assert cache.get(key) is None


def test_the_cache_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ProbeCache.default().directory == tmp_path / "imagekit" / "probes"
    monkeypatch.setenv("IMAGEKIT_CHECK_CACHE", "off")
    assert ProbeCache.default() is None
    probe, calls = _counting(FACTS)
    cached(None, "k", probe)
    cached(None, "k", probe)
    assert len(calls) == 2
