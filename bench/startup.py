"""Start-up benchmark: what a search costs from a fresh shell, against `python -c "import numpy"`.

Each round runs every command once as a fresh process, in a rotated order (rounds take turns, so
a burst of load on the shared machine lands on every command alike); the figures are the medians
of wall time per command, and their ratios to the floor measured in the same run:

- floor: `python -c "import numpy"` (the interpreter and numpy: what any numpy tool pays)
- `memsearch --help`
- `memsearch search QUERY --mode lexical` (in this process: --no-server)
- `memsearch search QUERY` (hybrid, in this process: the query is embedded by the ONNX model)
- `memsearch search QUERY` through a running `memsearch serve` of the same store (started here
  as autoserve starts one: `serve --port 0 --idle-exit SECONDS`)

Targets (issue 32): hybrid <= 1.5x the floor, lexical <= 1.2x, through a server <= 1x, judged
on wall time (what a user, or hyperfine, sees: numpy's import runs OpenBLAS threads on every
core, so the floor's CPU time exceeds its wall time and CPU ratios flatter memsearch) of a
regular install. By default the commands are those of a regular (non-editable) install: a wheel
built from this tree, installed (--no-deps, bytecode compiled) into a scratch venv under --out
whose dependencies are this venv's site-packages (a path in a .pth file: their own .pth files,
such as this tree's editable-install finder, are not run). The floor runs in that venv too. An
editable install (--install editable: this venv's console script) pays, in every process, the
finder's start (pathlib, importlib.util, ...): the floor as well, which hides part of memsearch's own.
The searches print a table (the default format) into a pipe, and record accesses (they write).

The store is --size memories of bench/bench.py's synthetic corpus embedded with the bundled
model (built once under --out; the model's ONNX export is cached in ~/.cache/memsearch).

    python bench/startup.py --rounds 15
    python bench/startup.py --rounds 15 --baseline DIR   # DIR: `git archive REV memsearch | tar -x -C DIR`
    python bench/startup.py --inside     # where the model's start goes (CPU ms by stage)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2025, 6, 1, tzinfo=UTC)
QUERY = "deploy key"


def log(message: str) -> None:
    print(f"[startup-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def build_store(size: int, out: Path) -> Path:
    import bench as corpus_generator  # bench/bench.py: the synthetic corpus
    from memsearch.api import Memsearch
    from memsearch.models import NewMemory

    path = out / f"startup-{size}.db"
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    log(f"building a {size}-memory store at {path} (embedding with the bundled model)")
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with Memsearch(partial) as ms:
        ms.add_many([NewMemory.from_json(record) for record in corpus_generator.corpus(size, 7, NOW)])
    partial.rename(path)
    return path


def memsearch_command(python: Path) -> list[str]:
    """The console script next to `python` (what a shell runs), else `python -m memsearch`."""
    script = python.with_name("memsearch")
    return [str(script)] if script.exists() else [str(python), "-m", "memsearch"]


def regular_install(out: Path) -> Path:
    """A scratch venv under `out` with this tree installed as a user installs it (a wheel, not
    editable); its interpreter. Its dependencies are this venv's, through a .pth file."""
    venv, wheels = out / "installed", out / "wheels"
    python = venv / "bin" / "python"
    for stale in (wheels, ROOT / "build"):  # setuptools' build folder keeps modules the tree has dropped
        shutil.rmtree(stale, ignore_errors=True)
    log("building a wheel of this tree and installing it in a scratch venv")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)])
    if not python.exists():
        run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())  # fmt: skip
    (site / "bench-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = wheels.glob("memsearch-*.whl")
    install = [*pip, "--python", str(python), "install", "--no-deps", "--force-reinstall", "-q", str(wheel)]
    run(install)
    return python


def run(command: list[str]) -> None:
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")


def environment(home: Path, bytecode: bool) -> dict[str, str]:
    """No user config changes what is measured, and memsearch finds its folders as a user's does
    (no MEMSEARCH_HOME, which spares platformdirs' import: the config and profile folders are
    XDG folders under `home`; the model cache is the user's). Python's bytecode is cached (as an
    installed package has it) unless --no-bytecode: then memsearch's modules compile on every call."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSEARCH_")}
    env["XDG_CONFIG_HOME"], env["XDG_DATA_HOME"] = str(home / "config"), str(home / "data")
    for folder in ("config", "data"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def start_server(ms: list[str], db: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    from memsearch.discovery import discovery_path

    discovery = discovery_path(db)
    process = subprocess.Popen(
        [*ms, "serve", "--db", str(db), "--port", "0", "--idle-exit", "3600"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:  # (a server of this store already running: stop it first)
            raise SystemExit(f"serve exited with {process.returncode}")
        try:
            if json.loads(discovery.read_text())["pid"] == process.pid:  # this server's, not another's
                return process
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    process.kill()
    raise SystemExit("serve did not start")


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system: less moved by other processes on a loaded machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command, env=env, cwd=env["XDG_CONFIG_HOME"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120
    )  # in a folder of no package (`python -c` puts the working folder first on sys.path)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def inside() -> None:
    """Where a fresh hybrid search's model start goes, in CPU time of this process (run it in a
    fresh process: each import is measured once): numpy, onnxruntime and tokenizers imported, the
    tokenizer loaded, the ONNX session made (from its optimised copy), one query embedded."""

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    stages: dict[str, float] = {}
    mark = cpu()

    def stage(name: str) -> None:
        nonlocal mark
        now = cpu()
        stages[name] = round((now - mark) * 1000, 1)
        mark = now

    import numpy

    stage("import numpy")
    import onnxruntime  # noqa: F401

    stage("import onnxruntime (after numpy)")
    import tokenizers

    stage("import tokenizers")
    from memsearch.embedding import resolve_model
    from memsearch.embedding.onnx import export_dir, load_session

    stage("import memsearch.embedding")
    folder = export_dir(resolve_model())
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    stage("tokenizer.json loaded")
    session = load_session(folder / "model.onnx")
    stage("ONNX session made (optimised copy)")
    ids = numpy.array([tokenizer.encode(QUERY).ids], dtype=numpy.int64)
    feeds = {"input_ids": ids, "attention_mask": numpy.ones_like(ids), "token_type_ids": numpy.zeros_like(ids)}
    session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})
    stage("one query embedded")
    print(f"CPU ms by stage (load {load_average()}):")
    for name, ms in stages.items():
        print(f"  {name:40} {ms:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path("/tmp/memsearch-bench-startup"))
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    parser.add_argument("--inside", action="store_true", help="CPU time of the model's start, stage by stage.")
    parser.add_argument("--no-bytecode", action="store_true", help="Measure with PYTHONDONTWRITEBYTECODE=1.")
    parser.add_argument(
        "--install",
        choices=("regular", "editable"),
        default="regular",
        help="regular (default): a wheel of this tree in a scratch venv, as users have it; editable: this venv.",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="A folder holding another memsearch package (e.g. `git archive main memsearch | tar -x -C DIR`): "
        "its searches, through PYTHONPATH, take turns with these.",
    )
    parser.add_argument(
        "--sqlite",
        help="Also run the searches with MEMSEARCH_SQLITE=THIS (this memsearch on another SQLite driver: "
        "sqlite3, sqlean), taking turns with these.",
    )
    args = parser.parse_args()

    if args.inside:  # before anything imports numpy
        inside()
        return
    db = build_store(args.size, args.out)
    home = args.out / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = environment(home, bytecode=not args.no_bytecode)
    python = Path(sys.executable) if args.install == "editable" else regular_install(args.out)
    ms = memsearch_command(python)
    search = [*ms, "search", QUERY, "--db", str(db)]
    environments: dict[str, dict[str, str]] = {}
    commands = {
        "floor: python -c 'import numpy'": [str(python), "-c", "import numpy"],
        "memsearch --help": [*ms, "--help"],
        "search --mode lexical": [*search, "--mode", "lexical", "--no-server"],
        "search --mode lexical --format json": [*search, "--mode", "lexical", "--no-server", "--format", "json"],
        "search (hybrid)": [*search, "--mode", "hybrid", "--no-server"],
        "search (hybrid) through serve": [*search, "--mode", "hybrid"],
    }
    if args.baseline is not None:
        base_env = {**env, "PYTHONPATH": str(args.baseline.resolve())}
        for name in [n for n in commands if n.startswith("search")]:
            commands[f"{name} [baseline]"] = commands[name]
            environments[f"{name} [baseline]"] = base_env
    if args.sqlite is not None:
        driver_env = {**env, "MEMSEARCH_SQLITE": args.sqlite}
        for name in [n for n in commands if n.startswith("search") and "[" not in n]:
            commands[f"{name} [{args.sqlite}]"] = commands[name]
            environments[f"{name} [{args.sqlite}]"] = driver_env
    server = start_server(ms, db, env)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    loads = [load_average()]
    names = list(commands)
    try:
        for name, command in commands.items():  # warm the page cache, the bytecode and the model's files
            timed(command, environments.get(name, env))
        for round_ in range(args.rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                wall, cpu = timed(commands[name], environments.get(name, env))
                walls[name].append(wall)
                cpus[name].append(cpu)
        loads.append(load_average())
    finally:
        server.terminate()
        server.wait(timeout=60)
    floor_wall, floor_cpu = statistics.median(walls[names[0]]), statistics.median(cpus[names[0]])
    rows = []
    bytecode = "not cached (PYTHONDONTWRITEBYTECODE=1)" if args.no_bytecode else "cached"
    print(f"\nfresh processes, {args.rounds} rounds taking turns, {args.size} memories, bytecode {bytecode}, "
          f"{args.install} install")  # fmt: skip
    print(f"load average (1, 5, 15 min) before / after: {loads[0]} / {loads[-1]}; {os.cpu_count()} cores")
    print(f"| {'command':48} | wall median s | x floor | CPU median s | x floor |")
    print(f"|{'-' * 50}|--------------:|--------:|-------------:|--------:|")
    for name in names:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        rows.append({"command": name, "wall_s": wall, "wall_ratio": wall / floor_wall, "cpu_s": cpu,
                     "cpu_ratio": cpu / floor_cpu})  # fmt: skip
        print(f"| {name:48} | {wall:13.3f} | {wall / floor_wall:7.2f} | {cpu:12.3f} | {cpu / floor_cpu:7.2f} |")
    if args.json:
        document = {"load": loads, "rounds": args.rounds, "size": args.size, "bytecode": bytecode,
                    "install": args.install, "rows": rows}  # fmt: skip
        args.json.write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
