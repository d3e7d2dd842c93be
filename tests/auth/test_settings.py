"""AuthSettings: validation, the MRTR_AUTH_* variables, the worker round trip (#15)."""

from __future__ import annotations

import pytest

from mrtr.auth import AuthSettings


def test_15_from_env_reads_every_variable_and_overrides_win() -> None:
    env = {"MRTR_AUTH_ISSUER": "https://as.example", "MRTR_AUTH_AUDIENCE": "a, b",
           "MRTR_AUTH_SCOPES": "mcp,notes:read", "MRTR_AUTH_RESOURCE": "https://x.example/mcp",
           "MRTR_AUTH_JWKS_URI": "https://as.example/keys",
           "MRTR_AUTH_INTROSPECTION_URL": "https://as.example/introspect",
           "MRTR_AUTH_CLIENT_ID": "rs", "MRTR_AUTH_CLIENT_SECRET": "s3"}
    settings = AuthSettings.from_env(env, scopes=("other",), audience=(), resource=None)
    assert settings == AuthSettings(
        issuer="https://as.example", audience=("a", "b"), scopes=("other",),
        resource="https://x.example/mcp", jwks_uri="https://as.example/keys",
        introspection_url="https://as.example/introspect", client_id="rs", client_secret="s3")
    assert "s3" not in repr(settings)


def test_15_no_issuer_means_auth_off() -> None:
    assert AuthSettings.from_env({}) is None
    assert AuthSettings.from_env({"MRTR_AUTH_SCOPES": "x"}) is None


def test_15_json_round_trip_for_workers() -> None:
    settings = AuthSettings(issuer="http://127.0.0.1:9", audience=("a",), scopes=("s",),
                            leeway=5.0)
    assert AuthSettings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize("values", [
    {"issuer": "http://as.example"},  # plain http off loopback
    {"issuer": "ftp://127.0.0.1"},
    {"issuer": "https://as.example", "jwks_uri": "http://keys.example"},
    {"issuer": "https://as.example", "scopes": ("two words",)},
    {"issuer": "https://as.example", "scopes": ('quo"te',)},
    {"issuer": "https://as.example", "introspection_url": "https://as.example/i"},
    {"introspection_url": "https://as.example/i", "client_id": "a", "client_secret": "b"},
    {"issuer": "https://as.example", "timeout": 0.0},
    {"issuer": "https://as.example", "token_cache": -1.0},
    {"issuer": "https://as.example", "token_cache": 86400.0},
])
def test_15_bad_settings_raise_value_error(values: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        AuthSettings(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("issuer", ["http://127.0.0.1:9000", "http://localhost:1/x",
                                    "http://[::1]:8/", "https://login.example.com/t"])
def test_15_https_or_loopback_issuers_are_fine(issuer: str) -> None:
    assert AuthSettings(issuer=issuer).issuer == issuer
