"""The text forms of a run's shape, parsed in one place.

A run's round widths are typed by people in four places: ``--rounds 8,2``
(and ``PACORE_ROUNDS``), a ``pacore serve`` request's ``rounds`` (``[8, 2]``
or ``"8,2"``), a served model name (``pacore:8,2``, ``pacore-high``) and an
eval method spec (``pacore:8+2``, ``majority:16``). They share this grammar,
so a width means the same thing, is bounded by the same
:data:`MAX_ROUND_WIDTH` and fails with the same message everywhere:

- *widths*: positive integers separated by ``,`` or ``+`` (``8,2`` = ``8+2``);
- *preset*: ``low`` | ``medium`` | ``high`` (:data:`PRESETS`);
- *model name*: ``pacore-<preset>`` or ``pacore:<widths>``;
- *method spec*: ``FAMILY[:ARGS]`` with the families of :data:`METHODS`
  (``rsa:N,K,T``, ``deepconf:N``, ``deepconf-online:N``, ``aggagent:N`` among them);
- *served model name*: a PaCoRe model name, a method spec of a
  :data:`SERVED_FAMILIES` family, or such a family's bare name standing for
  its default spec (:data:`METHOD_DEFAULTS`: ``rsa`` = ``rsa:16,4,10``);
  :func:`parse_served_model` reads all of them into a :class:`MethodSpec`.

Pure functions over strings, no pydantic: the ``pacore`` command parses its
flags with them before any heavy import. Errors are ``ValueError`` with a
one-line message holding an example of the accepted form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pacore_graph.settings.presets import PRESETS

__all__ = [
    "LISTED_MODELS",
    "MAX_ROUND_WIDTH",
    "METHODS",
    "METHOD_DEFAULTS",
    "SERVED_FAMILIES",
    "SERVED_MODELS",
    "MethodSpec",
    "check_widths",
    "is_served_name",
    "parse_method",
    "parse_methods",
    "parse_model_name",
    "parse_served_model",
    "parse_widths",
    "preset_widths",
    "rounds_from",
    "split_widths",
    "width",
]

#: Upper bound on one round's width. Far above the paper's 32; it exists so a
#: typo such as ``--rounds 3200`` fails loudly instead of sending 3,200 calls.
MAX_ROUND_WIDTH = 1024

#: Served model names for the paper's presets (``GET /v1/models`` lists them).
LISTED_MODELS: dict[str, tuple[int, ...]] = {
    f"pacore-{name}": widths for name, widths in PRESETS.items()
}

_SEPARATORS = re.compile(r"[,+]")


def width(value: object, label: str = "K") -> int:
    """One round width (or a family's count): an integer in ``[1, MAX_ROUND_WIDTH]``.

    Text is read as a decimal integer; ``label`` names the value in the error
    (``rounds[1] = 0``, ``method 'majority:0': K``).
    """
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{label} must be a positive integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{label}: each round width K must be an integer, got {value!r}")
    if not 1 <= value <= MAX_ROUND_WIDTH:
        raise ValueError(f"{label} must be in [1, {MAX_ROUND_WIDTH}], got {value}")
    return value


def check_widths(widths: Iterable[object], *, what: str = "rounds") -> tuple[int, ...]:
    """Round widths given as a list: each a :func:`width`, at least one."""
    values = list(widths)
    if not values:
        raise ValueError(f"{what} must hold at least one round width K >= 1, e.g. [4]")
    return tuple(width(k, f"{what}[{i}] = {k!r}: K") for i, k in enumerate(values))


def split_widths(text: str, *, what: str = "rounds") -> list[int]:
    """``8,2`` or ``8+2`` -> [8, 2], syntax only; an empty list or item is refused."""
    try:
        return [int(item) for item in _SEPARATORS.split(text)]
    except ValueError:
        raise ValueError(
            f"{what} takes comma-separated positive integers such as 8,2; got {text!r}"
        ) from None


def parse_widths(text: str, *, what: str = "rounds") -> tuple[int, ...]:
    """``8,2`` or ``8+2`` -> (8, 2), each width bounds-checked."""
    return check_widths(split_widths(text, what=what), what=what)


def rounds_from(value: object, *, what: str = "rounds") -> tuple[int, ...]:
    """Round widths from a list (``[8, 2]``) or its text (``"8,2"``), bounds checked."""
    if isinstance(value, str):
        return parse_widths(value, what=what)
    if isinstance(value, list | tuple):
        return check_widths(value, what=what)
    raise ValueError(f'{what} must be round widths such as [8, 2] or "8,2"; got {value!r}')


def preset_widths(name: str) -> tuple[int, ...]:
    """A preset's configured widths; ValueError naming the presets otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}; got {name!r}") from None


def parse_model_name(name: str) -> tuple[int, ...]:
    """The configured round widths a PaCoRe model name asks for; ValueError if it names none.

    PaCoRe names only (``pacore-high``, ``pacore:8,2``); :func:`parse_served_model`
    reads every name a server answers to.
    """
    if name in LISTED_MODELS:
        return LISTED_MODELS[name]
    family, sep, arg = name.partition(":")
    if family != "pacore" or not sep:
        raise ValueError(
            f"unknown model {name!r}; use {', '.join(LISTED_MODELS)} or pacore:K1,K2 "
            "(e.g. pacore:8,2)"
        )
    try:
        return parse_widths(arg)
    except ValueError:
        raise ValueError(
            f"model {name!r}: round widths must be integers in [1, {MAX_ROUND_WIDTH}] "
            "separated by commas, e.g. pacore:8,2"
        ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodSpec:
    """A parsed method spec: ``text`` is the spec exactly as typed (the report's key).

    ``rounds`` are the configured widths the method runs (a PaCoRe run adds
    its final K=1 round), ``k`` the family's count (samples, refinements).
    """

    text: str
    family: str
    rounds: tuple[int, ...] = ()
    k: int = 1

    @property
    def expected_trajectories(self) -> int:
        """Model calls per problem (for planning a run's size)."""
        if self.family in ("pacore", "aggagent"):  # the agent's step is one trajectory
            return sum(self.rounds) + 1
        if self.family == "refine":
            return self.k + 1
        if self.family == "rsa":
            return sum(self.rounds)
        return self.k


def _count(arg: str, what: str, spec: str) -> int:
    """A family's count (``majority:16``, each K of ``pacore:8+2``), bounded like a width."""
    return width(arg, f"method {spec!r}: {what}")


def _pacore(spec: str, arg: str) -> MethodSpec:
    if arg in PRESETS:
        return MethodSpec(text=spec, family="pacore", rounds=PRESETS[arg])
    if not arg:
        raise ValueError(f"method {spec!r}: use pacore:low|medium|high or pacore:8+2")
    parts = [part for part in _SEPARATORS.split(arg) if part.strip()]
    return MethodSpec(text=spec, family="pacore", rounds=tuple(_count(p, "K", spec) for p in parts))


def _single(spec: str, arg: str) -> MethodSpec:
    if arg:
        raise _unknown(spec)
    return MethodSpec(text=spec, family="single", rounds=(1,), k=1)


def _majority(spec: str, arg: str) -> MethodSpec:
    k = _count(arg, "K", spec)
    return MethodSpec(text=spec, family="majority", rounds=(k,), k=k)


def _refine(spec: str, arg: str) -> MethodSpec:
    r = _count(arg, "R", spec)
    return MethodSpec(text=spec, family="refine", rounds=(1,) * r, k=r)


def _rsa(spec: str, arg: str) -> MethodSpec:
    """``rsa:N,K,T``: population N, K candidates read, T populations (rounds = N x T)."""
    parts = [part for part in _SEPARATORS.split(arg) if part.strip()] if arg else []
    if len(parts) != 3:
        raise ValueError(f"method {spec!r}: use rsa:N,K,T (e.g. rsa:16,4,10)")
    n, k, t = (_count(p, what, spec) for p, what in zip(parts, ("N", "K", "T"), strict=True))
    if k > n:
        raise ValueError(f"method {spec!r}: K={k} cannot be drawn from a population of N={n}")
    return MethodSpec(text=spec, family="rsa", rounds=(n,) * t, k=k)


def _deepconf(spec: str, arg: str) -> MethodSpec:
    n = _count(arg, "N", spec)
    return MethodSpec(text=spec, family="deepconf", rounds=(n,), k=n)


def _deepconf_online(spec: str, arg: str) -> MethodSpec:
    n = _count(arg, "N", spec)
    if n < 2:
        raise ValueError(f"method {spec!r}: N must be at least 2 (a warm-up and the rest)")
    return MethodSpec(text=spec, family="deepconf-online", rounds=(n,), k=n)


def _aggagent(spec: str, arg: str) -> MethodSpec:
    """``aggagent:N``: N explorers, then an aggregator agent reads them with tools."""
    n = _count(arg, "N", spec)
    return MethodSpec(text=spec, family="aggagent", rounds=(n,), k=n)


#: Method families and their parsers (``FAMILY[:ARGS]``), in the order help lists them.
METHODS = {
    "pacore": (_pacore, "pacore:low|medium|high|8+2"),
    "single": (_single, "single"),
    "majority": (_majority, "majority:K"),
    "refine": (_refine, "refine:R"),
    "rsa": (_rsa, "rsa:N,K,T"),
    "deepconf": (_deepconf, "deepconf:N"),
    "deepconf-online": (_deepconf_online, "deepconf-online:N"),
    "aggagent": (_aggagent, "aggagent:N"),
}


def parse_method(text: str) -> MethodSpec:
    """Parse one method spec; ValueError listing the accepted forms when it is not one."""
    spec = text.strip()
    family, _, arg = spec.partition(":")
    entry = METHODS.get(family)
    if entry is None:
        raise _unknown(spec)
    return entry[0](spec, arg.strip())


def _unknown(spec: str) -> ValueError:
    forms = ", ".join(form for _, form in METHODS.values())
    return ValueError(f"unknown method {spec!r}; use {forms}")


def parse_methods(text: str) -> list[MethodSpec]:
    """A comma-separated list of specs; ``pacore:8,2,single`` keeps ``8,2`` together."""
    parts = [p.strip(" ,") for p in re.split(r",(?=\s*[A-Za-z])", text) if p.strip(" ,")]
    if not parts:
        raise ValueError("--methods is empty; e.g. pacore:low,single,majority:4")
    specs = [parse_method(p) for p in parts]
    seen: set[str] = set()
    for s in specs:
        if s.text in seen:
            raise ValueError(f"method {s.text!r} is listed twice")
        seen.add(s.text)
    return specs


#: Bare names of the other served methods and the spec each stands for: RSA's
#: public defaults (population 16, 4 candidates read, 10 populations), and
#: 16 traces for DeepConf, the majority vote and the aggregator agent.
METHOD_DEFAULTS: dict[str, str] = {
    "rsa": "rsa:16,4,10",
    "deepconf": "deepconf:16",
    "deepconf-online": "deepconf-online:16",
    "majority": "majority:16",
    "aggagent": "aggagent:16",
}

#: Method families a server runs by model name (``single`` and ``refine`` are
#: not: a plain call is the upstream's own name, and a name such as ``single``
#: would shadow an upstream model of that name).
SERVED_FAMILIES: tuple[str, ...] = ("pacore", *METHOD_DEFAULTS)

#: What ``GET /v1/models`` lists, in order: the PaCoRe presets, then each other
#: method's bare name beside the spec it stands for, so every default is visible.
SERVED_MODELS: tuple[str, ...] = (
    *LISTED_MODELS,
    *(name for bare, spec in METHOD_DEFAULTS.items() for name in (bare, spec)),
)

#: The served methods' forms with their defaults, for the unknown-name message.
_SERVED_FORMS = ", ".join(
    f"{METHODS[bare][1]} ({bare} = {spec})" for bare, spec in METHOD_DEFAULTS.items()
)


def is_served_name(name: str) -> bool:
    """Whether ``name`` lies in the served grammar: a preset, a bare method, ``FAMILY:...``.

    Such a name is the server's to answer (or refuse) even when its
    arguments are wrong, so ``rsa:0,1,1`` is never relayed to an upstream.
    """
    family, sep, _ = name.partition(":")
    return (
        name in LISTED_MODELS
        or name in METHOD_DEFAULTS
        or (bool(sep) and family in SERVED_FAMILIES)
    )


def parse_served_model(name: str) -> MethodSpec:
    """The method a served model name runs; ValueError naming the accepted names otherwise.

    PaCoRe names read exactly as :func:`parse_model_name` (the spec's ``text``
    is the name); a bare method name is its :data:`METHOD_DEFAULTS` spec (whose
    ``text`` is that spec, so ``rsa`` and ``rsa:16,4,10`` are one method);
    ``rsa:N,K,T``, ``deepconf:N``, ``deepconf-online:N``, ``majority:N`` and
    ``aggagent:N`` are read as method specs, with their bounds.
    """
    if name in METHOD_DEFAULTS:
        return parse_method(METHOD_DEFAULTS[name])
    family, sep, _ = name.partition(":")
    if sep and family in METHOD_DEFAULTS:
        return parse_method(name)
    if name in LISTED_MODELS or (sep and family == "pacore"):
        return MethodSpec(text=name, family="pacore", rounds=parse_model_name(name))
    raise ValueError(
        f"unknown model {name!r}; use {', '.join(LISTED_MODELS)}, pacore:K1,K2 "
        f"(e.g. pacore:8,2), {_SERVED_FORMS}"
    )
