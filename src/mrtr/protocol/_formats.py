"""What a `format: email` field of an elicitation form accepts: one rule for server and terminal."""

# Design: email syntax is email-validator's (RFC 5321/5322 as mail systems really accept it, with
# internationalised addresses), not a pattern of our own: `ann@example..com`, `.ann@example.com`
# and `ann@-example.com` passed the old one. Syntax only (check_deliverability=False): no DNS
# lookup, so answers validate the same offline, in tests and on every replica. It is imported on
# first use: it costs ~50 ms and most processes (clients, forms without emails) never need it.
from __future__ import annotations

__all__ = ["email_problem"]


def email_problem(text: str) -> str | None:
    """Why `text` is not a usable email address (a sentence fit for the user), or None if it is.

    Refuses what mail servers refuse: empty or dotted-out parts, a domain label that starts or
    ends with a hyphen, no dot in the domain, reserved names (`.test`, `localhost`), quoted local
    parts, IP-literal domains and whitespace.
    """
    from email_validator import EmailNotValidError, validate_email

    try:
        validate_email(text, check_deliverability=False)
    except EmailNotValidError as exc:
        return str(exc)
    return None
