"""Where a JSON text stopped parsing, said as its reader would say it (issue 30, point 14: a
one-line file's error said "line 2")."""

import pytest

from core import strictjson


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"problem": "x", "answer": "1"\n', "at the end of the line"),
        ('{"problem": "x", "answer": "1"', "at the end of the line"),
        ('{"a" 1}\n', "at column 6"),
        ('{\n"a": 1,\n"b" 2}', "at line 3, column 5"),
        ('{\n"a": 1,\n', "at the end of the text"),
    ],
)
def test_a_parse_error_says_where_as_a_reader_would(text, where):
    with pytest.raises(strictjson.InvalidJSON) as refused:
        strictjson.loads(text)
    assert where in str(refused.value)
    assert "line 2" not in str(refused.value) or "\n" in text.rstrip()


def test_an_import_of_a_one_line_file_names_its_line_and_the_end_of_it(tmp_path):
    from labeling.services.importing import ImportFailed, read_jsonl

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "x", "answer": "1"\n')
    said = r"bad.jsonl:1: not valid JSON \(.* at the end of the line\)"
    with pytest.raises(ImportFailed, match=said):
        list(read_jsonl(path=bad, name="bad.jsonl", progress=False))
