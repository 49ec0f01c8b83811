"""Settings that moved: the old names keep answering, and warn once, as jupyter_server's do
when a setting moves (then they can go in a later release).

One mechanism for every move. The old name stays a trait of its old class, made by
:func:`moved` (a setting of another class: the same kind, default and bounds) or
:func:`renamed` (another name of the same class), which tags it with where it lives now.
Where the new name's class is another one, the old class hands what the configuration set by
old names on with :func:`forward_moved`, once at start-up, before it creates the objects that
use them: each is logged, and wins over the new name, as a value given to a constructor wins
over the configuration (jupyter_server's ``ServerApp.token`` and ``IdentityProvider.token``).
Where it is another name of the same class, :func:`rename` (an ``@observe`` of the old name)
sets the new one whenever the old one is set.
"""

from __future__ import annotations

import typing as t

from traitlets import HasTraits, TraitType
from traitlets.config import Configurable, LoggingConfigurable

#: The metadata key of an old name: where the setting lives now ("Class.name").
MOVED_TO = "moved_to"


#: A kind of trait (``Integer``, ``Float``, ``Unicode``...).
Kind = t.TypeVar("Kind", bound=TraitType[t.Any, t.Any])


def moved(owner: type[HasTraits], name: str, kind: t.Callable[..., Kind]) -> Kind:
    """The deprecated old name of ``owner``'s setting ``name``, whose trait is a ``kind``: a
    trait of the same kind, default and bounds, whose help says where the setting lives now."""
    trait = owner.class_traits()[name]
    options = {
        key: getattr(trait, key) for key in ("min", "max") if getattr(trait, key, None) is not None
    }
    if trait.allow_none:
        options["allow_none"] = True
    new = f"{owner.__name__}.{name}"
    old = kind(
        trait.default_value,
        help=f"Deprecated: set {new} (the same setting). {trait.help}",
        **options,
    )
    if type(old) is not type(trait):
        msg = f"{new} is a {type(trait).__name__}, not a {type(old).__name__}"
        raise TypeError(msg)
    old.tag(config=True, **{MOVED_TO: new})
    return old


def renamed(trait: Kind, cls: str, new: str) -> Kind:
    """``trait`` as the deprecated old name of the setting ``new`` of the same class ``cls``
    (observe it with :func:`rename`)."""
    trait.help = f"Deprecated: the old name of `{new}` (the same setting)."
    trait.tag(config=True, **{MOVED_TO: f"{cls}.{new}"})
    return trait


def warn_moved(configurable: LoggingConfigurable, old: str, new: str) -> None:
    """Log that the setting ``old`` (``Class.name``) is now ``new``."""
    configurable.log.warning("%s is deprecated: set %s instead (the same setting)", old, new)


def rename(
    configurable: LoggingConfigurable, change: t.Mapping[str, t.Any], new: str | None = None
) -> None:
    """An ``@observe`` of a renamed setting: warn, and set the new name (``new``, by default
    where the old name's trait says it moved) to its value."""
    cls = type(configurable).__name__
    name = change["name"]
    if new is None:
        new = str(configurable.trait_metadata(name, MOVED_TO)).rpartition(".")[2]
    warn_moved(configurable, f"{cls}.{name}", f"{cls}.{new}")
    setattr(configurable, new, change["new"])


def configured_names(configurable: Configurable) -> set[str]:
    """The settings the configuration sets on ``configurable`` (by its class or a base's)."""
    names: set[str] = set()
    for cls in type(configurable).mro():
        section = configurable.config.get(cls.__name__)
        if isinstance(section, dict):
            names.update(section)
    return names


def moves(cls: type[HasTraits]) -> dict[str, str]:
    """The old names of ``cls`` that moved to another class: old name -> "Class.name"."""
    return {
        name: str(trait.metadata[MOVED_TO])
        for name, trait in cls.class_traits(config=True).items()
        if MOVED_TO in trait.metadata
        and str(trait.metadata[MOVED_TO]).partition(".")[0] != cls.__name__
    }


def forward_moved(configurable: LoggingConfigurable) -> None:
    """Hand the settings the configuration sets by old names of ``configurable`` (moved to
    other classes) to their new classes' sections of its configuration, where they win, with
    a warning each. Call it once, before the objects that use them are created (with
    ``parent=configurable``)."""
    configured = configured_names(configurable)
    for old, new in moves(type(configurable)).items():
        if old not in configured:
            continue
        warn_moved(configurable, f"{type(configurable).__name__}.{old}", new)
        owner, _, name = new.partition(".")
        configurable.config[owner][name] = getattr(configurable, old)
