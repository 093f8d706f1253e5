"""Training experiments and their reports (`precsim train`, `precsim report`)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Union

from . import _precsim as _c
from ._recipe import Recipe

Config = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def config_arg(config: Config) -> Union[Dict[str, Any], str]:
    """A train config as the engine takes it: a path as a str (read by C++), a dict with any
    precsim.Recipe among its recipes written as its dict."""
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config)
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict or a path to a JSON file, not {type(config).__name__}")
    out = dict(config)
    if isinstance(out.get("recipes"), (list, tuple)):
        out["recipes"] = [r.to_dict() if isinstance(r, Recipe) else r for r in out["recipes"]]
    return out


def train(config: Config, *, deterministic: bool = True, out: Union[str, "os.PathLike[str]", None] = None) -> Dict[str, Any]:
    """Runs `precsim train` on a configuration (a dict, or the path of a JSON file; keys as
    `precsim train --config-help` lists them) and returns its report as a dict. Its "recipes" may
    hold precsim.Recipe objects beside preset names and recipe dicts. deterministic=False adds the
    environment block (date, host, timings). out: also write the report there, atomically, as
    --out does (the folder is checked for writability first: OSError).

    Ctrl-C (SIGINT) stops the run after the step in progress, as it stops the CLI: the report of
    what finished, "status": "interrupted", is written to `out` and is the `report` attribute of
    the KeyboardInterrupt then raised."""
    return _c.train(config_arg(config), bool(deterministic), None if out is None else os.fspath(out))


def recipes() -> List[str]:
    """The recipe preset names."""
    return list(_c.recipe_presets())
