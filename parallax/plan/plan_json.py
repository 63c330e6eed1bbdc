"""The plan as JSON: what the launcher writes into the job's directory and every worker loads (docs/architecture.md
documents the schema). The codec is generic over the records' declared types (records.py): a dataclass or a
record is an object of its fields, a tuple a list, an enum its value; reading checks every object's keys against
its fields, so a file with a field this parallax does not know, or without one it needs, is refused. SCHEMA
changes whenever the fields do. `loads(dumps(plan)) == plan`; `check_matches` checks a loaded plan against the
worker's own graph. Imports no TensorFlow."""
import dataclasses
import enum
import json
import typing

from parallax.errors import GraphMismatchError
from parallax.plan.records import Plan

SCHEMA = "parallax-plan/4"


def to_data(plan):
    return {"schema": SCHEMA, **_encode(Plan, plan)}


def dumps(plan):
    return json.dumps(to_data(plan), indent=1, sort_keys=True)


def loads(text):
    data = json.loads(text)
    if data.get("schema") != SCHEMA:
        raise GraphMismatchError(f"the plan file has schema {data.get('schema')!r}, but this parallax reads "
                                 f"{SCHEMA!r}; run every process of a job with the same parallax version")
    return from_data(data)


def from_data(data):
    return _decode(Plan, {k: v for k, v in data.items() if k != "schema"}, "plan")


def _fields(kind):
    """{field: its declared type} of a dataclass or a typed record (a NamedTuple), in order."""
    return typing.get_type_hints(kind)


def _is_record(kind):
    """A typed record: a NamedTuple, or a Listed (a sentence with its fields)."""
    return isinstance(kind, type) and hasattr(kind, "_fields")


def _encode(kind, value):
    if value is None:
        return None
    if dataclasses.is_dataclass(kind) or _is_record(kind):
        return {name: _encode(t, getattr(value, name)) for name, t in _fields(kind).items()}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value).value
    args = typing.get_args(kind)
    if typing.get_origin(kind) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return [_encode(args[0], v) for v in value]
        return [_encode(t, v) for t, v in zip(args, value)]
    if typing.get_origin(kind) is typing.Union:  # Optional[X]
        return _encode(next(a for a in args if a is not type(None)), value)
    return value


def _decode(kind, data, where):
    if data is None:
        return None
    if dataclasses.is_dataclass(kind) or _is_record(kind):
        fields = _fields(kind)
        if not isinstance(data, dict) or set(data) != set(fields):
            unknown = sorted(set(data) - set(fields)) if isinstance(data, dict) else data
            missing = sorted(set(fields) - set(data)) if isinstance(data, dict) else []
            raise GraphMismatchError(f"the plan file's {where} does not match this parallax's {kind.__name__}: "
                                     f"unknown {unknown}, missing {missing}; run every process of a job with the "
                                     f"same parallax version")
        return kind(**{name: _decode(t, data[name], f"{where}.{name}") for name, t in fields.items()})
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(data)
    args = typing.get_args(kind)
    if typing.get_origin(kind) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        return tuple(_decode(t, v, f"{where}[{i}]") for i, (t, v) in enumerate(zip(args, data)))
    if typing.get_origin(kind) is typing.Union:
        return _decode(next(a for a in args if a is not type(None)), data, where)
    return data


def check_matches(plan, analysis, who="this process"):
    """Raise GraphMismatchError at the first trained variable where `analysis` (of this process's own graph)
    differs from the plan's: name, shape, dtype, parts, gradients, updates."""
    mine = {v.name: v for v in analysis.trained_variables}
    for name in sorted(set(mine) | {v.name for v in plan.variables}):
        if name not in mine:
            raise GraphMismatchError(f"{who}'s graph does not train {name!r}, which the job's plan has; every "
                                     f"process of a job must build the same graph (same script, arguments, data)")
        try:
            planned = plan.variable(name)
        except KeyError:
            raise GraphMismatchError(f"{who}'s graph trains {name!r}, which the job's plan does not have; every "
                                     f"process of a job must build the same graph (same script, arguments, "
                                     f"data)") from None
        own = mine[name]
        facts = [("shape", tuple(own.shape), planned.shape), ("dtype", own.dtype, planned.dtype),
                 ("parts", tuple(p.name for p in own.parts), tuple(p.name for p in planned.parts)),
                 ("gradients", tuple((g.values, g.indices) for p in own.parts for g in p.gradients),
                  tuple((g.values, g.indices) for g in planned.gradients)),
                 ("update ops", tuple(u for p in own.parts for u in p.update_ops),
                  tuple(u for p in planned.parts for u in p.update_ops))]
        for what, here, there in facts:
            if here != there:
                raise GraphMismatchError(f"{who}'s graph differs from the job's plan at variable {name!r}: {what} "
                                         f"{here} here, {there} in the plan; every process of a job must build the "
                                         f"same graph (same script, arguments, data)")
