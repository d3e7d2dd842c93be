"""AES-256-GCM and HKDF-SHA256 for sealing `requestState`, without loading `cryptography`.

`AESGCM` and `InvalidTag` have the interface (and produce the bytes) of
`cryptography.hazmat.primitives.ciphers.aead.AESGCM` for the one use _sealing.py makes of them:
a 32-byte key, 12-byte nonces, ciphertext ‖ 16-byte tag.
"""

# Design (issue 31, RSS):
# - `cryptography` maps its 14 MiB Rust extension to seal tokens: 8.6 MiB of RSS in a server whose
#   whole budget is 42. The interpreter has loaded OpenSSL's libcrypto already (ssl and hashlib
#   link it), so AES-256-GCM through ctypes on that same library costs 0.4 MiB (ctypes). Same
#   algorithm and implementation, same bytes: tokens sealed by either open with the other
#   (tests/server/test_aead.py checks both ways and against the NIST vectors).
# - The library is found through `_hashlib`'s own extension: dlsym on its handle searches the
#   libraries it was linked with, so this is exactly the libcrypto hashlib uses, on Linux and
#   macOS alike, with no search of the file system. Where that fails (an interpreter with OpenSSL
#   linked statically and its symbols hidden, or no ctypes), `cryptography`'s classes are used.
# - Keyed EVP contexts are reused from a per-key free list (list.pop/append are atomic, so two
#   threads never share one). Every return code is checked; a failed tag check is InvalidTag,
#   any other failure a RuntimeError, never a silent result; after a failure OpenSSL's error
#   queue is cleared, so ssl and hashlib never report an error of ours.
# - Cost: ~1.8 µs more per seal or unseal than cryptography (five ctypes calls), for 8.2 MiB.
# - HKDF-SHA256 (RFC 5869) is two HMACs from the standard library.
from __future__ import annotations

import hmac
from hashlib import sha256
from typing import Any

__all__ = ["AESGCM", "BACKEND", "InvalidTag", "hkdf_sha256"]

_KEY, _NONCE, _TAG = 32, 12, 16
_Bytes = bytes | bytearray | memoryview
_KEPT = 16 * 1024  # largest output buffer a context keeps between calls
_GCM_GET_TAG, _GCM_SET_TAG = 0x10, 0x11  # EVP_CTRL_GCM_GET_TAG / EVP_CTRL_GCM_SET_TAG


def hkdf_sha256(master: bytes, *, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869) of `master`: the same bytes as cryptography's HKDF(SHA256())."""
    if not 0 < length <= 255 * 32:
        raise ValueError(f"HKDF-SHA256 cannot derive {length} bytes")
    prk = hmac.digest(salt, master, sha256)
    out, block = b"", b""
    for counter in range(1, -(-length // 32) + 1):
        block = hmac.digest(prk, block + info + bytes((counter,)), sha256)
        out += block
    return out[:length]


def _libcrypto() -> Any:
    """The libcrypto `_hashlib` was linked with (its EVP AES-256-GCM present), or None."""
    try:
        import _hashlib
        import ctypes

        lib = ctypes.CDLL(_hashlib.__file__)
        lib.EVP_CIPHER_CTX_new.restype = lib.EVP_aes_256_gcm.restype = ctypes.c_void_p
        for name in ("EVP_CIPHER_CTX_free", "EVP_CIPHER_CTX_ctrl", "EVP_EncryptInit_ex",
                     "EVP_EncryptUpdate", "EVP_EncryptFinal_ex", "EVP_DecryptInit_ex",
                     "EVP_DecryptUpdate", "EVP_DecryptFinal_ex", "ERR_clear_error"):
            getattr(lib, name)
        if not lib.EVP_aes_256_gcm():
            return None
    except (ImportError, OSError, AttributeError):
        return None
    return lib


_lib = _libcrypto()
BACKEND = "cryptography" if _lib is None else "libcrypto"


class InvalidTag(Exception):  # noqa: N818 - cryptography's name, which callers catch
    """The tag did not verify: the ciphertext, nonce or associated data was altered."""


class AESGCM:
    """AES-256-GCM with 12-byte nonces, as cryptography's AESGCM for a 32-byte key."""

    __slots__ = ("_decrypting", "_encrypting", "_fallback", "_key")

    def __init__(self, key: bytes) -> None:
        if len(key) != _KEY:
            raise ValueError("AESGCM key must be 32 bytes here (AES-256)")
        self._key = bytes(key)
        # Contexts keyed once and reused (a new IV per call); list.pop/append are atomic, so
        # two threads never share one: each takes its own, or makes one.
        self._encrypting: list[_Context] = []
        self._decrypting: list[_Context] = []
        self._fallback: Any = None
        if _lib is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM as Fallback

            self._fallback = Fallback(self._key)

    def _context(self, init: Any) -> _Context:
        ctx = _pointer(_lib.EVP_CIPHER_CTX_new())
        if not ctx.value:
            raise MemoryError("EVP_CIPHER_CTX_new failed")
        if init(ctx, _cipher, None, self._key, None) != 1:
            _lib.EVP_CIPHER_CTX_free(ctx)
            _lib.ERR_clear_error()
            raise RuntimeError("AES-256-GCM key setup failed in libcrypto")
        count = _int()
        return _Context(ctx, count, _byref(count))

    def encrypt(self, nonce: _Bytes, data: _Bytes, associated_data: _Bytes | None) -> bytes:
        """Ciphertext ‖ tag of `data`, authenticating `associated_data` too."""
        if len(nonce) != _NONCE:
            raise ValueError("nonce must be 12 bytes")
        nonce, data, aad = bytes(nonce), bytes(data), bytes(associated_data or b"")
        if self._fallback is not None:
            return bytes(self._fallback.encrypt(nonce, data, aad))
        size = len(data)
        try:
            c = self._encrypting.pop()
        except IndexError:
            c = self._context(_enc_init)
        out = c.room(size + _TAG)
        ctx, n, count, end = c.ctx, c.count, c.pointer, _byref(out, size)
        if not (_enc_init(ctx, None, None, None, nonce) == 1
                and _enc_update(ctx, None, count, aad, len(aad)) == 1
                and _enc_update(ctx, out, count, data, size) == 1 and n.value == size
                and _enc_final(ctx, end, count) == 1 and n.value == 0
                and _ctrl(ctx, _GCM_GET_TAG, _TAG, end) == 1):
            c.free()
            _lib.ERR_clear_error()  # leave no error behind for ssl and hashlib to find
            raise RuntimeError("AES-GCM encryption failed in libcrypto")
        sealed: bytes = out[: size + _TAG]
        self._encrypting.append(c)
        return sealed

    def decrypt(self, nonce: _Bytes, data: _Bytes, associated_data: _Bytes | None) -> bytes:
        """The plaintext of ciphertext ‖ tag `data`; InvalidTag if anything was altered."""
        if len(nonce) != _NONCE:
            raise ValueError("nonce must be 12 bytes")
        nonce, data, aad = bytes(nonce), bytes(data), bytes(associated_data or b"")
        if self._fallback is not None:
            return self._fallback_decrypt(nonce, data, aad)
        size = len(data) - _TAG
        if size < 0:
            raise InvalidTag
        try:
            c = self._decrypting.pop()
        except IndexError:
            c = self._context(_dec_init)
        out = c.room(size + _TAG)
        ctx, n, count = c.ctx, c.count, c.pointer
        if not (_dec_init(ctx, None, None, None, nonce) == 1
                and _dec_update(ctx, None, count, aad, len(aad)) == 1
                and _dec_update(ctx, out, count, data, size) == 1 and n.value == size
                and _ctrl(ctx, _GCM_SET_TAG, _TAG, data[size:]) == 1):
            c.free()
            _lib.ERR_clear_error()
            raise RuntimeError("AES-GCM decryption failed in libcrypto")
        verified = _dec_final(ctx, _byref(out, size), count) == 1
        plain: bytes = out[:size]
        self._decrypting.append(c)  # a failed check leaves it reusable: the next call re-inits
        if not verified:
            _lib.ERR_clear_error()
            raise InvalidTag
        return plain

    def _fallback_decrypt(self, nonce: bytes, data: bytes, aad: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag as Invalid

        try:
            return bytes(self._fallback.decrypt(nonce, data, aad))
        except Invalid:
            raise InvalidTag from None

    def __del__(self) -> None:
        for c in (*getattr(self, "_encrypting", ()), *getattr(self, "_decrypting", ())):
            c.free()


class _Context:
    """One keyed EVP context with its output counter and a reusable output buffer."""

    __slots__ = ("buffer", "count", "ctx", "pointer")

    def __init__(self, ctx: Any, count: Any, pointer: Any) -> None:
        self.ctx, self.count, self.pointer = ctx, count, pointer
        self.buffer = _buffer(256)

    def room(self, size: int) -> Any:
        if size <= len(self.buffer):
            return self.buffer
        if size > _KEPT:  # a rare large token: its buffer is not kept
            return _buffer(size)
        self.buffer = _buffer(size)
        return self.buffer

    def free(self) -> None:
        if self.ctx.value:
            _lib.EVP_CIPHER_CTX_free(self.ctx)
            self.ctx.value = None


if _lib is not None:
    import ctypes

    _cipher = ctypes.c_void_p(_lib.EVP_aes_256_gcm())
    _pointer, _buffer, _byref, _int = (
        ctypes.c_void_p, ctypes.create_string_buffer, ctypes.byref, ctypes.c_int)
    _ctrl = _lib.EVP_CIPHER_CTX_ctrl
    _enc_init, _enc_update, _enc_final = (
        _lib.EVP_EncryptInit_ex, _lib.EVP_EncryptUpdate, _lib.EVP_EncryptFinal_ex)
    _dec_init, _dec_update, _dec_final = (
        _lib.EVP_DecryptInit_ex, _lib.EVP_DecryptUpdate, _lib.EVP_DecryptFinal_ex)
