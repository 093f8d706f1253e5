"""precsim.Recipe: a precision recipe as `precsim train` resolves it (the format and rounding of
every tensor role, the GEMM operand scaling, loss scaling, ...), held as the C++ engine's typed
recipe. Presets, validation and messages are the engine's; this module only wraps them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Union

from . import _precsim as _c


def _frozen(value: Any) -> Any:
    """A JSON value as nested tuples, for equality and hashing (dict order does not matter)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[]",) + tuple(_frozen(v) for v in value)
    return value


def _diff(keys: Dict[str, Any], base: Dict[str, Any]) -> Dict[str, Any]:
    """The merge patch that turns base into keys: only what differs, nested objects by key."""
    out: Dict[str, Any] = {}
    for k in keys.keys() | base.keys():
        if k not in keys:
            out[k] = None
        elif isinstance(keys[k], dict) and isinstance(base.get(k), dict):
            sub = _diff(keys[k], base[k])
            if sub:
                out[k] = sub
        elif k not in base or _frozen(keys[k]) != _frozen(base[k]):
            out[k] = keys[k]
    return dict(sorted(out.items()))


@dataclass(frozen=True, eq=True, repr=False)
class Recipe:
    """A resolved, validated recipe. Build one with Recipe.preset(name), Recipe.from_dict(d) or
    r.replace(...); precsim.torch, precsim.Optimizer and precsim.train take a Recipe wherever they
    take a preset name or a recipe dict. Equal recipes have the same name and every key equal."""

    name: str
    preset: str
    _keys: tuple = field(repr=False)
    _typed: Any = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        # dataclasses.replace(r, name=...) would bypass validation: only the engine makes recipes.
        t = self._typed
        if not isinstance(t, _c.TypedRecipe) or (t.name, t.preset) != (self.name, self.preset):
            raise TypeError("build a Recipe with Recipe.preset(), Recipe.from_dict() or recipe.replace()")

    @classmethod
    def _of(cls, typed: Any) -> Recipe:
        return cls(typed.name, typed.preset, _frozen(typed.to_dict()), typed)

    @classmethod
    def _from_preset(cls, name: str) -> Recipe:
        """Recipe.preset(name): the preset `name` (one of precsim.recipes()) with every key
        explicit; an unknown name raises ValueError listing the known ones."""
        if not isinstance(name, str):
            raise TypeError(f"a recipe preset name is a str, not {type(name).__name__}")
        return cls._of(_c.TypedRecipe.from_preset(name))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Recipe:
        """A recipe object of a train config: {"name", "preset", keys...}, keys as `precsim train
        --config-help` lists them, each optional (unspecified keys come from the preset). The
        preset defaults to the name, the name to the preset. Validated as a config's recipe is:
        ValueError with the engine's message (an unknown key is named with the valid ones)."""
        if not isinstance(d, Mapping):
            raise TypeError(f"a recipe dict must be a dict, not {type(d).__name__}")
        return cls._of(_c.TypedRecipe.from_dict(dict(d)))

    def to_dict(self) -> Dict[str, Any]:
        """Every key of the recipe and its name, as a new plain dict (JSON-able): a train config's
        recipe object; Recipe.from_dict(r.to_dict()) == r."""
        return self._typed.to_dict()

    def replace(self, **changes: Any) -> Recipe:
        """A new recipe with top-level keys changed, validated again, like dataclasses.replace.
        Dict values merge into the current ones as a JSON merge patch does, so
        r.replace(gemm={"forward": {"accum": "h100"}}) changes that one key; None resets a key to
        the preset's value. preset= only relabels (every key stays explicit): start from
        Recipe.preset(other) to take another preset's keys."""
        return Recipe._of(self._typed.replace(changes))

    def layer_recipes(self, layers: int) -> List[Recipe]:
        """The recipe of each linear layer of an MLP with `layers` layers, as precsim train resolves
        keep_bf16_layers and per-layer keys; [] when every layer takes this recipe."""
        return [Recipe._of(t) for t in self._typed.layer_recipes(int(layers))]

    def __repr__(self) -> str:
        # The keys that differ from the preset, as the replace() call that makes this recipe.
        changes = _diff(self.to_dict(), Recipe._from_preset(self.preset).to_dict())
        changes.pop("preset", None)
        text = f"Recipe.preset({self.preset!r})"
        if changes:
            text += ".replace(" + ", ".join(f"{k}={v!r}" for k, v in changes.items()) + ")"
        return text

    def __reduce__(self):
        return Recipe.from_dict, (self.to_dict(),)


class _PresetOrName:
    """Recipe.preset(name) builds a preset; recipe.preset is the name of the preset it starts from.
    A descriptor without __set__, so a recipe's own field shadows it on instances."""

    __doc__ = Recipe._from_preset.__doc__

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        return (cls or type(obj))._from_preset


# Set after @dataclass: in the class body it would read as the default of the field `preset`.
Recipe.preset = _PresetOrName()  # type: ignore[assignment]

RecipeLike = Union[Recipe, str, Mapping[str, Any]]


def as_recipe(recipe: RecipeLike, what: str = "recipe") -> Recipe:
    """A Recipe, a preset name or a recipe dict, as a Recipe."""
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str):
        return Recipe._from_preset(recipe)
    if isinstance(recipe, Mapping):
        return Recipe.from_dict(recipe)
    raise TypeError(f"{what} must be a precsim.Recipe, a preset name or a dict, not {type(recipe).__name__}")
