"""The findings store: what the patterns report during one application of the pass,
kept raw (MLIR locations, functions, walk positions) and turned into `Finding`s once, at
the end.

Locations are resolved only then, and only as far as needed:

* an op with a source location (JAX's `file:line:col`) is grouped with the ops of the same
  kind at the same place;
* an op without one (a module lowered without debug info carries only the parser's
  `"-":line:col`; a module built in memory only unknown locations) is grouped per op and
  function, the group keeping its count and its first positions (every position when
  asked): a 65k-op module without locations gives a few dozen findings, not 65k, and
  only the positions that are listed are ever read;
* an op with an unknown location inside a function called from somewhere is placed at
  that function's first call site (JAX's private library functions).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from jax.extend.mlir import ir

from x64guard.findings import Finding, Kind, Location, Severity
from x64guard.passes.locations import LocationResolver, input_position
from x64guard.passes.types import TypeConverter

FIRST_POSITIONS = 5     # positions a location-less group lists unless every one is asked for
_CALLS_KEPT = 4         # calls remembered per callee: the first with a location gives its call site
_FILE_LOC = ir.FileLineColLoc
_UNKNOWN_LOC = ir.UnknownLoc


@dataclass(frozen=True)
class TypeReport:
    """How narrowed types are reported: `narrow` says they were narrowed; `check` and
    mode='error' that they reach a target. `message` has a `{changes}` field
    ("f64->f32 x2, i64->i32")."""

    kind: Kind
    severity: Severity
    message: str
    # Changes the target accepts as they are ("i64->i32": a Neuron chip running int64
    # natively): a group of only these is reported as info, with `accepted_message`.
    accepted: frozenset[str] = frozenset()
    accepted_message: str = ""


NARROWED = TypeReport(Kind.TYPE_NARROWED, Severity.INFO, "narrowed {changes}")


class _Group:
    """One future Finding: ops of one kind at one place (or in one function, without one)."""

    __slots__ = ("count", "changes", "positions", "ops")

    def __init__(self) -> None:
        self.count = 0
        self.changes: Counter[str] | None = None
        self.positions: list = []   # raw positions of location-less ops, resolved on output
        self.ops = 0


class FindingsStore:
    """Collects reports and narrowed types; `findings()` groups and resolves them."""

    def __init__(self, converter: TypeConverter) -> None:
        self._converter = converter
        self._resolver = LocationResolver(converter.context)
        # (kind, severity, op name, function, message) -> [(location, op index), ...]
        self._reports: dict[tuple, list] = {}
        # (op name, function, old type or tuple of old types) -> [location, ...]
        self._narrowed: dict[tuple, list] = {}
        # callee -> [(location of a call, calling function), ...] (the first few)
        self._calls: dict[str, list] = {}
        self._call_site_cache: dict[str, Location | None] = {}
        # Functions whose ops' findings are dropped (a restored composite's decomposition:
        # erased after the walk; the walk does not enter it).
        self.dropped_functions: set[str] = set()
        # Per type change, the 64-bit results of ops the idiom phase replaced (and erased).
        self._idiom_changes: Counter[str] = Counter()

    # --- recording (during the walk) ----------------------------------------------------
    def report(self, kind: Kind, severity: Severity, op_name: str, location: ir.Location, function: str,
               op_index: int, message: str) -> None:
        key = (kind, severity, op_name, function, message)
        places = self._reports.get(key)
        if places is None:
            places = self._reports[key] = []
        places.append((location, op_index))

    def record_narrowed(self, op_name: str, function: str, olds: list[ir.Type], location: ir.Location) -> None:
        """An op changed these types (results, block arguments, type attributes)."""
        key = (op_name, function, olds[0] if len(olds) == 1 else tuple(olds))
        places = self._narrowed.get(key)
        if places is None:
            places = self._narrowed[key] = []
        places.append(location)

    def record_idiom_change(self, types) -> None:
        """An idiom rule replaced an op with these result types (counted if 64-bit)."""
        convert, change_key = self._converter.convert, self._converter.change_key
        for t in types:
            if convert(t) is not None:
                self._idiom_changes[change_key(t)] += 1

    def record_call(self, callee: str, location: ir.Location, caller: str) -> None:
        calls = self._calls.get(callee)
        if calls is None:
            self._calls[callee] = [(location, caller)]
        elif len(calls) < _CALLS_KEPT:
            calls.append((location, caller))

    # --- output -------------------------------------------------------------------------
    def changes(self) -> dict[str, int]:
        """Per type change, how many types changed: {"f64->f32": 12} (the 64-bit results
        of ops an idiom rule replaced included)."""
        out: Counter[str] = Counter(self._idiom_changes)
        change_key = self._converter.change_key
        for (_, function, olds), places in self._narrowed.items():
            if function in self.dropped_functions:
                continue
            for old in olds if isinstance(olds, tuple) else (olds,):
                out[change_key(old)] += len(places)
        return dict(out)

    def findings(self, types: TypeReport = NARROWED, *, all_positions: bool = False,
                 errors_note: str | None = None, note_kinds: frozenset | None = None) -> list[Finding]:
        """Reports, then narrowed types, grouped. `errors_note`: report errors as info with
        this note (a target that accepts 64-bit types: they only matter if narrowed), for
        every kind or only those in `note_kinds`."""
        listed = None if all_positions else FIRST_POSITIONS
        out = []
        for (kind, severity, op_name, function, message), places in self._reports.items():
            if function in self.dropped_functions:
                continue
            if errors_note is not None and severity is Severity.ERROR and (note_kinds is None or kind in note_kinds):
                severity, message = Severity.INFO, message + errors_note
            groups: dict = {}
            for location, op_index in places:
                key, position = self._place(location, function, op_index)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = _Group()
                group.count += 1
                group.ops += 1
                if position is not None and (listed is None or len(group.positions) < listed):
                    group.positions.append(position)
            for key, group in groups.items():
                out.append(self._finding(kind, severity, op_name, message, key, group, function))
        groups = {}
        change_key = self._converter.change_key
        for (op_name, function, olds), places in self._narrowed.items():
            if function in self.dropped_functions:
                continue
            keys = [change_key(old) for old in (olds if isinstance(olds, tuple) else (olds,))]
            for place, (positions, ops) in self._placements(places, function, listed).items():
                key = (op_name, place)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = _Group()
                    group.changes = Counter()
                group.ops += ops
                for change in keys:
                    group.changes[change] += ops
                room = len(positions) if listed is None else listed - len(group.positions)
                group.positions.extend(positions[:room])
        for (op_name, place), group in groups.items():
            summary = ", ".join(k + (f" x{n}" if n > 1 else "") for k, n in sorted(group.changes.items()))
            group.count = sum(group.changes.values())
            severity, message = types.severity, types.message
            if types.accepted and set(group.changes) <= types.accepted:
                severity, message = Severity.INFO, types.accepted_message
            out.append(self._finding(types.kind, severity, op_name, message.format(changes=summary),
                                     place, group, place[1] if isinstance(place, tuple) else None))
        return out

    def _placements(self, locations: list, function: str, listed: int | None) -> dict:
        """place -> (the first `listed` raw positions, how many ops) for the locations of ops
        of `function` whose types narrowed. Written for speed: every narrowed op passes here.
        A location other than a bare file position is placed once (MLIR uniques them: JAX's
        unrolled loops repeat a few hundred over thousands of ops); a parser position (a
        module without debug info: one per op) is told by the cheap probe first."""
        out: dict = {}
        by_attr: dict = {}  # location attribute -> its place's entry in `out`
        is_input_position = self._resolver.is_input_position
        in_function = ("in", function)
        for location in locations:
            kind = type(location)
            if kind is _FILE_LOC or kind is _UNKNOWN_LOC:
                if kind is _FILE_LOC and is_input_position(location):
                    place, position = in_function, location
                else:
                    place, position = self._place(location, function, None)
            else:
                attr = location.attr
                entry = by_attr.get(attr)
                if entry is not None:
                    entry[1][0] += 1
                    continue
                place, position = self._place(location, function, None)
            entry = out.get(place)
            if entry is None:
                entry = out[place] = ([], [0])
            if kind is not _FILE_LOC and kind is not _UNKNOWN_LOC and position is None:
                by_attr[attr] = entry  # placed the same way every time it recurs
            entry[1][0] += 1
            if position is not None and (listed is None or len(entry[0]) < listed):
                entry[0].append(position)
        return {place: (positions, count[0]) for place, (positions, count) in out.items()}

    def _place(self, location: ir.Location, function: str, op_index: int | None):
        """(group key, raw position or None): a resolved Location for an op placed at a source
        line (or its function's call site), ("in", function) with the op's position for one
        without."""
        kind = type(location)
        if kind is _FILE_LOC:
            if self._resolver.is_input_position(location):
                return ("in", function), location  # a parser position: resolved only if listed
            where = self._resolver.resolve(location)  # read safely (locations.py), cached per location
            if where is None or where.input_position:
                return ("in", function), location
            return where, None
        if kind is not _UNKNOWN_LOC:
            where = self._resolver.resolve(location)
            if where is not None:
                if where.input_position:
                    return ("in", function), Location.input_line(where.line, where.column, function)
                return where, None
        site = self.call_site(function)
        if site is not None:
            return site.called_from(function), None
        if op_index is None:  # narrowed types: the function as a whole, as its signature
            return Location.position(function), None
        return ("in", function), Location.position(function, op_index)

    def _finding(self, kind, severity, op_name, message, key, group: _Group, function) -> Finding:
        if isinstance(key, Location):
            return Finding(kind, severity, op_name, key, message, group.count)
        positions = tuple(self._position(p, function) for p in group.positions)
        if group.ops == 1:
            return Finding(kind, severity, op_name, positions[0], message, group.count)
        return Finding(kind, severity, op_name, positions[0], message, group.count, positions,
                       group.ops - len(positions))

    @staticmethod
    def _position(position, function: str) -> Location:
        if isinstance(position, Location):
            return position
        return input_position(position, function)

    def call_site(self, function: str) -> Location | None:
        """Where `function` is first called from (transitively, for calls without a
        location of their own), or None."""
        cache = self._call_site_cache
        if function in cache:
            return cache[function]
        cache[function] = None  # recursion guard
        site = None
        for location, caller in self._calls.get(function, ()):
            site = self._resolver.resolve(location)
            if site is None and caller != function:
                outer = self.call_site(caller)
                site = outer  # the call has no location: where its caller is called from
            if site is not None:
                break
        cache[function] = site
        return site
