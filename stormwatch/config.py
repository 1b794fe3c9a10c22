"""Loading the project's configuration (config/stormwatch.toml or $STORMWATCH_CONFIG)."""

from __future__ import annotations

import difflib
import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

# Where config/, sql/ and runtime/ are. A job submitted with `flink run -py` runs from a copy of the
# packages in a temporary folder, so the submitter names the checkout in STORMWATCH_HOME.
HOME_ENV = "STORMWATCH_HOME"
PROJECT_ROOT = Path(os.environ.get(HOME_ENV) or Path(__file__).resolve().parent.parent)
DEFAULT_CONFIG = PROJECT_ROOT / "config" / "stormwatch.toml"
CONFIG_ENV = "STORMWATCH_CONFIG"


class ConfigError(ValueError):
    """The configuration file is missing, unreadable, names a key the project does not know, or lacks a
    required value."""


# The keys a configuration file may set are the default file's (config/stormwatch.toml names every
# one), except in tables that are not the project's own. These pass their keys on unchanged (Kafka's
# and Flink's names) or are checked where they are read ([pipeline.suspects.policy]: SuspectPolicy).
_PASSED_ON = (("kafka", "properties"), ("kafka", "local", "server_properties"),
              ("pipeline", "spans", "source_properties"), ("pipeline", "suspects", "policy"))
_ANY = "any key"  # a table whose keys are not checked
_TABLE = "*"  # in a table: any name for a sub-table (not for a value), with this schema
_TOPIC = {"partitions": 1, "replication_factor": 1, "config": _ANY}


@dataclass(frozen=True)
class Config:
    path: Path
    data: dict

    def section(self, *keys: str) -> dict:
        node = self.data
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                raise ConfigError(f"{self.path}: missing [{'.'.join(keys)}]")
            node = node[key]
        return node

    def get(self, *keys: str):
        *parents, leaf = keys
        node = self.section(*parents) if parents else self.data
        if leaf not in node:
            raise ConfigError(f"{self.path}: missing {'.'.join(keys)}")
        return node[leaf]

    @property
    def runtime_dir(self) -> Path:
        return self.resolve(self.get("runtime_dir"))

    @property
    def savepoints_dir(self) -> Path:
        """Where `stormwatch job stop` puts savepoints (and jobs theirs, unless Flink's config says)."""
        return self.runtime_dir / "flink" / "savepoints"

    @property
    def jars_dir(self) -> Path:
        # Shared by every runtime dir of a checkout: jvm/pom.xml writes here, whatever the config.
        return PROJECT_ROOT / "runtime" / "jars"

    @property
    def bootstrap_servers(self) -> str:
        return self.get("kafka", "bootstrap_servers")

    @property
    def kafka_properties(self) -> dict[str, str]:
        props = self.data.get("kafka", {}).get("properties", {})
        return {str(k): str(v) for k, v in props.items()}

    @property
    def topics(self) -> dict[str, dict]:
        return self.section("topics")

    def resolve(self, path: str | Path) -> Path:
        p = Path(path)
        return p if p.is_absolute() else PROJECT_ROOT / p


def load(path: str | Path | None = None) -> Config:
    chosen = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)
    return Config(path=chosen.resolve(), data=_read(chosen, seen=()))


def _read(path: Path, seen: tuple[Path, ...]) -> dict:
    """A file's settings; `base = "other.toml"` (relative to the file) puts them over another file's."""
    if path.resolve() in seen:
        raise ConfigError(f"{path}: `base` files include each other: {' -> '.join(map(str, seen))}")
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    base = data.pop("base", None)
    check_keys(data, path)
    if base is None:
        return data
    return _merge(_read(path.parent / base, (*seen, path.resolve())), data)


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@functools.cache
def _schema() -> dict | None:
    """The default file's keys, with the tables that take any key; None if it is not there to say."""
    try:
        with DEFAULT_CONFIG.open("rb") as f:
            schema = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    schema.pop("base", None)
    for *parents, leaf in _PASSED_ON:
        node = schema
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = _ANY
    schema["topics"] = {_TABLE: _TOPIC}  # any topic, each with the keys of one
    # [flink]: the project's keys; every table under it ([flink.job_config], [flink.cluster_config], ...) is Flink's.
    schema["flink"] = {**{k: v for k, v in schema.get("flink", {}).items() if not isinstance(v, dict)}, _TABLE: _ANY}
    return schema


def check_keys(data: dict, path: Path) -> None:
    """A ConfigError naming the first key of `data` (one file's settings) the project does not know,
    and its table: a misspelt key would otherwise be ignored, and its default used without a word."""
    schema = _schema()
    if schema is not None:
        _check(data, schema, (), path)


def _check(node: dict, schema: dict, where: tuple[str, ...], path: Path) -> None:
    for key, value in node.items():
        known = schema.get(key, schema.get(_TABLE) if isinstance(value, dict) else None)
        if known is None:
            table = f"[{'.'.join(where)}]" if where else "the top level"
            what = f"table [{'.'.join((*where, key))}]" if isinstance(value, dict) else f"key {key!r} in {table}"
            names = [k for k in schema if k != _TABLE]
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; {table} takes {', '.join(sorted(names))}"
            raise ConfigError(f"{path}: unknown {what}{hint}")
        if isinstance(value, dict) and isinstance(known, dict):
            _check(value, known, (*where, key), path)
