"""Finding, reading and checking ranking profiles: the shipped and user profile folders, `extends`,
every key and type checked (a typo is an error, not a silent default), the TOML a profile prints
as, and the settings the environment may change."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import tomllib
import types
from collections.abc import Mapping
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from memsearch.choices import RERANK_METHODS, switch
from memsearch.errors import InvalidInputError
from memsearch.profiles.schema import (
    ADJUSTMENTS,
    DECAY_CLOCKS,
    DECAY_SHAPES,
    EXPANSION_STAGES,
    SHIPPED_DIR,
    SIGNALS,
    Adjustment,
    Expansion,
    Fusion,
    LegSpec,
    PoolSize,
    Profile,
    Rerank,
    Selection,
    leg_kind,
)


def profile_dirs() -> list[Path]:
    """User profiles first, so a user file of the same name wins over a shipped one."""
    dirs = []
    if home := os.environ.get("MEMSEARCH_HOME"):
        dirs.append(Path(home).expanduser() / "profiles")
    else:
        import platformdirs

        dirs.append(Path(platformdirs.user_config_dir("memsearch", appauthor=False)) / "profiles")
    dirs.append(SHIPPED_DIR)
    return dirs


def available() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in profile_dirs():
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                found.setdefault(path.stem, path)
    return dict(sorted(found.items()))


FileVersion = tuple[Path, int, int]  # a file's path, mtime_ns and size (-1, -1: missing)

_resolved: dict[tuple[str, tuple[FileVersion, ...]], tuple[tuple[FileVersion, ...], Profile]] = {}


def _version(path: Path) -> FileVersion:
    try:
        stat = path.stat()
    except OSError:
        return (path, -1, -1)
    return (path, stat.st_mtime_ns, stat.st_size)


def load_profile(name: str) -> Profile:
    """The named profile, built once per version of the files it is made of (a search loads it
    each time, and building one checks every field's type: milliseconds). A cached profile is
    checked by a stat of each profile folder (a file added, removed or renamed there changes the
    folder's mtime) and of each file it was read from (an edit changes its mtime or size), not by
    listing the folders."""
    folders = tuple(_version(folder) for folder in profile_dirs())
    cached = _resolved.get((name, folders))
    if cached is not None and all(_version(version[0]) == version for version in cached[0]):
        return cached[1]
    read: list[FileVersion] = []
    profile = _load(name, seen=(), read=read)
    if len(_resolved) >= 64:
        _resolved.clear()
    _resolved[(name, folders)] = (tuple(read), profile)
    return profile


def _load(name: str, seen: tuple[str, ...], read: list[FileVersion]) -> Profile:
    paths = available()
    if name not in paths:
        raise InvalidInputError(f"unknown profile {name!r} (available: {', '.join(paths)})")
    if name in seen:
        raise InvalidInputError(f"profile {name!r} extends itself (through {' → '.join(seen)})")
    path = paths[name]
    version = _version(path)
    read.append(version)
    try:
        data = dict(_read(*version))
    except UnicodeDecodeError:
        raise InvalidInputError(f"profile file {path}: not UTF-8 text") from None
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise InvalidInputError(f"profile file {path}: {error}") from None
    base = _load(data.pop("extends"), (*seen, name), read) if "extends" in data else Profile()
    try:
        return _merge(base, data, name)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"profile file {path}: {error}") from None


@functools.lru_cache(maxsize=64)
def _read(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    """A profile file's TOML, parsed once per version of the file (searches load it each time)."""
    return tomllib.loads(path.read_text(encoding="utf-8"))


OLD_NAMES = {"min_score": "fusion_floor"}  # a profile key's name before its rename → its name now


def _merge(base: Profile, data: dict[str, Any], name: str) -> Profile:
    known = set(Profile.__dataclass_fields__)
    for old, new in OLD_NAMES.items():
        if old in data:
            if new in data:
                raise ValueError(f"{old!r} is the old name of {new!r}: give one of them")
            data[new] = data.pop(old)
    _check_keys(data, known, "profile")
    values = asdict(base) | {"name": name}
    for key, value in data.items():
        if key in SECTIONS:
            _check_keys(value, set(values[key] or {}) | _nested_keys(key), key)
            values[key] = (values[key] or {}) | value
        else:
            values[key] = value
    return _build(values)


SECTIONS: dict[str, Any] = {
    "fusion": Fusion, "select": Selection, "pool": PoolSize, "rerank": Rerank, "expand": Expansion,
}  # fmt: skip


def _nested_keys(section: str) -> set[str]:
    return set(SECTIONS[section].__dataclass_fields__)


def _check_keys(data: Any, known: set[str], where: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a table")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {where} (known: {', '.join(sorted(known))})")


def _build(values: dict[str, Any]) -> Profile:
    fusion = dict(values["fusion"])
    fusion["rank_bonus"] = {int(rank): float(bonus) for rank, bonus in fusion.get("rank_bonus", {}).items()}
    select = dict(values["select"])
    if select.get("candidate_limit") is not None:
        select["candidate_limit"] = PoolSize(**select["candidate_limit"])
    adjustments = []
    for item in values["adjust"]:
        entry = dict(item) if isinstance(item, Mapping) else {}
        _check_keys(entry, set(Adjustment.__dataclass_fields__), "adjust")
        adjustments.append(Adjustment(**entry))
    scalars = (
        "name", "summary", "seed", "k", "exhaustive", "drop_superseded", "dense_common_share",
        "session_support_cap", "session_support_share", "neighbours", "environment",
    )  # fmt: skip
    expand = dict(values["expand"])
    expand["stages"] = tuple(expand.get("stages", ()))
    profile = Profile(
        **{key: values[key] for key in scalars},
        legs=_legs(values["legs"]),
        pool=PoolSize(**values["pool"]),
        fusion=Fusion(**fusion),
        fusion_floor=values["fusion_floor"],
        adjust=tuple(adjustments),
        select=Selection(**select),
        ingest_dedup=values["ingest_dedup"],
        rerank=Rerank(**values["rerank"]),
        expand=Expansion(**expand),
    )
    check_types(profile)
    validate(profile)
    return profile


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a value read from TOML has the type a profile field declares (an int is a float)."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_conforms(value, option) for option in get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (bool, str):
        return isinstance(value, hint)
    if origin is Mapping:
        key_hint, value_hint = get_args(hint)
        return isinstance(value, Mapping) and all(
            _conforms(k, key_hint) and _conforms(v, value_hint) for k, v in value.items()
        )
    if origin is tuple:
        return isinstance(value, tuple) and all(_conforms(item, get_args(hint)[0]) for item in value)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _described(hint: Any) -> str:
    names = {float: "a number", int: "a whole number", bool: "true or false", str: "a string", type(None): "absent"}
    if get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_described(option) for option in get_args(hint))
    if get_origin(hint) is Mapping:
        return f"a table of {_described(get_args(hint)[1]).removeprefix('a ')}s"
    return names.get(hint, "a table")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A schema class's field types, resolved once (the schema's classes do not change; a profile
    holds several adjustments)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls)
    return hints


def check_types(instance: Any, where: str = "") -> None:
    """Every field of a profile (and of its parts) has its declared type, or ValueError names it:
    `fusion.rrf_k must be a number, not 'ten'`."""
    hints = _hints(type(instance))
    for spec in fields(instance):
        value, hint = getattr(instance, spec.name), hints[spec.name]
        if not _conforms(value, hint):
            raise ValueError(f"{where}{spec.name} must be {_described(hint)}, not {value!r}")
        if is_dataclass(value):
            check_types(value, f"{where}{spec.name}.")
        elif isinstance(value, tuple):
            for position, item in enumerate(value, start=1):
                if is_dataclass(item):
                    check_types(item, f"{where}{spec.name} {position}: ")


# -- TOML out --------------------------------------------------------------------------------


def _toml_key(key: object) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else _toml_value(text)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # inf and nan are TOML too
    if isinstance(value, str):  # a JSON string is a TOML basic string, once DEL is escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, Mapping):
        items = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def profile_toml(profile: Profile) -> str:
    """The profile as TOML that loads back to the same profile when saved as `<name>.toml` (every
    parameter resolved, no `extends`; absent values are the defaults, so they are left out)."""
    data = profile.to_dict()
    del data["name"]  # a profile's name is its file's
    defaults = asdict(Adjustment(kind=""))
    data["adjust"] = [{k: v for k, v in item.items() if k == "kind" or v != defaults[k]} for item in data["adjust"]]
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}"
        for k, v in data.items()
        if v is not None and not isinstance(v, dict | list)
    ]
    for name, value in data.items():
        if isinstance(value, dict):
            lines += ["", f"[{name}]"]
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None]
    for item in data["adjust"]:
        lines += ["", "[[adjust]]", *(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"


def _legs(value: Any) -> dict[str, str]:
    """A list of specs (each its own name) or a table of name = spec."""
    if isinstance(value, Mapping):
        return {str(name): str(spec) for name, spec in value.items()}
    if isinstance(value, list | tuple):
        return {str(spec): str(spec) for spec in value}
    raise ValueError("legs must be a list of leg specs or a table of name = spec")


def validate(profile: Profile) -> None:
    """Reject profiles the pipeline cannot run, naming the first problem."""
    if not profile.legs:
        raise ValueError("a profile needs at least one leg")
    for name, spec in profile.legs.items():
        try:
            LegSpec.parse(spec)
        except ValueError as error:
            raise ValueError(f"leg {name!r}: {error}") from None
    if profile.fusion.method not in ("rrf", "weighted"):
        raise ValueError(f"fusion.method must be rrf or weighted, not {profile.fusion.method!r}")
    allowed = tuple(profile.legs) if profile.fusion.method == "rrf" else SIGNALS
    if set(profile.fusion.weights) - set(allowed):
        raise ValueError(f"fusion.weights names must be some of {allowed}")
    for adjustment in profile.adjust:
        if adjustment.kind not in ADJUSTMENTS:
            raise ValueError(f"adjust kind must be one of {ADJUSTMENTS}, not {adjustment.kind!r}")
        if adjustment.shape not in DECAY_SHAPES or adjustment.clock not in DECAY_CLOCKS:
            raise ValueError(f"decay shape must be one of {DECAY_SHAPES} and clock one of {DECAY_CLOCKS}")
        if adjustment.kind == "decay" and adjustment.tau_days <= 0:
            raise ValueError("decay tau_days must be positive")
    if not 1 <= profile.k <= 1000:
        raise ValueError("k must be from 1 to 1000")
    for name, lam in (
        ("select.mmr_lambda", profile.select.mmr_lambda),
        ("expand.diverse_lambda", profile.expand.diverse_lambda),
    ):
        if lam is not None and not 0 <= lam <= 1:
            raise ValueError(f"{name} must be from 0 to 1")
    if profile.rerank.method not in RERANK_METHODS or not 1 <= profile.rerank.limit <= 1000:
        raise ValueError(f"rerank.method must be one of {RERANK_METHODS} and rerank.limit from 1 to 1000")
    unknown = set(profile.expand.stages) - set(EXPANSION_STAGES)
    if unknown:
        raise ValueError(f"expand.stages must be some of {EXPANSION_STAGES}, not {sorted(unknown)}")
    if profile.environment not in (None, "CEMS"):
        raise ValueError(f"environment must be CEMS or absent, not {profile.environment!r}")


# -- the seed's environment variables --------------------------------------------------------------


def _env_number(env: Mapping[str, str], name: str, low: float, high: float) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not low <= value <= high:
        raise InvalidInputError(f"must be a number from {low:g} to {high:g}, not {raw!r}", field=name)
    return value


def with_environment(profile: Profile, environ: Mapping[str, str] | None = None) -> Profile:
    """The profile with the seed's environment variables applied (profiles with `environment =
    "CEMS"`): CEMS_HYBRID_VECTOR_WEIGHT w splits the list weights, vector lists × 2w and lexical
    lists × 2(1 − w) (unset: as the profile says, an even split); CEMS_RERANK_INPUT_LIMIT;
    CEMS_PROJECT_BOOST_FACTOR, CEMS_PROJECT_PENALTY_FACTOR, and CEMS_ENABLE_PROJECT_PENALTY=false
    (no penalty for other projects or none)."""
    if profile.environment != "CEMS":
        return profile
    env = os.environ if environ is None else environ
    from dataclasses import replace

    if (weight := _env_number(env, "CEMS_HYBRID_VECTOR_WEIGHT", 0, 1)) is not None:
        share = {"vector": 2 * weight, "lexical": 2 * (1 - weight), "time": 1.0}
        weights = {
            name: profile.fusion.weights.get(name, 1.0) * share[leg_kind(spec)] for name, spec in profile.legs.items()
        }
        profile = replace(profile, fusion=replace(profile.fusion, weights=weights))
    if (limit := _env_number(env, "CEMS_RERANK_INPUT_LIMIT", 1, 1000)) is not None:
        profile = replace(profile, rerank=replace(profile.rerank, limit=int(limit)))
    same = _env_number(env, "CEMS_PROJECT_BOOST_FACTOR", 0, 100)
    other = _env_number(env, "CEMS_PROJECT_PENALTY_FACTOR", 0, 100)
    given = env.get("CEMS_ENABLE_PROJECT_PENALTY", "")
    penalty = switch(given) if given.strip() else True
    if penalty is None:
        raise InvalidInputError(f"must be true or false, not {given.strip()!r}", field="CEMS_ENABLE_PROJECT_PENALTY")
    adjust = []
    for item in profile.adjust:
        if item.kind == "project":
            item = replace(item, same=item.same if same is None else same, other=item.other if other is None else other)
            if not penalty:
                item = replace(item, other=1.0, none=1.0)
        adjust.append(item)
    return replace(profile, adjust=tuple(adjust))
