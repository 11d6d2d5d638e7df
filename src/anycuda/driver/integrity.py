"""The answer to the CUDA runtime's integrity check (export table D4082055-…, slot 1).

The runtime hands the driver a version number and the current time, computes the expected
answer itself, and refuses to go on when the driver's answer differs. The answer is an
HMAC (RFC 2104) over MD2 (RFC 1319, 16-byte blocks) with a fixed 16-byte key, of a record
describing the calling process and the driver (versions, process and thread ids, where the
export tables and the check function live, the time) followed by one record per device
(UUID and PCI location). For versions ending in 0 or 1 the runtime expects fixed values.
Known from public notes on the interface (ZLUDA's dark_api); implemented here from the RFCs.
"""
from __future__ import annotations

import hmac
import struct

# RFC 1319's substitution table: a permutation of 0..255 built from the digits of pi
_S = bytes.fromhex(
    "292e43c9a2d87c013d3654a1ecf0061362a705f3c0c7738c98932bd9bc4c82ca"
    "1e9b573cfdd4e01667426f188a17e512be4ec4d6da9ede49a0fbf58ebb2fee7a"
    "a968799115b2073f94c210890b225f21807f5d9a5a903227353ecce7bff79703"
    "ff1930b348a5b5d1d75e922aac56aac64fb838d296a47db676fc6be29c7404f1"
    "459d705964718720865bcf65e62da8021b6025adaeb0b9f61c46616934407e0f"
    "5547a323dd51af3ac35cf9cebac5ea262c530d6e85288409d3dfcdf441814d52"
    "6adc37c86cc1abfa24e17b080cbdb14a7888958be363e86de9cbd5fe3b001d39"
    "f2efb70e6658d0e4a67772f8eb754b0a314450b48fed1f1adb998d339f118314")

assert len(_S) == 256 and len(set(_S)) == 256

KEY = bytes.fromhex("146addae53a9a752aa0841360bf55a9f")
FIXED = {0: (0x3341181C03CB675C, 0x8ED383AA1F4CD1E8),
         1: (0x1841181C03CB675C, 0x8ED383AA1F4CD1E8)}


class MD2:
    """RFC 1319 message digest (hashlib-style: update/digest/copy)."""
    digest_size = 16
    block_size = 16
    name = "md2"

    def __init__(self, data: bytes = b""):
        self._x = bytearray(48)
        self._checksum = bytearray(16)
        self._pending = b""
        self.update(data)

    def copy(self) -> "MD2":
        other = MD2()
        other._x = bytearray(self._x)
        other._checksum = bytearray(self._checksum)
        other._pending = self._pending
        return other

    def _block(self, block: bytes) -> None:
        x, c = self._x, self._checksum
        last = c[15]
        for j in range(16):
            c[j] ^= _S[block[j] ^ last]
            last = c[j]
            x[16 + j] = block[j]
            x[32 + j] = block[j] ^ x[j]
        t = 0
        for j in range(18):
            for k in range(48):
                x[k] ^= _S[t]
                t = x[k]
            t = (t + j) & 0xFF

    def update(self, data: bytes) -> None:
        data = self._pending + bytes(data)
        whole = len(data) - len(data) % 16
        for i in range(0, whole, 16):
            self._block(data[i:i + 16])
        self._pending = data[whole:]

    def digest(self) -> bytes:
        h = self.copy()
        n = 16 - len(h._pending)
        h.update(bytes([n]) * n)
        h.update(bytes(h._checksum))
        return bytes(h._x[:16])

    def hexdigest(self) -> str:
        return self.digest().hex()


def answer(version: int, unix_seconds: int, *, driver_version: int, process: int, thread: int,
           cudart_table: int, integrity_table: int, function: int, devices) -> tuple:
    """The two 64-bit words the runtime expects. `devices` holds (uuid bytes, pci domain,
    pci bus, pci device) per device, as the driver reports them."""
    if version % 10 in FIXED:
        return FIXED[version % 10]
    record = struct.pack("<IIIIQQQQ", driver_version & 0xFFFFFFFF, version & 0xFFFFFFFF,
                         process & 0xFFFFFFFF, thread & 0xFFFFFFFF,
                         cudart_table, integrity_table, function, unix_seconds & (2 ** 64 - 1))
    for uuid, domain, bus, device in devices:
        record += bytes(uuid) + struct.pack("<iii", domain, bus, device)
    mac = hmac.new(KEY, record, MD2).digest()
    return struct.unpack("<QQ", mac)
