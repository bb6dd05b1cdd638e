"""Dynamic password configs encrypted at rest, as Kafka's ``kafka.utils.PasswordEncoder`` (KIP-226).

A password config set with AlterConfigs (``ssl.keystore.password``, ``ssl.key.password``,
``listener.name.<l>.sasl.jaas.config`` ...) is stored only encrypted: AES with a key derived
by PBKDF2 from ``password.encoder.secret`` and a random 256-byte salt. The stored value is
Kafka's own format, ``name:value`` pairs joined by commas::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64>,iterations:4096,encryptedPassword:<base64>,passwordLength:<n>,initializationVector:<base64>

(``AES/GCM/NoPadding`` adds ``authenticationTagLength`` instead of using padding.) Everything
needed to decrypt except the secret travels with the value, so changing
``password.encoder.iterations`` or the algorithms affects only values encoded afterwards; a new
secret is introduced with ``password.encoder.old.secret`` holding the previous one, and values
that decode only with the old secret are re-encoded (:meth:`DynamicBrokerConfigs.load`).

Without ``password.encoder.secret`` a password config cannot be stored at all: AlterConfigs
answers INVALID_REQUEST "Password encoder secret not configured", as Kafka does.

Never log a decoded value; the secret itself is a sensitive config (``broker.config.definitions.is_sensitive``).
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

if TYPE_CHECKING:
    from .properties import BrokerConfig

SECRET = "password.encoder.secret"
OLD_SECRET = "password.encoder.old.secret"
NO_SECRET = "Password encoder secret not configured"

_KDF_HASHES: dict[str, type[hashes.SHA512 | hashes.SHA256 | hashes.SHA1]] = {
    "PBKDF2WithHmacSHA512": hashes.SHA512, "PBKDF2WithHmacSHA256": hashes.SHA256, "PBKDF2WithHmacSHA1": hashes.SHA1}
CBC, GCM = "AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"
SALT_BYTES = 256  # Kafka's salt length
GCM_TAG_BITS = 128


class PasswordEncoderError(ValueError):
    """A stored value that cannot be decoded (wrong secret, damaged value, unknown algorithm)."""


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class PasswordEncoder:
    """Encodes and decodes password config values with one secret (see the module docstring)."""

    def __init__(self, secret: str, key_factory_algorithm: str | None = None, cipher_algorithm: str = CBC,
                 key_length: int = 128, iterations: int = 4096) -> None:
        self.secret = secret
        self.key_factory_algorithm = key_factory_algorithm or "PBKDF2WithHmacSHA512"
        if self.key_factory_algorithm not in _KDF_HASHES:
            raise ValueError(f"Unsupported password.encoder.keyfactory.algorithm {self.key_factory_algorithm}")
        if cipher_algorithm not in (CBC, GCM):
            raise ValueError(f"Unsupported password.encoder.cipher.algorithm {cipher_algorithm}")
        if key_length not in (128, 192, 256):
            raise ValueError(f"Invalid password.encoder.key.length {key_length}")
        if iterations < 1024:
            raise ValueError(f"password.encoder.iterations must be at least 1024, not {iterations}")
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    @classmethod
    def from_config(cls, config: BrokerConfig, secret_key: str = SECRET) -> PasswordEncoder | None:
        """The encoder for ``config``'s ``password.encoder.*`` settings; None without a secret."""
        secret = config.get(secret_key)
        if not secret:
            return None

        def setting(name: str, default: str) -> str:
            v = config.get("password.encoder." + name)
            return default if v is None or str(v).strip() == "" else str(v).strip()

        return cls(str(secret), setting("keyfactory.algorithm", "PBKDF2WithHmacSHA512"),
                   setting("cipher.algorithm", CBC), int(setting("key.length", "128")),
                   int(setting("iterations", "4096")))

    def _key(self, algorithm: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        kdf = PBKDF2HMAC(algorithm=_KDF_HASHES[algorithm](), length=key_length // 8, salt=salt,
                         iterations=iterations)
        return kdf.derive(self.secret.encode())

    def encode(self, password: str) -> str:
        salt = os.urandom(SALT_BYTES)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        plain = password.encode()
        fields = {"keyFactoryAlgorithm": self.key_factory_algorithm, "cipherAlgorithm": self.cipher_algorithm,
                  "keyLength": str(self.key_length), "salt": _b64(salt), "iterations": str(self.iterations)}
        if self.cipher_algorithm == CBC:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            data = enc.update(padder.update(plain) + padder.finalize()) + enc.finalize()
            extra = {"initializationVector": _b64(iv)}
        else:
            iv = os.urandom(12)
            enc = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
            data = enc.update(plain) + enc.finalize() + enc.tag  # Java appends the tag
            extra = {"authenticationTagLength": str(GCM_TAG_BITS), "initializationVector": _b64(iv)}
        fields.update(encryptedPassword=_b64(data), passwordLength=str(len(password)), **extra)
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        try:
            fields = dict(item.split(":", 1) for item in encoded.split(","))
            salt = base64.b64decode(fields["salt"])
            key = self._key(fields["keyFactoryAlgorithm"], salt, int(fields["iterations"]), int(fields["keyLength"]))
            data = base64.b64decode(fields["encryptedPassword"])
            iv = base64.b64decode(fields["initializationVector"])
            if fields["cipherAlgorithm"] == CBC:
                dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(dec.update(data) + dec.finalize()) + unpadder.finalize()
            elif fields["cipherAlgorithm"] == GCM:
                tag_len = int(fields.get("authenticationTagLength", GCM_TAG_BITS)) // 8
                dec = Cipher(algorithms.AES(key), modes.GCM(iv, data[-tag_len:])).decryptor()
                plain = dec.update(data[:-tag_len]) + dec.finalize()
            else:
                raise PasswordEncoderError(f"unknown cipher {fields['cipherAlgorithm']}")
            password = plain.decode()
        except PasswordEncoderError:
            raise
        except Exception as e:  # wrong secret: bad padding / tag, or garbage
            raise PasswordEncoderError(f"Password could not be decoded ({type(e).__name__})") from None
        if len(password) != int(fields.get("passwordLength", len(password))):
            raise PasswordEncoderError("Password could not be decoded (length mismatch)")
        return password


def is_password_config(name: str) -> bool:
    """Kafka's DynamicBrokerConfig.isPasswordConfig: the dynamic configs of type PASSWORD."""
    return name.endswith(("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                          "ssl.keystore.key", "sasl.jaas.config"))
