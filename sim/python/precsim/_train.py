"""Training experiments and their reports (`precsim train`, `precsim report`)."""
import json
import os

from . import _precsim as _c


def _json_text(obj, what):
    if isinstance(obj, (str, os.PathLike)):
        with open(obj, encoding="utf-8") as f:
            return f.read()
    if isinstance(obj, dict):
        return json.dumps(obj)
    raise TypeError(f"{what} must be a dict or a path to a JSON file, not {type(obj).__name__}")


def train(config, *, deterministic=True):
    """Runs `precsim train` on a configuration (a dict, or the path of a JSON file; keys as
    `precsim train --config-help` lists them) and returns its report as a dict. deterministic=False
    adds the environment block (date, host, timings)."""
    return json.loads(_c.train(_json_text(config, "config"), bool(deterministic)))


def recipes():
    """The recipe preset names."""
    return list(_c.recipe_presets())
