"""Which modules of a model emulate() covers and under which recipe: one recipe or fully qualified
name patterns ({"model.layers.*.mlp.*": "bf16-amp", "lm_head": "fp32"}), a `layers` list or
predicate, torchao's filter_fn(module, fqn), and the recipe's per-layer keys (keep_bf16_layers)
counted in the model's blocks; and the stable index of each module that keys its products."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Union

from torch import nn

import precsim
from precsim._recipe import Recipe, RecipeLike, as_recipe

Layers = Union[None, Iterable[str], Callable[[str, nn.Module], bool]]


@dataclass
class Plan:
    recipes: Dict[str, Optional[Recipe]]  # fqn -> the recipe of its own products (None: not emulated)
    index: Dict[str, int]                 # fqn -> stable index (modules owning parameters first)
    weight_modules: List[str]             # selected modules owning a matrix weight, in module order


def _names_message(names: List[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:60])
    return f"the model's modules are: {shown}" + (f", ... ({len(names)} in all)" if len(names) > 60 else "")


def _recipe_keys() -> set:
    return set(precsim.Recipe._from_preset("fp32").to_dict()) | {"name", "preset", "keep_bf16_layers", "layers"}


def _patterns(recipe: Any, names: List[str]) -> Dict[str, Recipe]:
    """{pattern: Recipe}; a single recipe is the pattern '*'."""
    if isinstance(recipe, Mapping) and recipe and not (set(recipe) & _recipe_keys()):
        out = {str(p): as_recipe(r, f"recipe of pattern {p!r}") for p, r in recipe.items()}
        for p in out:
            if not any(fnmatch.fnmatchcase(n, p) for n in names):
                raise ValueError(f"module pattern {p!r} matches no module; {_names_message(names)}")
        return out
    return {"*": as_recipe(recipe)}


def _owns_matrix(m: nn.Module) -> bool:
    return any(p is not None and p.dim() >= 2 for p in m._parameters.values())


def _blocks(model: nn.Module) -> List[str]:
    """The children of the model's largest nn.ModuleList (its blocks), or [] when it has none."""
    lists = [(len(m), name) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return []
    n, name = max(lists, key=lambda t: t[0])
    return [f"{name}.{i}" if name else str(i) for i in range(n)]


def _selected(model: nn.Module, names: List[str], layers: Layers, filter_fn: Any) -> Callable[[str], bool]:
    mods = dict(model.named_modules())
    chosen = set(names)
    if layers is not None and not callable(layers):
        wanted = set(layers)
        missing = sorted(wanted - chosen)
        if missing:
            raise ValueError(f"layers {missing} are not modules of the model; {_names_message(names)}")
        chosen = wanted
    elif callable(layers):
        chosen = {n for n in names if layers(n, mods[n])}
    if filter_fn is not None:
        chosen = {n for n in chosen if filter_fn(mods[n], n)}

    def covered(fqn: str) -> bool:  # the module or one of its ancestors is chosen
        parts = fqn.split(".") if fqn else []
        return any(".".join(parts[:i]) in chosen for i in range(len(parts), -1, -1))
    return covered


def _ancestry(fqn: str) -> List[str]:
    parts = fqn.split(".") if fqn else []
    return [".".join(parts[:i]) for i in range(len(parts), -1, -1)]


def make_plan(model: nn.Module, recipe: Any, layers: Layers, filter_fn: Any) -> Plan:
    named = list(model.named_modules())
    names = [n for n, _ in named]
    patterns = _patterns(recipe, names)
    covered = _selected(model, names, layers, filter_fn)
    base: Dict[str, Optional[Recipe]] = {}
    for fqn in names:
        hit = next((r for a in _ancestry(fqn) for p, r in patterns.items() if fnmatch.fnmatchcase(a, p)), None)
        base[fqn] = hit if covered(fqn) else None
    weight_mods = [n for n, m in named if _owns_matrix(m) and not isinstance(m, nn.Embedding)]
    _per_layer(base, _blocks(model), weight_mods)
    owners = [n for n, m in named if any(p is not None for p in m._parameters.values())]
    index = {n: i for i, n in enumerate(owners + [n for n in names if n not in set(owners)])}
    selected = [n for n, m in named if _owns_matrix(m) and base[n] is not None]
    _check_something(model, named, base, names)
    return Plan(base, index, selected)


def _may_multiply(m: nn.Module) -> bool:
    # A module of the user's own may multiply in its forward; torch's built-in ones without a
    # matrix weight (activations, norms, pooling, containers) never do.
    return _owns_matrix(m) or not type(m).__module__.startswith("torch.nn.")


def _check_something(model: nn.Module, named: list, base: Dict[str, Optional[Recipe]], names: List[str]) -> None:
    covered = [n for n, m in named if base[n] is not None]
    if not covered:
        raise ValueError(f"nothing to emulate: the selection leaves out every module; {_names_message(names)}")
    if not any(_may_multiply(m) for n, m in named if base[n] is not None):
        what = f"{type(model).__name__} has" if len(covered) == len(names) else f"the selected modules {covered} have"
        raise ValueError(f"nothing to emulate: {what} no module with matrix products (no Linear, convolution, "
                         f"embedding or module of its own); {_names_message(names)}")


def _per_layer(base: Dict[str, Optional[Recipe]], blocks: List[str], weight_mods: List[str]) -> None:
    """Per-layer keys (keep_bf16_layers, layers): layer i is block i of the largest ModuleList, or,
    in a model without one, its i-th module owning a matrix weight (as precsim train counts an
    MLP's layers)."""
    groups = blocks or weight_mods
    cache: Dict[int, List[Recipe]] = {}
    for fqn, r in list(base.items()):
        if r is None:
            continue
        i = next((i for i, g in enumerate(groups) if fqn == g or (blocks and fqn.startswith(g + "."))), None)
        if i is None:
            continue
        per = cache.setdefault(id(r), r.layer_recipes(len(groups)))
        if per:
            base[fqn] = per[i]


RecipeArg = Union[RecipeLike, Mapping[str, RecipeLike]]
