"""Decoding families: each owns its options section, its engine and how its quantization is verified.

A family is declared by one ``DecodingFamily`` under the ``oasr.decoding`` entry points, named
by the decoding family a bundle declares (``DecodingDefaults.family``); one declaration may serve
several names (the transducer serves ``rnnt`` and ``tdt``). The declaration is imported without
torch: the engine and the verify rule are ``module:name`` paths, imported when a model of the
family runs. Nothing outside a family names its options: shared code works on any section
through the few attributes below, so a family joins with its own files and one entry-point line.

A section is a frozen dataclass with a ``family`` class attribute (its name in errors), a
``max_beam_size`` class attribute when it has a ``beam_size`` field (the shared ``--beam-size``
lands there), and optionally ``check(shared)``: the rules between it and the shared options
(``TranscribeOptions``), raising ``InputError``. A field's CLI flag is ``--field-name`` unless its
metadata names another (``field(metadata={"flag": "--temperature"})``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from .. import plugins
from ..errors import CapabilityError, InputError

GROUP = "oasr.decoding"


@dataclass(frozen=True)
class DecodingFamily:
    options: type  # the section: a frozen dataclass
    engine: str  # "module:Class": Engine(loaded, options, section), see oasr.pipelines.transcribe
    verify: str  # "module:function": verify(source, quantized, samples, audio) -> a report with failures()
    can_do: str  # what its decoding offers, in words (errors say it when a flag cannot be honoured)

    def load_engine(self):
        return _import(self.engine)

    def load_verify(self):
        return _import(self.verify)


def _import(path: str):
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


def installed() -> dict[str, DecodingFamily]:
    """Decoding family name -> its declaration, for every installed package."""
    return {name: family(name) for name in plugins.declared(GROUP)}


def family(name: str) -> DecodingFamily:
    if name not in plugins.declared(GROUP):
        known = ", ".join(sorted(plugins.declared(GROUP))) or "none"
        raise CapabilityError(f"no transcription engine for the {name!r} decoding family; the installed families decode: {known}")
    return plugins.load(GROUP, name, "decoding family")


# --- flags and values -------------------------------------------------------------------------


def flag(section_type: type, name: str) -> str:
    for f in dataclasses.fields(section_type):
        if f.name == name:
            return f.metadata.get("flag", "--" + name.replace("_", "-"))
    return "--" + name.replace("_", "-")


def flag_of(name: str) -> str:
    """The flag of a field, as whichever installed family that has it spells it."""
    for fam in installed().values():
        if name in _field_names(fam.options):
            return flag(fam.options, name)
    return "--" + name.replace("_", "-")


@functools.cache
def _field_names(section_type: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(section_type))


def set_fields(section) -> dict[str, Any]:
    """The fields of a section set away from their defaults."""
    default = type(section)()
    return {f.name: getattr(section, f.name) for f in dataclasses.fields(section) if getattr(section, f.name) != getattr(default, f.name)}


def _coerce(section_type: type, name: str, value: Any) -> Any:
    """A ``--decoding-option KEY=VALUE`` string as the field's type (other values pass as they are)."""
    if not isinstance(value, str):
        return value
    hint = typing.get_type_hints(section_type).get(name, str)
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    text = value.strip()
    if type(None) in options and text.lower() in ("none", "null", ""):
        return None
    for kind in options:
        if kind is str:
            return value
        try:
            if kind is bool:
                if text.lower() in ("1", "true", "yes", "on"):
                    return True
                if text.lower() in ("0", "false", "no", "off"):
                    return False
                continue
            if kind in (int, float):
                return kind(text)
            if typing.get_origin(kind) is tuple:
                item = typing.get_args(kind)[0]
                return tuple(item(part) for part in text.split(",") if part.strip())
        except ValueError:
            continue
    raise InputError(f"{flag(section_type, name)}: {value!r} is not a valid value")


def build(section_type: type, values: Mapping[str, Any]):
    """``section_type(**values)``, string values read as the fields' types; unknown names are an InputError."""
    unknown = sorted(set(values) - _field_names(section_type))
    if unknown:
        raise InputError(f"unknown decoding option(s) {', '.join(unknown)} for the {section_type.family} family")
    return section_type(**{k: _coerce(section_type, k, v) for k, v in values.items()})


def with_beam(section, beam_size: int | None, family_name: str):
    """The section with the shared ``--beam-size`` applied."""
    if beam_size is None:
        return section
    most = getattr(type(section), "max_beam_size", None)
    if most is None:
        raise CapabilityError(f"--beam-size {beam_size}: the {family_name} decoding family has no beam search")
    if not 1 <= beam_size <= most:
        raise CapabilityError(f"--beam-size {beam_size}: the {family_name} decoding family searches with 1..{most} beams")
    return dataclasses.replace(section, beam_size=beam_size)


# --- one family's section from the options ----------------------------------------------------


def section_for(name: str, options) -> Any:
    """The section a model of decoding family ``name`` decodes with, from ``options``
    (``TranscribeOptions``): its own section, or a mapping of option names (the CLI's flags,
    ``--decoding-option``), or another family's section whose set fields this family also takes,
    with the shared beam size applied; a value this family cannot honour is a CapabilityError
    naming the flags and what the family offers instead (never silently ignored)."""
    fam = family(name)
    given, beam = options.decoding, options.beam_size
    if isinstance(given, fam.options):
        section = given
    else:
        values = dict(given) if isinstance(given, Mapping) else {} if given is None else set_fields(given)
        if given is not None and not isinstance(given, Mapping) and "beam_size" in _field_names(type(given)):
            beam = given.beam_size if beam is None else beam  # a section's beam is the shared beam
            values.pop("beam_size", None)
        foreign = [k for k in values if k not in _field_names(fam.options)]
        if foreign:
            flags = ", ".join(flag_of(k) for k in foreign)
            where = f" ({type(given).__name__} options of the {given.family} family)" if hasattr(given, "family") else ""
            raise CapabilityError(f"{flags}{where} cannot be honoured: this model decodes as the {name} family, which offers {fam.can_do}")
        try:
            section = build(fam.options, values)
        except InputError as e:
            raise CapabilityError(f"{e} (this model decodes as the {name} family)") from e
    section = with_beam(section, beam, name)
    check = getattr(section, "check", None)
    if check is not None:
        check(options)
    return section


def read_values(options):
    """Before any model is loaded: the option values of ``options`` (``TranscribeOptions`` whose
    ``decoding`` is a mapping) checked, and the section they make when one installed family alone
    takes them. Returns ``(section, beam folded in)``, or ``(None, False)`` when several families
    take them (they stay a mapping, read once the model is known). Values no family takes together
    (with the shared beam size) are an InputError, which the CLI reports as a usage error."""
    values, beam_size = options.decoding, options.beam_size
    families = installed()
    takers = {n: f for n, f in families.items() if set(values) <= _field_names(f.options)}
    flags = ", ".join(flag_of(k) for k in values)
    if not takers:
        owners = "; ".join(
            f"{flag_of(k)}: {', '.join(sorted(n for n, f in families.items() if k in _field_names(f.options))) or 'no family'}" for k in values
        )
        raise InputError(f"{flags}: one model cannot honour flags of different decoding families together ({owners})")
    errors: list[InputError] = []
    sections = {}
    for n, f in takers.items():
        try:
            section = build(f.options, values)
            check = getattr(section, "check", None)
            if check is not None:
                check(options)
            sections[f.options] = with_beam(section, beam_size, n)
        except InputError as e:
            errors.append(e)
        except CapabilityError as e:
            errors.append(InputError(f"{flags}: the {n} family cannot honour {e}"))
    if not sections:
        raise errors[0]
    if len({f.options for f in takers.values()}) != 1:
        return None, False
    (section,) = sections.values()
    return section, beam_size is not None and "beam_size" in _field_names(type(section))
