"""Settings that moved: the old names keep answering, and warn once, as jupyter_server's do
when a setting moves (then they can go in a later release)."""

from __future__ import annotations

import typing as t

from traitlets import HasTraits, TraitType
from traitlets.config import LoggingConfigurable


def moved_setting(owner: type[HasTraits], name: str, new_owner: str) -> TraitType[t.Any, t.Any]:
    """A deprecated trait ``NAME`` of a class, of the same kind and default as ``NAME`` of
    ``owner``, whose help says where the setting lives now (``new_owner.NAME``)."""
    trait = owner.class_traits()[name]
    bounds = {
        key: getattr(trait, key) for key in ("min", "max") if getattr(trait, key, None) is not None
    }
    return type(trait)(
        trait.default_value,
        help=f"Deprecated: set {new_owner}.{name} (the same setting). {trait.help}",
        **bounds,
    ).tag(config=True)


def warn_moved(configurable: LoggingConfigurable, old: str, new: str) -> None:
    """Log that the setting ``old`` (``Class.name``) is now ``new`` (called once, when the
    configuration is read)."""
    configurable.log.warning("%s is deprecated: set %s instead (the same setting)", old, new)


def rename(configurable: LoggingConfigurable, change: t.Mapping[str, t.Any], new: str) -> None:
    """An ``@observe`` of a renamed setting: warn once, and set the new name to its value."""
    cls = type(configurable).__name__
    warn_moved(configurable, f"{cls}.{change['name']}", f"{cls}.{new}")
    setattr(configurable, new, change["new"])
