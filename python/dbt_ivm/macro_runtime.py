"""Run the package's own Jinja macros without dbt, Spark or a connection.

`dbt-ivm explain` / `check` and the fast tests call the same macros `dbt run` calls
(macros/analysis, the upstream declarations, the config checks, the change SQL), so the
rules have one implementation. The runtime gives them the few context objects they use,
the way dbt does: each macro is compiled as its own template, so a call to another macro
goes through a wrapper that turns `return(...)` into a value; `adapter.dispatch` picks
`spark__`, then `default__`; `exceptions.raise_compiler_error` raises MacroError; `config`
reads the bound model's config (`get`, and `meta_get` for its meta); `graph` is the
manifest's nodes and sources.

Anything that needs the warehouse (run_query, statement, adapter.get_columns_in_relation)
is absent: a macro that reaches it fails with MacroError naming it.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import jinja2
import jinja2.ext
import jinja2.parser
import jinja2.sandbox
from jinja2 import nodes

PACKAGE = "dbt_ivm"
# jinja does not export module names that start with _ (private macros): compile each
# macro under a prefixed name, as dbt does
_EXPORTED = "dbt_macro__"


class MacroError(Exception):
    """A macro raised a compiler error (the message is the user's) or reached the warehouse."""


class _MacroReturn(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def _return(value: Any) -> None:
    raise _MacroReturn(value)


def _raise_compiler_error(message: str, node: Any = None) -> None:
    raise MacroError(str(message))


def _fromjson(text: str, default: Any = None) -> Any:
    """dbt's fromjson: the default for text that is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return default


def _no_warehouse(name: str) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise MacroError(f"{name} needs a connection to Spark, which dbt-ivm does not open")

    return fail


@dataclass(frozen=True)
class Relation:
    """dbt-spark's relation as the macros use it: no database, unquoted schema.identifier."""

    database: str | None = None
    schema: str | None = None
    identifier: str | None = None

    @classmethod
    def create(
        cls, database: str | None = None, schema: str | None = None, identifier: str | None = None, **_: Any
    ) -> Relation:
        return cls(database, schema, identifier)

    def render(self) -> str:
        return ".".join(part for part in (self.schema, self.identifier) if part)

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str

    @property
    def data_type(self) -> str:
        return self.dtype


@dataclass
class _Config:
    """`config` of the model bound with Runtime.bound()."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        value = self.values.get(key)
        return default if value is None else value

    def meta_get(self, key: str, default: Any = None) -> Any:
        """A key of the config's meta, as dbt's config.meta_get (the manifest's config.meta
        holds the YAML `config: {meta: ...}` and `+meta` of dbt_project.yml, merged)."""
        return (self.values.get("meta") or {}).get(key, default)


class _Macro:
    """A macro callable from Jinja and Python: returns the value given to return(), else
    the rendered text, as dbt's MacroGenerator does."""

    def __init__(self, runtime: Runtime, node: nodes.Macro) -> None:
        self._runtime = runtime
        self._node = node
        self._macro: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._macro is None:
            # compiled at first use: a command calls a small part of the package
            module = self._runtime.compile(self._node).make_module()
            self._macro = getattr(module, _EXPORTED + self._node.name)
        try:
            return self._macro(*args, **kwargs)
        except _MacroReturn as result:
            return result.value
        except jinja2.UndefinedError as error:
            raise MacroError(f"{self._node.name}: {error}") from None


class _Adapter:
    def __init__(self, macros: Mapping[str, _Macro]) -> None:
        self._macros = macros

    def dispatch(self, name: str, macro_namespace: str | None = None) -> _Macro:
        for candidate in (f"spark__{name}", f"default__{name}"):
            if candidate in self._macros:
                return self._macros[candidate]
        raise MacroError(f"no spark__ or default__ implementation of {name}")

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return _no_warehouse(f"adapter.{name}")


class _DbtBlocks(jinja2.ext.Extension):
    """dbt's own block tags: a generic test becomes the macro test_<name>, as in dbt; a
    materialization is skipped (it needs the warehouse)."""

    tags: ClassVar[set[str]] = {"test", "materialization"}

    def parse(self, parser: jinja2.parser.Parser) -> nodes.Node | list[nodes.Node]:
        tag = next(parser.stream)
        if tag.value == "test":
            node = nodes.Macro(lineno=tag.lineno)
            node.name = "test_" + parser.parse_assign_target(name_only=True).name
            parser.parse_signature(node)
            node.body = parser.parse_statements(("name:endtest",), drop_needle=True)
            return node
        while parser.stream.current.type != "block_end":
            next(parser.stream)
        parser.parse_statements(("name:endmaterialization",), drop_needle=True)
        return []


class Runtime:
    """The macros of one package, ready to call: runtime.macro('ivm_analyze')(sql, ups)."""

    def __init__(self, sources: Iterable[str], graph: Mapping[str, Any] | None = None) -> None:
        self._env = jinja2.sandbox.SandboxedEnvironment(
            extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols", _DbtBlocks]
        )
        self._config = _Config()
        self.macros: dict[str, _Macro] = {}
        self.globals: dict[str, Any] = {}
        for source in sources:
            try:
                body = self._env.parse(source).body
            except jinja2.TemplateSyntaxError as error:
                raise MacroError(f"cannot read a {PACKAGE} macro: {error} (line {error.lineno})") from None
            for node in body:
                if isinstance(node, nodes.Macro):
                    self.macros[node.name] = _Macro(self, node)
        self.globals.update(self._context(graph or {"nodes": {}, "sources": {}}))

    def compile(self, node: nodes.Macro) -> jinja2.Template:
        exported = nodes.Macro(_EXPORTED + node.name, node.args, node.defaults, node.body, lineno=node.lineno)
        code = self._env.compile(nodes.Template([exported], lineno=1))
        return self._env.template_class.from_code(self._env, code, self._env.make_globals(self.globals))

    @classmethod
    def from_directory(cls, macros: Path, graph: Mapping[str, Any] | None = None) -> Runtime:
        return cls((p.read_text(encoding="utf-8") for p in sorted(macros.rglob("*.sql"))), graph)

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> Runtime:
        """The package's macros as dbt parsed them into the manifest, and its graph."""
        sources = [
            m["macro_sql"] for m in manifest.get("macros", {}).values() if m.get("package_name") == PACKAGE
        ]
        if not sources:
            raise MacroError(
                f"the manifest holds no {PACKAGE} macros: add {PACKAGE} to packages.yml, "
                "run dbt deps, then dbt compile"
            )
        graph = {"nodes": manifest.get("nodes", {}), "sources": manifest.get("sources", {})}
        return cls(sources, graph)

    def macro(self, name: str) -> _Macro:
        try:
            return self.macros[name]
        except KeyError:
            raise MacroError(f"no macro named {name} in the {PACKAGE} package") from None

    @contextmanager
    def bound(self, config: Mapping[str, Any]) -> Iterator[None]:
        """Calls inside read `config` as the given model config."""
        previous = self._config.values
        self._config.values = config
        try:
            yield
        finally:
            self._config.values = previous

    def _context(self, graph: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **self.macros,
            # a mapping, as dbt's namespace: the sandbox refuses attributes that start with _
            PACKAGE: self.macros,
            "return": _return,
            "exceptions": {"raise_compiler_error": _raise_compiler_error},
            "adapter": _Adapter(self.macros),
            "api": {"Relation": Relation, "Column": Column},
            "config": self._config,
            "graph": graph,
            "modules": {"re": re, "datetime": datetime},
            "tojson": lambda value, sort_keys=False: json.dumps(value, sort_keys=sort_keys),
            "fromjson": _fromjson,
            "log": lambda message, info=False: "",
            "zip": zip,
            "execute": False,
            "run_query": _no_warehouse("run_query"),
            "statement": _no_warehouse("statement"),
            "load_result": _no_warehouse("load_result"),
        }
