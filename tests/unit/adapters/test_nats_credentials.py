"""NATS creds / NKey seed files are read and parsed when the adapter is built (so
`xrgw validate` refuses what `run` would), with the file named in the error."""

from __future__ import annotations

import os
from pathlib import Path

import nkeys  # type: ignore[import-untyped]
import pytest

from adapters.nats import NatsOptions
from adapters.nats.credentials import check_creds_file, check_seed_file
from gateway.ports import EndpointSettings

SEED = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
PUBLIC = nkeys.from_seed(SEED.encode()).public_key.decode()
CREDS = f"""-----BEGIN NATS USER JWT-----
eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.c2ln
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.

-----BEGIN USER NKEY SEED-----
{SEED}
------END USER NKEY SEED------
"""


def test_a_creds_file_and_a_seed_file_give_the_users_public_key(tmp_path: Path) -> None:
    (tmp_path / "user.creds").write_text(CREDS)
    (tmp_path / "user.nk").write_text(SEED + "\n")
    assert check_creds_file(str(tmp_path / "user.creds")) == PUBLIC
    assert check_seed_file(str(tmp_path / "user.nk")) == PUBLIC


@pytest.mark.parametrize(("text", "why"), [
    ("", "no NATS USER JWT block"),
    (CREDS.replace(SEED, "SUNOTASEED"), "no valid NKey seed"),
    (CREDS.split("****")[0], "no USER NKEY SEED block"),
])
def test_a_broken_creds_file_is_refused_naming_it(tmp_path: Path, text: str,
                                                  why: str) -> None:
    path = tmp_path / "user.creds"
    path.write_text(text)
    with pytest.raises(ValueError, match=why) as info:
        NatsOptions.parse(EndpointSettings("nats://127.0.0.1:4222",
                                           options={"creds_file": str(path)}))
    assert str(path) in str(info.value)
    assert SEED not in str(info.value)  # the seed is a secret


def test_a_missing_seed_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a file"):
        NatsOptions.parse(EndpointSettings("nats://127.0.0.1:4222", options={
            "nkey_seed_file": str(tmp_path / "absent.nk")}))
