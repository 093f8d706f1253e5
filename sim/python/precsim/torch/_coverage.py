"""Which matrix products of an emulated model ran through the recipe and which did not, by op and by
module, with their forward FLOPs (2 m n k per product; the dgrad and wgrad products of each follow
its forward one). Products that reach torch's dispatcher as aten matrix ops (a function precsim does
not intercept, a module left out by the selection, arguments a handler does not take) are counted
there with torch's FLOP formulas, so nothing is skipped silently."""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, NamedTuple, Tuple

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry


class Row(NamedTuple):
    module: str
    op: str
    emulated: bool
    reason: str
    calls: int
    flops: int


class Coverage:
    """Rows (module, op, emulated, reason, calls, flops) summed since emulate() or reset()."""

    def __init__(self) -> None:
        self._rows: Dict[Tuple[str, str, bool, str], List[int]] = defaultdict(lambda: [0, 0])

    def add(self, module: str, op: str, flops: int, emulated: bool, reason: str = "") -> None:
        r = self._rows[(module, op, emulated, reason)]
        r[0] += 1
        r[1] += int(flops)

    def reset(self) -> None:
        self._rows.clear()

    @property
    def rows(self) -> List[Row]:
        return [Row(*k, *v) for k, v in self._rows.items()]

    @property
    def emulated_flops(self) -> int:
        return sum(r.flops for r in self.rows if r.emulated)

    @property
    def total_flops(self) -> int:
        return sum(r.flops for r in self.rows)

    @property
    def fraction(self) -> float:
        """Emulated share of the matrix FLOPs (1.0 when none ran at all)."""
        total = self.total_flops
        return self.emulated_flops / total if total else 1.0

    def _by(self, field: str) -> Dict[str, Dict[str, int]]:
        out: Dict[str, Dict[str, int]] = {}
        for r in self.rows:
            d = out.setdefault(getattr(r, field), {"emulated": 0, "not_emulated": 0, "calls": 0})
            d["emulated" if r.emulated else "not_emulated"] += r.flops
            d["calls"] += r.calls
        return out

    def by_op(self) -> Dict[str, Dict[str, int]]:
        """{op: {"emulated": FLOPs, "not_emulated": FLOPs, "calls": n}}."""
        return self._by("op")

    def by_module(self) -> Dict[str, Dict[str, int]]:
        """{module: {"emulated": FLOPs, "not_emulated": FLOPs, "calls": n}}."""
        return self._by("module")

    def not_emulated(self) -> List[Row]:
        return [r for r in self.rows if not r.emulated]

    def __str__(self) -> str:
        lines = [f"{'op':<28} {'emulated FLOPs':>16} {'not emulated':>14} {'calls':>7}"]
        for op, d in sorted(self.by_op().items()):
            lines.append(f"{op:<28} {d['emulated']:>16} {d['not_emulated']:>14} {d['calls']:>7}")
        lines.append(f"emulated: {100 * self.fraction:.2f}% of {self.total_flops} forward matrix FLOPs")
        for r in self.not_emulated():
            lines.append(f"  not emulated: {r.op} in {r.module or '<root>'} ({r.reason}), {r.flops} FLOPs")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Coverage {100 * self.fraction:.2f}% of {self.total_flops} forward matrix FLOPs emulated>"


class DispatchCounter(TorchDispatchMode):
    """Counts the aten matrix ops that reach the dispatcher while an emulated model runs: products
    the function mode did not take over (emulated ones run in precsim's engine, not in aten)."""

    def __init__(self, emu) -> None:
        super().__init__()
        self.emu = emu

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func.overloadpacket)
        if formula is not None:
            self.emu._count_unemulated(str(func.overloadpacket).replace("aten.", ""),
                                       formula(*args, **kwargs, out_val=out))
        return out


def matrix_flops(fn) -> int:
    """torch's own count (FlopCounterMode) of the matrix FLOPs of fn()."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()

