"""Resolution: native first, then an explicit architecture, then detection ranked by specificity."""

from __future__ import annotations

import pytest

from oasr.errors import DetectionError, InputError
from oasr.conversion.detect import converters
from oasr.conversion.detect import detect, pick_converter

from tiny_models import write_ct2_header, write_hf_config, write_openai_pt


def test_builtin_converters_come_from_entry_points():
    assert {"ctranslate2", "hf-whisper", "openai-whisper"} <= set(converters())


def test_each_format_is_claimed_by_its_converter(tmp_path):
    write_ct2_header(tmp_path / "ct2")
    write_hf_config(tmp_path / "hf")
    pt = write_openai_pt(tmp_path / "w.pt")
    assert pick_converter(tmp_path / "ct2")[0].name == "ctranslate2"
    assert pick_converter(tmp_path / "hf")[0].name == "hf-whisper"
    assert pick_converter(pt)[0].name == "openai-whisper"


def test_two_equal_top_claims_raise_listing_both(tmp_path):
    both = tmp_path / "both"
    write_ct2_header(both)
    write_hf_config(both)
    assert [c.specificity for c in detect(both)] == [30, 30]
    with pytest.raises(DetectionError) as e:
        pick_converter(both)
    message = str(e.value)
    assert "ctranslate2" in message and "hf-whisper" in message and "--architecture" in message


def test_higher_specificity_wins(tmp_path):
    folder = tmp_path / "mixed"
    write_hf_config(folder)  # keyed value, 30
    write_openai_pt(folder / "extra.pt")  # asset layout, 10
    claims = detect(folder)
    assert [c.converter.name for c in claims] == ["hf-whisper", "openai-whisper"]
    assert pick_converter(folder)[0].name == "hf-whisper"


def test_explicit_architecture_overrides_detection(tmp_path):
    both = tmp_path / "both"
    write_ct2_header(both)
    write_hf_config(both)
    assert pick_converter(both, "hf-whisper")[0].name == "hf-whisper"
    assert pick_converter(both, "ctranslate2")[0].name == "ctranslate2"
    # An architecture narrows detection to its converters; here both remain, so the tie stands.
    with pytest.raises(DetectionError, match="claimed equally"):
        pick_converter(both, "whisper")


def test_unknown_architecture_lists_the_choices(tmp_path):
    write_hf_config(tmp_path / "hf")
    with pytest.raises(DetectionError, match="neither a converter .*ctranslate2.* nor an architecture .*whisper"):
        pick_converter(tmp_path / "hf", "no-such-architecture")


def test_unrecognised_directory_raises_saying_what_was_looked_for(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("hello")
    with pytest.raises(DetectionError) as e:
        pick_converter(tmp_path / "x")
    message = str(e.value)
    assert "no converter recognises" in message
    for name in ("ctranslate2", "hf-whisper", "openai-whisper"):
        assert name in message


def test_other_ctranslate2_specs_are_not_claimed(tmp_path):
    write_ct2_header(tmp_path / "mt", spec="TransformerSpec")
    assert detect(tmp_path / "mt") == []


def test_missing_and_empty_paths(tmp_path):
    with pytest.raises(InputError, match="no such file or directory"):
        pick_converter(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty directory"):
        pick_converter(tmp_path / "empty")
