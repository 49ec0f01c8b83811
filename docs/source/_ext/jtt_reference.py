"""Reference pages generated from the code, so that they cannot drift from it.

A page asks for a generated part with a MyST comment line of its own, ``% generated: NAME``; when
Sphinx reads the page, the line is replaced by Markdown made from the source it names:

| name | made from |
| --- | --- |
| ``config`` | every configurable class of the package (``autoconfigurable``, autodoc_traits) |
| ``rest-api`` | ``jupyter_tool_terminal/rest-api.yml`` (OpenAPI 3) |
| ``websocket`` | ``jupyter_tool_terminal/protocol.py`` (its frames and size bounds) |
| ``events`` | ``jupyter_tool_terminal/event_schemas/*/v*.yaml`` |
| ``metrics`` | the Prometheus metrics of ``jupyter_tool_terminal/metrics.py`` |
| ``mcp-tools`` | the MCP tools of ``jupyter_tool_terminal/agents/tools.py`` and their schemas |
| ``frontend`` | the command ids in ``labextension/src``, the settings in ``labextension/schema`` |

An unknown name fails the build.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pathlib
import pkgutil
import re
import typing as t

import yaml

if t.TYPE_CHECKING:
    from sphinx.application import Sphinx

REPO = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = "jupyter_tool_terminal"
MARKER = re.compile(r"^% generated: ([a-z-]+)[ \t]*$", re.MULTILINE)


class UnknownPart(LookupError):
    """A page asked for a generated part that does not exist."""


# -- helpers ------------------------------------------------------------------------------


def _cell(text: object) -> str:
    """Text fit for one cell of a Markdown table (one line, pipes escaped)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: t.Sequence[str], rows: t.Iterable[t.Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _code(text: object) -> str:
    """Inline code that may itself hold backticks."""
    value = str(text)
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def _demote(markdown: str, levels: int) -> str:
    """Headings of a description moved ``levels`` deeper, to sit under the page's own."""
    return re.sub(
        r"^(#{1,6}) ", lambda m: "#" * (len(m.group(1)) + levels) + " ", markdown, flags=re.M
    )


def _schema_type(schema: t.Mapping[str, t.Any]) -> str:
    """A JSON Schema's type in a few words."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return "one of " + ", ".join(_code(json.dumps(value)) for value in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(str(item) for item in kind)
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_schema_type(schema['items'])}"
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return " or ".join(_schema_type(option) for option in schema[combinator])
    return str(kind)


def _properties_table(schema: t.Mapping[str, t.Any]) -> str:
    properties: dict[str, t.Any] = schema.get("properties", {})
    if not properties:
        return ""
    required = set(schema.get("required", ()))
    rows = [
        (
            _code(name),
            _schema_type(spec),
            "yes" if name in required else "",
            spec.get("description", ""),
        )
        for name, spec in properties.items()
    ]
    return _table(("property", "type", "required", "meaning"), rows)


# -- config: every configurable class -----------------------------------------------------


#: Subpackages importable only with an optional extra installed (``jupyter-ai``): they hold no
#: configurable class.
OPTIONAL = (f"{PACKAGE}.acp",)


def configurable_classes() -> list[type]:
    """Every public class of the package with configurable traits of its own, by module (a
    base class of another such class is documented with it)."""
    from traitlets.config import Configurable  # noqa: PLC0415 (the docs' import only)

    package = importlib.import_module(PACKAGE)
    found: list[type] = []
    for module_info in sorted(pkgutil.walk_packages(package.__path__, f"{PACKAGE}."), key=str):
        if module_info.name.startswith(OPTIONAL):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in sorted(vars(module).items()):
            if (
                inspect.isclass(value)
                and issubclass(value, Configurable)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and value.class_own_traits(config=True)
            ):
                found.append(value)
    # A base class whose subclass is documented (SessionRegistry, ToolTerminalManager's) is
    # documented with it, under the name its settings are set by.
    return [cls for cls in found if not any(o is not cls and issubclass(o, cls) for o in found)]


def config_reference() -> str:
    parts = []
    for cls in configurable_classes():
        # Settings a class inherits from another project (ExtensionApp's) are that project's to
        # document: named here, described there.
        inherited = sorted(
            name
            for name, trait in cls.class_traits(config=True).items()
            if not (trait.this_class or cls).__module__.startswith(PACKAGE)
        )
        exclude = f"   :exclude-members: {', '.join(inherited)}\n" if inherited else ""
        parts.append(
            f"## {cls.__name__}\n\n"
            f"{_code(f'c.{cls.__name__}.NAME')} in `jupyter_server_config.py`; "
            f"class {_code(f'{cls.__module__}.{cls.__name__}')}.\n\n"
            f"```{{eval-rst}}\n.. autoconfigurable:: {cls.__module__}.{cls.__name__}\n"
            f"   :noindex:\n{exclude}```\n"
        )
        if inherited:
            base = next(base for base in cls.__mro__ if not base.__module__.startswith(PACKAGE))
            parts.append(
                f"Inherited from {_code(f'{base.__module__}.{base.__name__}')} and documented "
                f"there: {', '.join(_code(name) for name in inherited)}.\n"
            )
    return "\n".join(parts)


# -- rest-api: rest-api.yml ---------------------------------------------------------------


def _resolve(spec: t.Mapping[str, t.Any], item: t.Mapping[str, t.Any]) -> t.Mapping[str, t.Any]:
    """An OpenAPI object, following one ``$ref`` within the document."""
    ref = item.get("$ref")
    if not isinstance(ref, str):
        return item
    node: t.Any = spec
    for key in ref.removeprefix("#/").split("/"):
        node = node[key]
    return t.cast("t.Mapping[str, t.Any]", node)


def _response_body(spec: t.Mapping[str, t.Any], response: t.Mapping[str, t.Any]) -> str:
    """A response's media types and schemas in a few words (schemas are under "Schemas")."""
    content = _resolve(spec, response).get("content", {})
    return "; ".join(
        f"{_code(media)}: {_schema_type(body.get('schema', {}))}" for media, body in content.items()
    )


def rest_api_reference() -> str:
    spec = yaml.safe_load((REPO / PACKAGE / "rest-api.yml").read_text())
    parts = [spec["info"].get("description", "")]
    parts.append("## Routes\n")
    parts.append(
        _table(
            ("method", "path", "summary"),
            (
                (method.upper(), _code(path), operation.get("summary", ""))
                for path, item in spec["paths"].items()
                for method, operation in item.items()
                if isinstance(operation, dict) and method != "parameters"
            ),
        )
    )
    for path, item in spec["paths"].items():
        shared_parameters = item.get("parameters", [])
        for method, operation in item.items():
            if not isinstance(operation, dict) or method == "parameters":
                continue
            parts.append(f"### {method.upper()} {_code(path)}\n")
            if operation.get("summary"):
                parts.append(f"**{operation['summary'].strip()}**\n")
            if operation.get("description"):
                parts.append(_demote(operation["description"], 4) + "\n")
            parameters = [
                _resolve(spec, p) for p in [*shared_parameters, *operation.get("parameters", [])]
            ]
            if parameters:
                parts.append(
                    _table(
                        ("parameter", "in", "type", "meaning"),
                        (
                            (
                                _code(p["name"]),
                                p.get("in", ""),
                                _schema_type(p.get("schema", {})),
                                p.get("description", ""),
                            )
                            for p in parameters
                        ),
                    )
                    + "\n"
                )
            body = operation.get("requestBody")
            if body:
                body = _resolve(spec, body)
                for media, content in body.get("content", {}).items():
                    schema = content.get("schema", {})
                    parts.append(f"Request body ({_code(media)}): {_schema_type(schema)}.\n")
                    table = _properties_table(_resolve(spec, schema))
                    if table:
                        parts.append(table + "\n")
            responses = operation.get("responses", {})
            parts.append(
                _table(
                    ("status", "meaning", "body"),
                    (
                        (
                            status,
                            _resolve(spec, response).get("description", ""),
                            _response_body(spec, response),
                        )
                        for status, response in responses.items()
                    ),
                )
                + "\n"
            )
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        parts.append("## Schemas\n")
        for name, schema in schemas.items():
            parts.append(f"### {name}\n")
            if schema.get("description"):
                parts.append(schema["description"].strip() + "\n")
            table = _properties_table(schema)
            parts.append((table or f"Type: {_schema_type(schema)}.") + "\n")
    return "\n".join(parts)


# -- websocket: protocol.py ---------------------------------------------------------------


def websocket_reference() -> str:
    protocol = importlib.import_module(f"{PACKAGE}.protocol")
    server = [
        (_code(doc.split(":", 1)[0].strip("`")), doc.split(":", 1)[1].strip())
        for name, function in vars(protocol).items()
        if name.endswith("_frame")
        and not name.startswith("_")
        and callable(function)
        and (doc := inspect.getdoc(function) or "").startswith("``[")
    ]
    client = [
        (_code(doc.split(":", 1)[0].strip("`")), doc.split(":", 1)[1].strip())
        for cls in (protocol.Stdin, protocol.SetSize)
        if (doc := inspect.getdoc(cls) or "").startswith("``[")
    ]
    bounds = _table(
        ("bound", "value"),
        (
            ("rows", f"{protocol.MIN_ROWS} to {protocol.MAX_ROWS}"),
            ("columns", f"{protocol.MIN_COLS} to {protocol.MAX_COLS}"),
        ),
    )
    return "\n\n".join(
        (
            "### Server to client",
            _table(("message", "meaning"), server),
            "### Client to server",
            _table(("message", "meaning"), client),
            "### Terminal size bounds",
            "A client's `set_size` is clamped into these.",
            bounds,
        )
    )


# -- events: event_schemas/ ---------------------------------------------------------------


def events_reference() -> str:
    parts = []
    for path in sorted((REPO / PACKAGE / "event_schemas").glob("*/v*.yaml")):
        schema = yaml.safe_load(path.read_text())
        relative = path.relative_to(REPO).as_posix()
        parts.append(f"## {schema.get('title', path.parent.name)}\n")
        parts.append(
            _table(
                ("field", "value"),
                (
                    ("schema id", _code(schema["$id"])),
                    ("version", schema.get("version", "")),
                    ("file", _code(relative)),
                    ("personal data", "yes" if schema.get("personal-data") else "no"),
                ),
            )
            + "\n"
        )
        if schema.get("description"):
            parts.append(schema["description"].strip() + "\n")
        parts.append(_properties_table(schema) + "\n")
    return "\n".join(parts)


# -- metrics: metrics.py ------------------------------------------------------------------


def metrics_reference() -> str:
    from prometheus_client.metrics import MetricWrapperBase  # noqa: PLC0415

    metrics = importlib.import_module(f"{PACKAGE}.metrics")
    rows = []
    for value in vars(metrics).values():
        if not isinstance(value, MetricWrapperBase):
            continue
        kind = type(value).__name__.lower()
        name = value._name
        exported = f"{name}_total" if kind == "counter" else name
        labels = ", ".join(_code(label) for label in value._labelnames)
        rows.append((_code(exported), kind, labels, value._documentation))
    return _table(("metric", "type", "labels", "meaning"), rows)


# -- mcp-tools: agents/tools.py -----------------------------------------------------------


def mcp_tools_reference() -> str:
    tools = importlib.import_module(f"{PACKAGE}.agents.tools")
    parts = [
        _table(
            ("tool", "needs control", "meaning"),
            (
                (
                    _code(tool.name),
                    "no" if tool.name in tools.READ_ONLY_TOOLS else "yes",
                    tool.description or "",
                )
                for tool in tools.TOOLS
            ),
        )
        + "\n"
    ]
    for tool in tools.TOOLS:
        parts.append(f"## {_code(tool.name)}\n")
        parts.append((tool.description or "").strip() + "\n")
        arguments = _properties_table(tool.input_schema)
        parts.append("Arguments:\n\n" + arguments + "\n" if arguments else "No arguments.\n")
        if tool.output_schema:
            result = _properties_table(tool.output_schema)
            parts.append("Result (`structuredContent`):\n\n" + result + "\n" if result else "")
        parts.append(
            "```{code-block} json\n:caption: input schema\n"
            + json.dumps(tool.input_schema, indent=2)
            + "\n```\n"
        )
    return "\n".join(parts)


# -- frontend: labextension ---------------------------------------------------------------

COMMAND = re.compile(
    r"/\*\*(?P<doc>(?:(?!\*/).)*)\*/\s*export const \w+ = '(?P<id>tool-terminal:[\w-]+)'", re.S
)


def _jsdoc_text(doc: str) -> str:
    return " ".join(line.strip().lstrip("*").strip() for line in doc.splitlines()).strip()


def frontend_reference() -> str:
    source = REPO / "labextension" / "src"
    rows = sorted(
        {
            (match["id"], _jsdoc_text(match["doc"]), path.relative_to(REPO).as_posix())
            for path in source.rglob("*.ts")
            if "__tests__" not in path.parts and not path.name.endswith(".spec.ts")
            for match in COMMAND.finditer(path.read_text())
        }
    )
    parts = [
        "## Commands\n",
        _table(
            ("command id", "what it does", "defined in"),
            ((_code(i), d, _code(p)) for i, d, p in rows),
        )
        + "\n",
    ]
    schemas = sorted((REPO / "labextension" / "schema").glob("*.json"))
    parts.append("## Settings\n")
    if not schemas:
        parts.append("The extension has no settings of its own.\n")
    for path in schemas:
        schema = json.loads(path.read_text())
        parts.append(f"### {schema.get('title', path.stem)} ({_code(path.stem)})\n")
        if schema.get("description"):
            parts.append(schema["description"].strip() + "\n")
        rows_settings = [
            (
                _code(name),
                _schema_type(spec),
                _code(json.dumps(spec.get("default"))),
                spec.get("description", spec.get("title", "")),
            )
            for name, spec in schema.get("properties", {}).items()
        ]
        if rows_settings:
            parts.append(_table(("setting", "type", "default", "meaning"), rows_settings) + "\n")
    return "\n".join(parts)


# -- wiring -------------------------------------------------------------------------------

PARTS: dict[str, t.Callable[[], str]] = {
    "config": config_reference,
    "rest-api": rest_api_reference,
    "websocket": websocket_reference,
    "events": events_reference,
    "metrics": metrics_reference,
    "mcp-tools": mcp_tools_reference,
    "frontend": frontend_reference,
}


def generate(name: str) -> str:
    """The Markdown of one generated part; :class:`UnknownPart` for a name not in ``PARTS``."""
    try:
        make = PARTS[name]
    except KeyError:
        msg = f"unknown generated part {name!r}; known: {', '.join(PARTS)}"
        raise UnknownPart(msg) from None
    return make()


def _replace_markers(app: Sphinx, docname: str, source: list[str]) -> None:
    del app, docname
    source[0] = MARKER.sub(lambda match: generate(match.group(1)), source[0])


def setup(app: Sphinx) -> dict[str, t.Any]:
    """The Sphinx extension: generated parts are filled in as pages are read."""
    app.connect("source-read", _replace_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
