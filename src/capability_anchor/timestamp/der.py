"""A minimal DER reader for what rfc3161-client cannot take: the PKIStatusInfo (it accepts status 0
only), genTime's fraction (it drops it), certificate order (its parser demands DER SET OF order) and
the signed ESS signing-certificate attribute (it ignores it). Nothing here decides that a signature
is good."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from capability_anchor.errors import TimestampError

_STATUS_NAMES = {
    0: "granted",
    1: "grantedWithMods",
    2: "rejection",
    3: "waiting",
    4: "revocationWarning",
    5: "revocationNotification",
}
# PKIFailureInfo bits (RFC 3161 §2.4.2).
_FAILURE_BITS = {
    0: "badAlg",
    2: "badRequest",
    5: "badDataFormat",
    14: "timeNotAvailable",
    15: "unacceptedPolicy",
    16: "unacceptedExtension",
    17: "addInfoNotAvailable",
    25: "systemFailure",
}
# ESS signing-certificate attributes (RFC 2634 §5.4, RFC 5035) and the hashes they may use.
_SIGNING_CERTIFICATE = bytes.fromhex("060b2a864886f70d010910020c")
_SIGNING_CERTIFICATE_V2 = bytes.fromhex("060b2a864886f70d010910022f")
_ESS_HASHES = {
    bytes.fromhex("06052b0e03021a"): "sha1",
    bytes.fromhex("0609608648016503040201"): "sha256",
    bytes.fromhex("0609608648016503040202"): "sha384",
    bytes.fromhex("0609608648016503040203"): "sha512",
}
_NO_ESS = "the token has no usable signed ESS signing-certificate attribute (RFC 3161 §2.4.1)"

Element = tuple[int, int, int, int]
"""(tag, element start, content start, content end)"""


def tlv(buf: bytes, i: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the definite-length DER element at buf[i]."""
    if i + 2 > end:
        raise TimestampError("the reply is not DER: truncated element")
    tag, n = buf[i], buf[i + 1]
    if tag & 0x1F == 0x1F:
        raise TimestampError("the reply is not DER: unexpected high tag number")
    i += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or i + k > end:
            raise TimestampError("the reply is not DER: bad length")
        n = int.from_bytes(buf[i : i + k], "big")
        if n < 0x80 or buf[i] == 0:
            raise TimestampError("the reply is not DER: non-minimal length")
        i += k
    if i + n > end:
        raise TimestampError("the reply is not DER: element runs past its container")
    return tag, i, i + n


def children(buf: bytes, start: int, end: int) -> list[Element]:
    """(tag, element start, content start, content end) of each element in buf[start:end]."""
    out = []
    i = start
    while i < end:
        tag, cs, ce = tlv(buf, i, end)
        out.append((tag, i, cs, ce))
        i = ce
    return out


def encode(tag: int, content: bytes) -> bytes:
    """The DER element of TAG around CONTENT (definite length, minimal)."""
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def signed_data(token: bytes) -> tuple[int, int]:
    """(start, end) of a token's SignedData content; not DER: TimestampError, else ValueError."""
    _, start, end = tlv(token, 0, len(token))
    info = children(token, start, end)
    if len(info) != 2 or info[1][0] != 0xA0:
        raise ValueError("the token is not a ContentInfo with [0] content")
    tag, sd_start, sd_end = tlv(token, info[1][2], info[1][3])
    if tag != 0x30:
        raise ValueError("the token's content is not a SignedData SEQUENCE")
    return sd_start, sd_end


def granted_token(reply: bytes) -> bytes:
    """The TimeStampToken of a granted (or grantedWithMods) reply, else a TimestampError."""
    if not reply:
        raise TimestampError("the reply is empty")
    tag, start, end = tlv(reply, 0, len(reply))
    if tag != 0x30 or end != len(reply):
        raise TimestampError("the reply is not a DER TimeStampResp (a single SEQUENCE)")
    parts = children(reply, start, end)
    if not parts or parts[0][0] != 0x30:
        raise TimestampError("the reply has no PKIStatusInfo")
    _, _, s_start, s_end = parts[0]
    info = children(reply, s_start, s_end)
    if not info or info[0][0] != 0x02 or not 1 <= info[0][3] - info[0][2] <= 4:
        raise TimestampError("the reply's PKIStatus is not a small INTEGER")
    status = int.from_bytes(reply[info[0][2] : info[0][3]], "big", signed=True)
    if status not in (0, 1):
        name = _STATUS_NAMES.get(status, "unknown")
        detail = _status_detail(reply, info[1:])
        raise TimestampError(f"the TSA refused: PKIStatus {status} ({name}){detail}")
    if len(parts) != 2 or parts[1][0] != 0x30:
        raise TimestampError("the reply is granted but carries no TimeStampToken")
    _, t_start, _, t_end = parts[1]
    return reply[t_start:t_end]


def _status_detail(buf: bytes, items: list[Element]) -> str:
    """`: text; failInfo names` of a PKIStatusInfo's optional members, best effort."""
    texts: list[str] = []
    failures: list[str] = []
    for tag, _, cs, ce in items:
        if tag == 0x30:  # PKIFreeText ::= SEQUENCE OF UTF8String
            try:
                strings = children(buf, cs, ce)
            except TimestampError:
                continue
            texts.extend(
                buf[s:e].decode("utf-8", "replace")[:200] for t, _, s, e in strings if t == 0x0C
            )
        elif tag == 0x03 and ce > cs:  # PKIFailureInfo BIT STRING
            bits = buf[cs + 1 : ce]
            for n, name in _FAILURE_BITS.items():
                if n // 8 < len(bits) and bits[n // 8] & (0x80 >> (n % 8)):
                    failures.append(name)
    shown = [repr(t) for t in texts] + failures
    return ": " + "; ".join(shown) if shown else ""


def gen_time(token: bytes) -> datetime:
    """genTime of the TSTInfo in TOKEN, with its fraction to the microsecond (X.690 §11.7)."""
    try:
        sd_start, sd_end = signed_data(token)
        encap = children(token, sd_start, sd_end)[2]  # EncapsulatedContentInfo
        wrapper = children(token, encap[2], encap[3])[1]  # [0] EXPLICIT OCTET STRING
        _, o_start, o_end = tlv(token, wrapper[2], wrapper[3])
        _, t_start, t_end = tlv(token, o_start, o_end)  # TSTInfo
        for tag, _, cs, ce in children(token, t_start, t_end):
            if tag == 0x18:
                text = token[cs:ce].decode("ascii", "replace")
                match = re.fullmatch(r"(\d{14})(?:\.(\d*[1-9]))?Z", text)
                if match is None:
                    break
                at = datetime.strptime(match[1], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
                return at.replace(microsecond=int((match[2] or "0")[:6].ljust(6, "0")))
    except (IndexError, ValueError):
        pass  # the library parsed this token, so this is not expected; fail closed anyway
    raise TimestampError("the TSTInfo has no DER GeneralizedTime genTime")


def sort_certificates(token: bytes) -> bytes:
    """TOKEN with its (unsigned) certificates in DER SET OF order (X.690 §11.6)."""
    try:
        sd_start, sd_end = signed_data(token)
        for tag, _, cs, ce in children(token, sd_start, sd_end):
            if tag == 0xA0:  # certificates [0] IMPLICIT CertificateSet
                items = sorted(token[a:e] for _, a, _, e in children(token, cs, ce))
                return token[:cs] + b"".join(items) + token[ce:]
    except (TimestampError, ValueError):
        pass  # not shaped as expected: let the library's parser say what is wrong
    return token


def ess_cert_id(token: bytes) -> tuple[str, bytes]:
    """(hash name, certHash) of the signer's first ESSCertID(v2), else a TimestampError."""
    try:
        sd_start, sd_end = signed_data(token)
        signer_infos = children(token, sd_start, sd_end)[-1]
        (signer_info,) = children(token, signer_infos[2], signer_infos[3])
        attrs = next(a for a in children(token, signer_info[2], signer_info[3]) if a[0] == 0xA0)
        for _, _, a_start, a_end in children(token, attrs[2], attrs[3]):
            oid, values = children(token, a_start, a_end)
            kind = token[oid[1] : oid[3]]
            if kind in (_SIGNING_CERTIFICATE, _SIGNING_CERTIFICATE_V2):
                return _cert_hash(token, values, v1=kind == _SIGNING_CERTIFICATE)
    except (IndexError, StopIteration, ValueError):
        pass
    raise TimestampError(_NO_ESS)


def _cert_hash(token: bytes, values: Element, *, v1: bool) -> tuple[str, bytes]:
    """(hash name, certHash) of the first ESSCertID(v2) in an attribute's VALUES."""
    (value,) = children(token, values[2], values[3])  # SigningCertificate(V2)
    cert_ids = children(token, value[2], value[3])[0]  # certs SEQUENCE OF
    first = children(token, cert_ids[2], cert_ids[3])[0]  # the signer's ESSCertID
    fields = children(token, first[2], first[3])
    hash_name = "sha1" if v1 else "sha256"
    if fields[0][0] == 0x30:  # ESSCertIDv2 with an explicit hashAlgorithm
        algorithm = children(token, fields[0][2], fields[0][3])[0]
        hash_name = _ESS_HASHES.get(token[algorithm[1] : algorithm[3]], "")
        fields = fields[1:]
    if fields[0][0] != 0x04 or not hash_name:
        raise TimestampError(_NO_ESS)
    return hash_name, token[fields[0][2] : fields[0][3]]
