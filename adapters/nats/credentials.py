"""NATS NKey material read and checked the way nats-py will use it: a `.creds` file (the
user JWT and the user's NKey seed, as `nsc` writes it) or a bare NKey seed file.

`run` and `validate` both read the files here, so a file `validate` accepts is one the
client can sign with (nats-py signs the server's nonce with the seed via `nkeys`)."""

from __future__ import annotations

import re

import nkeys  # type: ignore[import-untyped]  # no stubs upstream

_JWT = re.compile(r"-----BEGIN NATS USER JWT-----\s*(\S+)\s*------END NATS USER JWT------")
_SEED = re.compile(r"-----BEGIN USER NKEY SEED-----\s*(\S+)\s*------END USER NKEY SEED------")


def _seed_error(name: str, path: str, exc: Exception) -> ValueError:
    return ValueError(f"{name}: '{path}' holds no valid NKey seed ({type(exc).__name__})")


def check_seed(seed: str, name: str, path: str) -> str:
    """The public key of `seed`; ValueError when it is not a usable NKey seed."""
    try:
        keys = nkeys.from_seed(seed.strip().encode())
        public: bytes = keys.public_key
    except Exception as exc:  # nkeys raises its own errors, binascii ones, ValueError
        raise _seed_error(name, path, exc) from None
    return public.decode()


def _read(name: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        raise ValueError(f"{name}: '{path}' is not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{name}: cannot read '{path}': {exc}") from None


def check_creds_file(path: str) -> str:
    """A `.creds` file's user public key; ValueError naming what is missing or wrong."""
    text = _read("creds_file", path)
    if _JWT.search(text) is None:
        raise ValueError(f"creds_file: '{path}' has no NATS USER JWT block (write the "
                         "file `nsc generate creds` makes)")
    seed = _SEED.search(text)
    if seed is None:
        raise ValueError(f"creds_file: '{path}' has no USER NKEY SEED block")
    return check_seed(seed.group(1), "creds_file", path)


def check_seed_file(path: str) -> str:
    """An NKey seed file's public key; ValueError when it is missing or not a seed."""
    return check_seed(_read("nkey_seed_file", path), "nkey_seed_file", path)


__all__ = ["check_creds_file", "check_seed", "check_seed_file"]
