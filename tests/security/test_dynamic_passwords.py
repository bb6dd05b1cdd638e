"""Dynamic password configs encrypted at rest (issue 10, broker/config/password_encoder.py): a PKCS12
keystore's password set with AlterConfigs is stored encrypted with password.encoder.secret, described
as sensitive, used after a restart, re-encoded when the secret rotates, and refused without a secret."""

from __future__ import annotations

import json
import socket
import ssl

import pytest
from cryptography import x509
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from broker.config.password_encoder import CBC, GCM, PasswordEncoder, PasswordEncoderError
from broker.tools._common import send_request
from tests.support.net import recv_frame
from tests.support.security import P12_PASSWORD, make_pki, start_secure_broker

BROKER = 4
PW_KEY = "listener.name.ssl.ssl.keystore.password"


@pytest.mark.parametrize("cipher", [CBC, GCM])
def test_encoder_round_trip_and_wrong_secret(cipher: str) -> None:
    enc = PasswordEncoder("the-secret", cipher_algorithm=cipher, key_length=256, iterations=4096)
    stored = enc.encode("päss,word:1")
    fields = dict(f.split(":", 1) for f in stored.split(","))
    assert fields["cipherAlgorithm"] == cipher and fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512"
    assert fields["iterations"] == "4096" and fields["keyLength"] == "256" and fields["passwordLength"] == "11"
    assert "päss" not in stored and enc.encode("päss,word:1") != stored  # fresh salt and IV each time
    assert enc.decode(stored) == "päss,word:1"
    # parameters travel with the value: an encoder with other settings but the same secret decodes it
    assert PasswordEncoder("the-secret", cipher_algorithm=CBC, key_length=128).decode(stored) == "päss,word:1"
    with pytest.raises(PasswordEncoderError):
        PasswordEncoder("another-secret").decode(stored)


def _alter(admin: KafkaAdminClient, entity: str, configs: list[tuple[str, str]]) -> tuple[int, str | None]:
    req = IncrementalAlterConfigsRequest(resources=[(BROKER, entity, [(k, 0, v) for k, v in configs])],
                                         validate_only=False)
    r = send_request(admin, req, node_id=0).responses[0]
    return r.error_code, r.error_message


def _served(port: int, ca: str) -> str:
    """The served certificate's CN, after an ApiVersions round trip over TLS."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        assert len(recv_frame(s)) > 10
        cert = x509.load_der_x509_certificate(s.getpeercert(binary_form=True))
        return str(cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value)


def _p12_keystore(pki) -> list[tuple[str, str]]:
    return [("listener.name.ssl.ssl.keystore.type", "PKCS12"),
            ("listener.name.ssl.ssl.keystore.location", str(pki.server_p12)), (PW_KEY, P12_PASSWORD)]


def test_password_configs_need_a_secret(broker_factory, tmp_path) -> None:
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki)
    admin = KafkaAdminClient(bootstrap_servers=sb.addr(sb.plaintext))
    assert _alter(admin, "0", _p12_keystore(pki)) == (42, "Password encoder secret not configured")
    assert not (sb.broker.data_dir / "samsa-dynamic-configs.json").exists()
    assert _served(sb.ssl, str(pki.ca)) == "localhost"  # the PEM keystore stays in force
    admin.close()


def test_password_stored_encrypted_described_sensitive_and_survives_restart(broker_factory, tmp_path) -> None:
    pki = make_pki(tmp_path / "pki")
    p12 = make_pki(tmp_path / "p12", server_cn="p12.localhost")  # the dynamic keystore: another certificate
    sb = start_secure_broker(broker_factory, pki, **{"password.encoder.secret": "first-secret"})
    admin = KafkaAdminClient(bootstrap_servers=sb.addr(sb.plaintext))
    assert _alter(admin, "", _p12_keystore(p12)) == (42, "Password config can be defined only at broker level")
    assert _alter(admin, "0", _p12_keystore(p12)) == (0, None)
    assert _served(sb.ssl, str(p12.ca)) == "p12.localhost"  # the PKCS12 keystore, opened with the password

    path = sb.broker.data_dir / "samsa-dynamic-configs.json"
    stored = json.loads(path.read_text())["broker"][PW_KEY]
    assert P12_PASSWORD not in path.read_text()
    assert PasswordEncoder("first-secret").decode(stored) == P12_PASSWORD
    assert stored.startswith("keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,")

    req = DescribeConfigsRequest(resources=[(BROKER, "0", [PW_KEY, "listener.name.ssl.ssl.keystore.type"])],
                                 include_synonyms=True)
    [res] = send_request(admin, req, node_id=0).results
    entries = {c.name: c for c in res.configs}
    pw = entries[PW_KEY]
    assert (pw.value, pw.is_sensitive, pw.config_source) == (None, True, 2)  # null, sensitive, DYNAMIC_BROKER_CONFIG
    assert entries["listener.name.ssl.ssl.keystore.type"].value == "PKCS12"
    admin.close()
    assert P12_PASSWORD not in sb.broker.log_text()

    # a restart decodes it (the broker must open the PKCS12 keystore at start)
    sb.broker.restart()
    assert _served(sb.ssl, str(p12.ca)) == "p12.localhost"

    # rotating the secret: the old one in password.encoder.old.secret, values re-encoded on start
    sb.broker.stop()
    sb.broker.overrides["password.encoder.secret"] = "second-secret"
    sb.broker.overrides["password.encoder.old.secret"] = "first-secret"
    sb.broker.start()
    assert _served(sb.ssl, str(p12.ca)) == "p12.localhost"
    restored = json.loads(path.read_text())["broker"][PW_KEY]
    assert PasswordEncoder("second-secret").decode(restored) == P12_PASSWORD
    with pytest.raises(PasswordEncoderError):
        PasswordEncoder("first-secret").decode(restored)
