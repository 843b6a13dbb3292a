"""rare_collections: an import collects cycles less often, and leaves the process as it was."""

import gc
import threading

import pytest

from core.bulk import BULK_THRESHOLD, rare_collections


@pytest.fixture(autouse=True)
def _thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_the_block_raises_the_first_threshold_and_restores_all_three_after_an_error():
    gc.set_threshold(500, 7, 3)
    with pytest.raises(RuntimeError), rare_collections():
        assert gc.get_threshold() == (BULK_THRESHOLD, 7, 3)
        raise RuntimeError
    assert gc.get_threshold() == (500, 7, 3)


def test_overlapping_blocks_in_threads_restore_the_setting_only_when_the_last_ends():
    inside, release = threading.Event(), threading.Event()

    def other_import():
        with rare_collections():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_import)
    with rare_collections():
        thread.start()
        inside.wait(10)
    assert gc.get_threshold()[0] == BULK_THRESHOLD  # the other import still runs
    release.set()
    thread.join(10)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.django_db
def test_an_import_collects_rarely_and_leaves_the_collector_as_it_found_it(tmp_path, monkeypatch):
    from labeling.services import importing

    seen = []
    parse = importing.parse_problem
    monkeypatch.setattr(
        importing, "parse_problem", lambda obj: seen.append(gc.get_threshold()) or parse(obj)
    )
    path = tmp_path / "problems.jsonl"
    path.write_text('{"problem": "What is 1 + 1?", "answer": "2"}\n')
    importing.import_problems(path=path)
    assert seen == [(BULK_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
