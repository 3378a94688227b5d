"""Ranking profiles: data (TOML) that picks and parameterises the pipeline's stages.

The shipped profiles live beside this file; users add their own as `<name>.toml` in the
profiles dir (`$MEMSEARCH_HOME/profiles`, else the user config dir), optionally starting from
another with `extends = "name"`. Every key is checked: a typo is an error, not a silent default.
"""

from __future__ import annotations

from memsearch.profiles.loading import (
    available,
    check_types,
    load_profile,
    profile_dirs,
    profile_toml,
    validate,
    with_environment,
)
from memsearch.profiles.schema import (
    ADJUSTMENTS,
    DECAY_CLOCKS,
    DECAY_SHAPES,
    EXPANSION_STAGES,
    LEG_KINDS,
    LEG_SPEC_FORM,
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
    leg_models,
)

__all__ = [
    "ADJUSTMENTS",
    "DECAY_CLOCKS",
    "DECAY_SHAPES",
    "EXPANSION_STAGES",
    "LEG_KINDS",
    "LEG_SPEC_FORM",
    "SHIPPED_DIR",
    "SIGNALS",
    "Adjustment",
    "Expansion",
    "Fusion",
    "LegSpec",
    "PoolSize",
    "Profile",
    "Rerank",
    "Selection",
    "available",
    "check_types",
    "leg_kind",
    "leg_models",
    "load_profile",
    "profile_dirs",
    "profile_toml",
    "validate",
    "with_environment",
]
