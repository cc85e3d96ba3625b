"""Who may change state through the console: the operator token, a session cookie, CSRF tokens.

Without a configured token the console is read-only. A browser signs in by posting the token
once and gets a session cookie (HttpOnly, SameSite=Strict) holding a random nonce and its HMAC;
every form carries a CSRF token, the HMAC of that nonce under another label, so a page of another
site can neither read nor forge it. Tools send ``Authorization: Bearer <token>`` instead (a
browser never adds that header by itself, so such requests need no CSRF token).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from pydantic import SecretStr

COOKIE = "agentledger_console"
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class Refusal:
    """Why a change of state was refused (shown to the person, with HTTP 403)."""

    reason: str


class Guard:
    """Checks tokens, issues sessions and CSRF tokens; ``token`` None = read-only console."""

    def __init__(self, token: SecretStr | None) -> None:
        secret = token.get_secret_value() if token is not None else ""
        self._token = secret.encode() if secret else None

    @property
    def writable(self) -> bool:
        """Whether any change of state can be allowed at all."""
        return self._token is not None

    def _mac(self, label: str, nonce: str) -> str:
        if self._token is None:
            return ""
        return hmac.new(self._token, f"{label}:{nonce}".encode(), hashlib.sha256).hexdigest()

    def token_ok(self, given: str) -> bool:
        """Whether ``given`` is the operator token (compared in constant time)."""
        return self._token is not None and hmac.compare_digest(given.encode(), self._token)

    def new_session(self) -> str:
        """A fresh session cookie value: ``nonce.mac``."""
        nonce = secrets.token_hex(16)
        return f"{nonce}.{self._mac('session', nonce)}"

    def session_nonce(self, cookie: str | None) -> str | None:
        """The nonce of a valid session cookie, else None."""
        if self._token is None or not cookie or "." not in cookie:
            return None
        nonce, mac = cookie.split(".", 1)
        return nonce if hmac.compare_digest(mac, self._mac("session", nonce)) else None

    def csrf_token(self, cookie: str | None) -> str | None:
        """The CSRF token forms of this session carry (None when not signed in)."""
        nonce = self.session_nonce(cookie)
        return None if nonce is None else self._mac("csrf", nonce)

    def authorize(
        self, *, bearer: str | None, cookie: str | None, csrf: str | None
    ) -> Refusal | None:
        """None if the request may change state, else why not."""
        if self._token is None:
            return Refusal("the console is read-only: AGENTLEDGER_CONSOLE_TOKEN is not set")
        if bearer is not None:
            return None if self.token_ok(bearer) else Refusal("wrong bearer token")
        expected = self.csrf_token(cookie)
        if expected is None:
            return Refusal("sign in with the console token first")
        if not csrf or not hmac.compare_digest(csrf, expected):
            return Refusal("the form's CSRF token is missing or wrong; reload the page")
        return None


def bearer_of(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, else None."""
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None
