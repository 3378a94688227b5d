"""The committed completion scripts match the CLI, and they work."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperGroup, TyperOption

from memsearch.cli.app import app
from memsearch.cli.completions import FILES, SHELLS, generate, main
from memsearch.profiles.loading import available

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {shell: ROOT / "completions" / FILES[shell] for shell in SHELLS}
GROUP = typer.main.get_command(app)
assert isinstance(GROUP, TyperGroup)
COMMANDS = GROUP.commands


@pytest.mark.parametrize("shell", SHELLS)
def test_committed_script_is_current(shell: str) -> None:
    path = SCRIPTS[shell]
    assert path.exists(), f"{path} is missing: run `python -m memsearch.cli.completions`"
    assert path.read_text(encoding="utf-8") == generate(shell), (
        f"{path} is stale: run `python -m memsearch.cli.completions` and commit the result"
    )


def test_check_mode_agrees() -> None:
    assert main(["--check"]) == 0


def test_output_does_not_depend_on_hash_seed() -> None:
    # Typer names the help option from a set; the generator must not let that order leak out.
    code = "from memsearch.cli.completions import generate; print(''.join(map(generate, ('bash', 'zsh', 'fish'))))"
    expected = "".join(map(generate, SHELLS)) + "\n"
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120
        )
        assert out.stdout == expected, f"output differs with PYTHONHASHSEED={seed}"


def _section(shell: str, script: str, command: str | None) -> str:
    """The part of `script` that completes `command` (None: the top level)."""
    if shell == "fish":
        condition = "-n __fish_memsearch_using " if command is None else f"-n '__fish_memsearch_using {command}'"
        return "\n".join(line for line in script.splitlines() if condition in line)
    function = "_memsearch" if command is None else f"_memsearch_{command}"
    match = re.search(rf"^{function}\(\) \{{\n(.*?)^\}}", script, re.M | re.S)
    assert match, f"no function {function} in the {shell} script"
    return match.group(1)


def _mentions(shell: str, section: str, option: str) -> bool:
    if shell == "fish":  # fish spells options as `-l mode` and `-s m`
        option = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", section) is not None


@pytest.mark.parametrize("shell", SHELLS)
def test_script_covers_every_command_and_option(shell: str) -> None:
    # Walks the app independently of the generator, so a command or option it drops is caught.
    script = generate(shell)
    top = _section(shell, script, None)
    for option in ("--help", "-h", "--version", "--debug"):
        assert _mentions(shell, top, option), f"{shell}: global option {option} missing"
    for name, command in COMMANDS.items():
        assert re.search(rf"(?<![\w-]){name}(?![\w-])", top), f"{shell}: subcommand {name} not offered"
        section = _section(shell, script, name)
        assert _mentions(shell, section, "--help"), f"{shell}: {name} --help missing"
        for param in command.params:
            if not isinstance(param, TyperOption):
                continue
            for option in [*param.opts, *param.secondary_opts]:
                assert _mentions(shell, section, option), f"{shell}: {name} {option} missing"
            for choice in param.type_descriptor.choices or ():
                assert re.search(rf"\b{choice.value}\b", section), f"{shell}: {name} {param.opts[0]} {choice.value}"


def _bash_complete(*words: str, env: dict[str, str] | None = None) -> list[str]:
    """What the bash script offers for `words`, the last one being completed."""
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {SCRIPTS['bash']}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        'complete -p memsearch >/dev/null; _memsearch; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(
        ["bash", "-c", program], cwd=ROOT, capture_output=True, text=True, check=True, env=env, timeout=60
    )
    return [line for line in out.stdout.splitlines() if line]


def test_bash_completes_subcommands() -> None:
    assert _bash_complete("memsearch", "sea") == ["search"]
    assert "search" in _bash_complete("memsearch", "--debug", "")


def test_bash_completes_choices() -> None:
    assert _bash_complete("memsearch", "search", "--mode", "") == ["auto", "vector", "hybrid", "lexical"]
    assert _bash_complete("memsearch", "search", "--mode", "=", "h") == ["hybrid"]  # --mode=h
    assert _bash_complete("memsearch", "list", "-f", "json") == ["json", "jsonl"]


def test_bash_completes_options_and_paths() -> None:
    assert "--explain" in _bash_complete("memsearch", "search", "--mode", "hybrid", "--ex")
    assert _bash_complete("memsearch", "add", "--key", "") == []  # a free value is not an option
    assert "pyproject.toml" in _bash_complete("memsearch", "import", "py")
    assert "memsearch" in _bash_complete("memsearch", "search", "--model", "mem")


# -- profile names: the shipped ones and the user's, found by the shell when completing -------------


@pytest.fixture
def user_profiles(isolated_home: Path) -> list[str]:
    """A profile of the user's, and one that overrides a shipped one; every name memsearch knows."""
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    for name in ("my-recall", "default"):
        (folder / f"{name}.toml").write_text('follows = "default"\n', encoding="utf-8")
    names = sorted(available())
    assert "my-recall" in names and "pgvector" in names
    return names


def test_bash_completes_profile_names(user_profiles: list[str]) -> None:
    offered = _bash_complete("memsearch", "search", "--profile", "")
    assert sorted(offered) == user_profiles  # each once: the user's default overrides the shipped one
    assert _bash_complete("memsearch", "search", "-p", "my") == ["my-recall"]
    assert _bash_complete("memsearch", "eval", "data.json", "--profile", "=", "pg") == ["pgvector"]
    assert "my-recall" in _bash_complete("memsearch", "import", "-", "--profile", "")


def test_bash_finds_the_user_config_dirs_profiles(tmp_path: Path) -> None:
    """Without MEMSEARCH_HOME the user's profiles are in the user config dir, as for memsearch."""
    config = tmp_path / "with space" / "config"
    (config / "memsearch" / "profiles").mkdir(parents=True)
    (config / "memsearch" / "profiles" / "mine.toml").write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "MEMSEARCH_HOME"} | {"XDG_CONFIG_HOME": str(config)}
    assert _bash_complete("memsearch", "search", "--profile", "mi", env=env) == ["mine"]
    assert "mine" not in _bash_complete("memsearch", "search", "--profile", "")


def test_fish_completes_profile_names(user_profiles: list[str]) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    program = f"source {SCRIPTS['fish']}; complete -C 'memsearch search --profile '"
    out = subprocess.run(["fish", "--no-config", "-c", program], capture_output=True, text=True, check=True, timeout=60)
    assert sorted(line.split("\t")[0] for line in out.stdout.splitlines()) == user_profiles


# zsh completes only in an interactive shell's line editor: one runs in a pseudo-terminal, with
# compadd wrapped to print what it is given (HIT:name), then a key that prints ENDMARK and exits.
_ZSH_CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=''; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z 'compadd () { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi;
  local -a hits; builtin compadd -A hits "$@"; local ret=$?; (( $#hits )) && print -l -- HIT:${^hits}; return ret; }'
zpty -w z 'finish () { print -- EN""DMARK; exit }; zle -N finish; bindkey "^X" finish'
zpty -w z "$2"$'\t'$'\x18'
out=""
while zpty -r z line; do out+=$line; [[ $line == *ENDMARK* ]] && break; done
zpty -d z
print -r -- $out
"""


def _zsh_complete(line: str) -> list[str]:
    """What the zsh script offers after `line` (as typed, then Tab)."""
    capture = ["zsh", "-f", "-c", _ZSH_CAPTURE, "zsh", str(SCRIPTS["zsh"].parent), line]
    out = subprocess.run(capture, capture_output=True, text=True, check=True, timeout=60)
    return sorted(set(re.findall(r"HIT:([\w.-]+)", out.stdout)))


def test_zsh_completes_profile_names(user_profiles: list[str]) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    assert _zsh_complete("memsearch search --profile ") == user_profiles
    assert _zsh_complete("memsearch search -p my") == ["my-recall"]


@pytest.mark.parametrize("shell", SHELLS)
def test_script_syntax(shell: str) -> None:
    if shell != "bash" and shutil.which(shell) is None:  # bash is always there and always checked
        pytest.skip(f"{shell} is not installed, so `{shell} -n` cannot check the {shell} script")
    result = subprocess.run([shell, "-n", str(SCRIPTS[shell])], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
