"""AES-256-GCM through the interpreter's libcrypto: cryptography's AESGCM bytes (issue 31)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as Reference
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mrtr.server import _aead
from mrtr.server._aead import AESGCM, InvalidTag, hkdf_sha256

# The GCM specification's test case 16 (McGrew & Viega): AES-256, 96-bit IV, with AAD.
K16 = bytes.fromhex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
P16 = bytes.fromhex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
A16 = bytes.fromhex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
IV16 = bytes.fromhex("cafebabefacedbaddecaf888")
C16 = bytes.fromhex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662")
T16 = bytes.fromhex("76fc6ece0f4e1768cddf8853bb2d551b")


def test_31_the_backend_on_this_machine_is_libcrypto() -> None:
    # Linux with a dynamically linked OpenSSL: the path the benchmark's RSS depends on.
    assert _aead.BACKEND == "libcrypto"


def test_31_the_gcm_specification_vector() -> None:
    aead = AESGCM(K16)
    assert aead.encrypt(IV16, P16, A16) == C16 + T16
    assert aead.decrypt(IV16, C16 + T16, A16) == P16


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 255, 4096, 70_000])
def test_31_the_same_bytes_as_cryptography_both_ways(size: int) -> None:
    key, nonce, data, aad = os.urandom(32), os.urandom(12), os.urandom(size), os.urandom(11)
    ours, theirs = AESGCM(key), Reference(key)
    sealed = ours.encrypt(nonce, data, aad)
    assert sealed == theirs.encrypt(nonce, data, aad)
    assert theirs.decrypt(nonce, sealed, aad) == data
    assert ours.decrypt(nonce, sealed, aad) == data
    assert ours.decrypt(memoryview(nonce), memoryview(sealed), aad) == data  # as _sealing calls it
    assert ours.encrypt(nonce, data, None) == theirs.encrypt(nonce, data, None)


def test_31_every_alteration_fails_the_tag_and_the_context_stays_usable() -> None:
    key, nonce, aad = os.urandom(32), os.urandom(12), b"v1.kid"
    aead = AESGCM(key)
    sealed = aead.encrypt(nonce, b"the journal", aad)
    for index in range(len(sealed)):
        bad = bytearray(sealed)
        bad[index] ^= 0x01
        with pytest.raises(InvalidTag):
            aead.decrypt(nonce, bytes(bad), aad)
        assert aead.decrypt(nonce, sealed, aad) == b"the journal"  # the reused context recovers
    with pytest.raises(InvalidTag):
        aead.decrypt(bytes([nonce[0] ^ 1]) + nonce[1:], sealed, aad)
    with pytest.raises(InvalidTag):
        aead.decrypt(nonce, sealed, b"v1.kie")
    with pytest.raises(InvalidTag):
        AESGCM(os.urandom(32)).decrypt(nonce, sealed, aad)
    for short in (b"", sealed[:15], sealed[:16]):
        with pytest.raises(InvalidTag):
            aead.decrypt(nonce, short, aad)


def test_31_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        AESGCM(os.urandom(16))
    with pytest.raises(ValueError, match="12 bytes"):
        AESGCM(os.urandom(32)).encrypt(os.urandom(16), b"x", None)
    with pytest.raises(ValueError, match="12 bytes"):
        AESGCM(os.urandom(32)).decrypt(os.urandom(8), b"x" * 32, None)


def test_31_threads_never_share_a_context() -> None:
    key = os.urandom(32)
    aead, reference = AESGCM(key), Reference(key)
    failures: list[str] = []

    def work(seed: int) -> None:
        for round_ in range(300):
            nonce, data = os.urandom(12), os.urandom((seed * 31 + round_) % 300)
            sealed = aead.encrypt(nonce, data, b"aad")
            if sealed != reference.encrypt(nonce, data, b"aad") or \
                    aead.decrypt(nonce, sealed, b"aad") != data:
                failures.append(f"thread {seed} round {round_}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_31_hkdf_is_rfc_5869_and_cryptography_s() -> None:
    # RFC 5869 appendix A.1 (SHA-256).
    okm = hkdf_sha256(b"\x0b" * 22, salt=bytes(range(13)), info=bytes(range(0xF0, 0xFA)), length=42)
    assert okm.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                         "34007208d5b887185865")
    for length in (8, 32, 33, 64, 100):
        reference = HKDF(algorithm=hashes.SHA256(), length=length, salt=b"s", info=b"i")
        assert hkdf_sha256(b"k" * 32, salt=b"s", info=b"i", length=length) == \
            reference.derive(b"k" * 32)
    with pytest.raises(ValueError):
        hkdf_sha256(b"k", salt=b"s", info=b"i", length=0)


def test_31_without_ctypes_cryptography_seals_the_same_bytes() -> None:
    # An interpreter where libcrypto cannot be reached (here: no ctypes) falls back to
    # cryptography, with the same interface, bytes and exception.
    code = (
        "import sys; sys.modules['ctypes'] = None\n"
        "from mrtr.server import _aead\n"
        "a = _aead.AESGCM(bytes(range(32))); n = bytes(12)\n"
        "s = a.encrypt(n, b'x' * 40, b'aad')\n"
        "assert a.decrypt(memoryview(n), s, b'aad') == b'x' * 40\n"
        "try:\n    a.decrypt(n, s[:-1] + bytes([s[-1] ^ 1]), b'aad')\n"
        "except _aead.InvalidTag:\n    pass\nelse:\n    raise SystemExit('no InvalidTag')\n"
        "print(_aead.BACKEND, s.hex())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    backend, sealed = out.stdout.split()
    assert backend == "cryptography"
    assert bytes.fromhex(sealed) == AESGCM(bytes(range(32))).encrypt(bytes(12), b"x" * 40, b"aad")


def test_31_a_failed_tag_leaves_no_openssl_error_for_hashlib_or_ssl() -> None:
    import hashlib
    import ssl

    aead = AESGCM(os.urandom(32))
    nonce = os.urandom(12)
    sealed = aead.encrypt(nonce, b"x", b"a")
    for _ in range(3):
        with pytest.raises(InvalidTag):
            aead.decrypt(nonce, sealed[:-1] + bytes([sealed[-1] ^ 1]), b"a")
    assert hashlib.sha256(b"abc").hexdigest().startswith("ba7816bf8f01cfea414140de5dae2223")
    assert _aead._lib.ERR_peek_error() == 0  # nothing queued for the next OpenSSL user
    ssl.create_default_context()


def test_31_a_large_token_uses_a_buffer_it_does_not_keep() -> None:
    key, nonce = os.urandom(32), os.urandom(12)
    aead, data = AESGCM(key), os.urandom(200_000)
    sealed = aead.encrypt(nonce, data, b"")
    assert sealed == Reference(key).encrypt(nonce, data, b"")
    assert aead.decrypt(nonce, sealed, b"") == data
    assert all(len(c.buffer) <= _aead._KEPT for c in (*aead._encrypting, *aead._decrypting))
