"""Transcript writers (oasr.formats): SRT and WebVTT valid to their specs, line limits, speakers,
openai-whisper's JSON schema and TSV, LRC, long times and unicode."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from oasr.errors import InputError
from oasr.formats import FORMATS, WriterOptions, format_from_suffix, get_writer, register_writer, render, writers
from oasr.results import ResultProvenance, Segment, Transcript, Word

# --- strict readers, written here from the specs, independent of the writers ------------------------

SRT_TIME = r"(\d{2,}):([0-5]\d):([0-5]\d),(\d{3})"
VTT_TIME = r"(?:(\d{2,}):)?([0-5]\d):([0-5]\d)\.(\d{3})"


def _seconds(h, m, s, ms) -> float:
    return int(h or 0) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000


@dataclasses.dataclass
class ParsedCue:
    start: float
    end: float
    lines: list[str]


def read_srt(text: str) -> list[ParsedCue]:
    """SubRip: blocks of index (1, 2, ...), 'start --> end', one or more non-empty text lines."""
    if not text:
        return []
    assert text.endswith("\n") and not text.startswith("\n"), repr(text[:20] + "..." + text[-20:])
    cues = []
    for n, block in enumerate(text.rstrip("\n").split("\n\n"), start=1):
        lines = block.split("\n")
        assert lines[0] == str(n), f"cue {n}: index line {lines[0]!r}"
        m = re.fullmatch(SRT_TIME + " --> " + SRT_TIME, lines[1])
        assert m, f"cue {n}: timing line {lines[1]!r}"
        start, end = _seconds(*m.groups()[:4]), _seconds(*m.groups()[4:])
        assert len(lines) >= 3, f"cue {n} has no text"
        for line in lines[2:]:
            assert line.strip() and line == line.strip(), f"cue {n}: text line {line!r}"
            assert "-->" not in line
        cues.append(ParsedCue(start, end, lines[2:]))
    return cues


VTT_TAG = re.compile(r"</?(?:[biu]|v(?: [^>]+)?|c(?:\.[\w.-]+)?)>")


def read_vtt(text: str) -> list[ParsedCue]:
    """WebVTT: 'WEBVTT', a blank line, cues of 'start --> end' and text; text escaped (&amp; &lt; &gt;)."""
    assert text.startswith("WEBVTT\n\n") or text == "WEBVTT\n", repr(text[:30])
    cues = []
    body = text[len("WEBVTT\n") :].strip("\n")
    if not body:
        return []
    assert text.endswith("\n")
    for n, block in enumerate(body.split("\n\n"), start=1):
        lines = block.split("\n")
        m = re.fullmatch(VTT_TIME + " --> " + VTT_TIME, lines[0])
        assert m, f"cue {n}: timing line {lines[0]!r}"
        start, end = _seconds(*m.groups()[:4]), _seconds(*m.groups()[4:])
        assert len(lines) >= 2, f"cue {n} has no text"
        for line in lines[1:]:
            assert line.strip(), f"cue {n}: blank text line"
            assert "-->" not in line
            bare = VTT_TAG.sub("", line)
            assert "<" not in bare and ">" not in bare, f"cue {n}: unescaped markup in {line!r}"
            assert not re.search(r"&(?!amp;|lt;|gt;|nbsp;|lrm;|rlm;)", bare), f"cue {n}: bare & in {line!r}"
        cues.append(ParsedCue(start, end, lines[1:]))
    return cues


def _check_timeline(cues: list[ParsedCue]) -> None:
    for a, b in zip(cues, cues[1:]):
        assert a.start <= b.start, "cue start times must not go back"
    for cue in cues:
        assert cue.end > cue.start, f"cue {cue} ends before it starts"


def _unescape(text: str) -> str:
    return VTT_TAG.sub("", text).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# --- transcripts ------------------------------------------------------------------------------------

LOREM = (
    "Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds "
    "that lour'd upon our house in the deep bosom of the ocean buried."
)


def segment(i, start, end, text, words=None, speaker=None) -> Segment:
    return Segment(i, start, end, text, (50364, 400 + i), words, speaker, seek=i * 3000, temperature=0.0, avg_logprob=-0.25, compression_ratio=1.3, no_speech_prob=0.02)


def words_for(text: str, start: float, end: float, speaker=None) -> tuple[Word, ...]:
    tokens = text.split()
    step = (end - start) / len(tokens)
    return tuple(Word(" " + w, start + k * step, start + (k + 0.8) * step, 0.9, speaker) for k, w in enumerate(tokens))


def transcript(*segments: Segment, duration: float | None = None) -> Transcript:
    return Transcript(
        "".join(s.text for s in segments),
        tuple(segments),
        "en",
        0.97,
        duration if duration is not None else (segments[-1].end if segments else 0.0),
        ResultProvenance(model="tiny.en", architecture="whisper", bundle_sha256="ab" * 32, oasr_version="0.1.0"),
        "talk.wav",
    )


@pytest.fixture
def plain() -> Transcript:
    return transcript(
        segment(0, 0.0, 7.5, " " + LOREM),
        segment(1, 7.5, 9.0, " Short one."),
        segment(2, 9.0, 9.0, " Zero length."),
    )


@pytest.fixture
def worded() -> Transcript:
    first, second = LOREM.split("; ")
    return transcript(
        segment(0, 0.0, 6.0, " " + first + ";", words_for(first + ";", 0.0, 6.0)),
        segment(1, 6.2, 12.0, " " + second, words_for(second, 6.2, 12.0)),
        segment(2, 16.0, 18.0, " After a long pause.", words_for("After a long pause.", 16.0, 18.0)),
    )


def _words(cues: list[ParsedCue], strip_speaker=lambda line: line) -> list[str]:
    out = []
    for cue in cues:
        for k, line in enumerate(cue.lines):
            out += (strip_speaker(line) if k == 0 else line).split()
    return out


# --- SRT / VTT validity and line limits ------------------------------------------------------------------


@pytest.mark.parametrize("width, count", [(None, None), (42, None), (42, 2), (20, 1), (16, 3)])
def test_segment_cues_are_valid_and_respect_limits(plain, width, count):
    options = WriterOptions(max_line_width=width, max_line_count=count)
    srt = read_srt(render(plain, "srt", options))
    vtt = read_vtt(render(plain, "vtt", options))
    for cues in (srt, vtt):
        _check_timeline(cues)
        assert _words(cues) == " ".join(s.text for s in plain.segments).split()  # no word lost or repeated
        for cue in cues:
            assert all(len(line) <= (width or 10**6) for line in cue.lines), cue
            assert len(cue.lines) <= (count or 10**6), cue
        # split cues tile their segment: start at its start, end at its end
        assert cues[0].start == 0.0 and any(c.end == 7.5 for c in cues)
    if width is None:
        assert [len(c.lines) for c in srt] == [1, 1, 1]
    if count is not None:
        assert len(srt) > 3  # the long segment became several cues


@pytest.mark.parametrize("width, count", [(None, None), (42, None), (42, 2), (24, 1)])
def test_word_cues_are_valid_and_respect_limits(worded, width, count):
    options = WriterOptions(max_line_width=width, max_line_count=count)
    all_words = [w for s in worded.segments for w in s.words]
    for fmt, reader in (("srt", read_srt), ("vtt", read_vtt)):
        cues = reader(render(worded, fmt, options))
        _check_timeline(cues)
        assert _words(cues) == [w.word.strip() for w in all_words]
        for cue in cues:
            assert all(len(line) <= (width or 10**6) for line in cue.lines), cue
            assert len(cue.lines) <= (count or 10**6)
        starts = {round(w.start, 3) for w in all_words}
        ends = {round(w.end, 3) for w in all_words}
        for cue in cues:  # cue times come from word times
            assert round(cue.start, 3) in starts and round(cue.end, 3) in ends
    cues = read_srt(render(worded, "srt", options))
    if width is None or count is None:
        assert len(cues) == 3  # segments kept
    else:
        pause = [c for c in cues if c.start >= 16.0]
        assert pause and pause[0].lines[0].startswith("After")  # a pause over 3 s starts a new cue


def test_a_long_pause_starts_a_new_cue(worded):
    cues = read_srt(render(worded, "srt", WriterOptions(max_line_width=500, max_line_count=9)))
    assert len(cues) == 2  # the lines have room for everything: only the 4 s pause cuts
    assert cues[1].start == 16.0 and cues[1].lines == ["After a long pause."]


def test_split_segment_cues_tile_the_segment_in_order():
    t = transcript(segment(0, 10.0, 20.0, " aaaa bbbb cccc dddd eeee ffff gggg hhhh"))
    cues = read_srt(render(t, "srt", WriterOptions(max_line_width=9, max_line_count=1)))
    assert [c.lines for c in cues] == [["aaaa bbbb"], ["cccc dddd"], ["eeee ffff"], ["gggg hhhh"]]
    assert [c.start for c in cues] == [10.0, 12.5, 15.0, 17.5]  # times shared by characters
    assert [c.end for c in cues] == [12.5, 15.0, 17.5, 20.0]


def test_a_word_longer_than_the_line_is_cut():
    t = transcript(segment(0, 0.0, 4.0, " Supercalifragilisticexpialidocious!"), segment(1, 4.0, 5.0, " 日本語のテキストはスペースがない"))
    for fmt, reader in (("srt", read_srt), ("vtt", read_vtt)):
        cues = reader(render(t, fmt, WriterOptions(max_line_width=10, max_line_count=2)))
        lines = [line for c in cues for line in c.lines]
        assert all(len(line) <= 10 for line in lines) and all(len(c.lines) <= 2 for c in cues)
        assert "".join(lines) == "Supercalifragilisticexpialidocious!日本語のテキストはスペースがない"


def test_words_without_text_make_no_empty_cue():
    words = (Word(" ", 0.0, 0.5, 0.1), Word("", 0.5, 0.6, 0.1))
    t = transcript(segment(0, 0.0, 0.6, " ", words), segment(1, 1.0, 2.0, " Hi.", (Word(" Hi.", 1.0, 2.0, 0.9),)))
    assert [c.lines for c in read_srt(render(t, "srt"))] == [["Hi."]]
    assert [c.lines for c in read_vtt(render(t, "vtt"))] == [["Hi."]]


def test_word_cutting_matches_openai_whisper(worded):
    """The same cues (times and text) as openai-whisper's SubtitlesWriter on the same result."""
    utils = pytest.importorskip("whisper.utils")
    result = worded.to_dict()
    for width, count in ((None, None), (42, 2), (24, 1), (30, None)):
        for writer_cls, fmt, reader in ((utils.WriteSRT, "srt", read_srt), (utils.WriteVTT, "vtt", read_vtt)):
            buf = __import__("io").StringIO()
            writer_cls(".").write_result(result, buf, {"max_line_width": width, "max_line_count": count, "highlight_words": False})
            theirs = reader(buf.getvalue())
            ours = reader(render(worded, fmt, WriterOptions(width, count)))
            assert ours == theirs, (fmt, width, count)


def test_segment_cues_match_openai_whisper(plain):
    utils = pytest.importorskip("whisper.utils")
    result = dataclasses.replace(plain, segments=plain.segments[:2]).to_dict()  # (a zero-length cue differs)
    buf = __import__("io").StringIO()
    utils.WriteSRT(".").write_result(result, buf, {})
    assert read_srt(render(dataclasses.replace(plain, segments=plain.segments[:2]), "srt")) == read_srt(buf.getvalue())


def test_highlight_words(worded):
    cues = read_vtt(render(worded, "vtt", WriterOptions(highlight_words=True)))
    _check_timeline(cues)
    underlined = [re.findall(r"<u>(.*?)</u>", " ".join(c.lines)) for c in cues]
    all_words = [w.word.strip() for s in worded.segments for w in s.words]
    assert [u[0] for u in underlined if u] == all_words  # each word underlined once, in order
    assert all(len(u) <= 1 for u in underlined)
    with pytest.raises(InputError, match="word timestamps"):
        render(transcript(segment(0, 0, 1, " no words")), "srt", WriterOptions(highlight_words=True))


def test_times_round_to_the_millisecond_and_hours_grow():
    t = transcript(
        segment(0, 59.9996, 61.0004, " rounding"),
        segment(1, 3725.5, 3727.25, " an hour in"),
        segment(2, 363599.0, 363600.0, " a hundred hours"),
    )
    srt = render(t, "srt")
    assert "00:01:00,000 --> 00:01:01,000" in srt
    assert "01:02:05,500 --> 01:02:07,250" in srt
    assert "100:59:59,000 --> 101:00:00,000" in srt
    vtt = render(t, "vtt")
    assert "01:02:05.500 --> 01:02:07.250" in vtt and "00:01:00.000 --> 00:01:01.000" in vtt
    assert [c.start for c in read_srt(srt)] == [60.0, 3725.5, 363599.0]
    read_vtt(vtt)


def test_degenerate_times_still_make_valid_cues():
    t = transcript(segment(0, 5.0, 5.0, " same"), segment(1, 4.0, 3.0, " backwards"), segment(2, -1.0, 0.5, " negative"))
    for fmt, reader in (("srt", read_srt), ("vtt", read_vtt)):
        cues = reader(render(t, fmt))
        _check_timeline(cues)
        assert [c.lines[0] for c in cues] == ["negative", "backwards", "same"]  # sorted by start


def test_escaping():
    t = transcript(segment(0, 0, 2, " if a <b> & c --> d"))
    (cue,) = read_srt(render(t, "srt"))
    assert cue.lines == ["if a <b> & c -> d"]
    vtt = render(t, "vtt")
    (cue,) = read_vtt(vtt)
    assert cue.lines == ["if a &lt;b&gt; &amp; c --&gt; d"]
    assert _unescape(cue.lines[0]) == "if a <b> & c --> d"


def test_empty_transcript():
    t = transcript(duration=3.0)
    assert render(t, "txt") == ""
    assert render(t, "srt") == "" and read_srt("") == []
    assert read_vtt(render(t, "vtt")) == []
    assert render(t, "tsv") == "start\tend\ttext\n"
    assert render(t, "lrc") == ""
    assert json.loads(render(t, "json"))["segments"] == []
    blank = transcript(segment(0, 0, 1, " "), segment(1, 1, 2, ""))
    assert render(blank, "txt") == "" and render(blank, "srt") == ""


# --- speakers ---------------------------------------------------------------------------------------------------


def test_speakers_in_every_format():
    t = transcript(
        segment(0, 0.0, 2.0, " Hello there.", speaker="SPEAKER_00"),
        segment(1, 2.0, 4.0, " General Kenobi.", speaker="SPEAKER_01"),
    )
    assert render(t, "txt") == "[SPEAKER_00] Hello there.\n[SPEAKER_01] General Kenobi.\n"
    srt = read_srt(render(t, "srt"))
    assert [c.lines[0] for c in srt] == ["[SPEAKER_00] Hello there.", "[SPEAKER_01] General Kenobi."]
    vtt = read_vtt(render(t, "vtt"))
    assert [c.lines[0] for c in vtt] == ["<v SPEAKER_00>Hello there.", "<v SPEAKER_01>General Kenobi."]
    data = json.loads(render(t, "json"))
    assert [s["speaker"] for s in data["segments"]] == ["SPEAKER_00", "SPEAKER_01"]


def test_word_speakers_split_cues_and_count_in_the_width():
    words = words_for("one two three", 0.0, 3.0, "A") + words_for("four five six seven eight nine ten", 3.0, 10.0, "B")
    t = transcript(segment(0, 0.0, 10.0, " one two three four five six seven eight nine ten", words))
    for options in (WriterOptions(), WriterOptions(max_line_width=14, max_line_count=2)):
        srt = read_srt(render(t, "srt", options))
        vtt = read_vtt(render(t, "vtt", options))
        _check_timeline(srt)
        for cue in srt:  # a cue never mixes speakers, and says whose it is
            assert re.match(r"\[(A|B)\] ", cue.lines[0])
            assert all(len(line) <= (options.max_line_width or 10**6) for line in cue.lines), cue
        assert [c.lines[0][:4] for c in srt][:1] == ["[A] "]
        assert {c.lines[0][:5] for c in vtt} == {"<v A>", "<v B>"}
        text = " ".join(" ".join(c.lines) for c in srt)
        assert text.index("three") < text.index("[B]")
    assert json.loads(render(t, "json"))["segments"][0]["words"][0]["speaker"] == "A"


# --- JSON, TSV, LRC, TXT ----------------------------------------------------------------------------------------

OPENAI_SEGMENT_KEYS = {"id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob"}


def test_json_follows_openai_whisper_schema(worded, plain):
    data = json.loads(render(worded, "json"))
    assert {"text", "segments", "language"} <= set(data)
    assert data["text"] == worded.text and data["language"] == "en"
    for seg in data["segments"]:
        assert set(seg) == OPENAI_SEGMENT_KEYS | {"words"}
        assert isinstance(seg["tokens"], list) and all(isinstance(t, int) for t in seg["tokens"])
        for word in seg["words"]:
            assert set(word) == {"word", "start", "end", "probability"}
    assert data["provenance"]["model"] == "tiny.en" and data["provenance"]["bundle_sha256"] == "ab" * 32
    assert data["duration"] == worded.duration and data["source"] == "talk.wav"
    for seg in json.loads(render(plain, "json"))["segments"]:
        assert set(seg) == OPENAI_SEGMENT_KEYS  # no "words" without word timestamps


def test_json_is_utf8_and_strict():
    t = transcript(segment(0, 0, 1, " 今日は世界 — naïve café 🎤"))
    t = dataclasses.replace(t, segments=(dataclasses.replace(t.segments[0], avg_logprob=float("-inf")),))
    text = render(t, "json")
    assert "今日は世界 — naïve café 🎤" in text and "\\u" not in text
    data = json.loads(text)
    assert data["segments"][0]["avg_logprob"] is None  # JSON has no -Infinity


def test_tsv_is_openai_whisper_format():
    t = transcript(segment(0, 0.0, 1.2344, " first\tline"), segment(1, 3725.5006, 3726.0, " second\nline"))
    assert render(t, "tsv") == "start\tend\ttext\n0\t1234\tfirst line\n3725501\t3726000\tsecond line\n"


def test_lrc():
    t = transcript(segment(0, 0.0, 1.0, " la"), segment(1, 65.126, 70.0, " di"), segment(2, 3725.5, 3726.0, " da"))
    out = render(t, "lrc")
    assert out == "[00:00.00]la\n[01:05.13]di\n[62:05.50]da\n"
    assert all(re.fullmatch(r"\[\d{2,}:[0-5]\d\.\d{2}\].+", line) for line in out.splitlines())


def test_txt_one_segment_per_line_unicode():
    t = transcript(segment(0, 0, 1, " Bonjour à tous."), segment(1, 1, 2, "  日本語のテキスト  "), segment(2, 2, 3, " two\nlines"))
    assert render(t, "txt") == "Bonjour à tous.\n日本語のテキスト\ntwo lines\n"


# --- registry ---------------------------------------------------------------------------------------------------


def test_registry_and_suffixes(plain):
    assert FORMATS == ("txt", "srt", "vtt", "json", "tsv", "lrc")
    assert set(FORMATS) <= set(writers())
    for name in FORMATS:
        assert isinstance(get_writer(name)(plain, WriterOptions()), str)
        assert format_from_suffix(f"out/talk.{name}") == name
    assert format_from_suffix("TALK.SRT") == "srt"
    assert format_from_suffix("talk.webm") is None and format_from_suffix("talk") is None
    with pytest.raises(InputError, match="unknown output format 'docx'; choose txt, srt"):
        get_writer("docx")


def test_register_a_new_format(plain):
    from oasr import formats

    @register_writer("upper", "up")
    def write_upper(t, options):
        return t.text.upper()

    try:
        assert render(plain, "upper").startswith(" NOW IS")
        assert format_from_suffix("x.up") == "upper"
    finally:
        formats._WRITERS.pop("upper")


def test_writer_options_are_validated():
    with pytest.raises(InputError, match="needs --max-line-width"):
        WriterOptions(max_line_count=2)
    with pytest.raises(InputError, match="at least 1"):
        WriterOptions(max_line_width=0)
