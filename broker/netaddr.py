"""Turn a bind URI such as `tcp://eth0:8050` into one ZeroMQ can bind, with a clear error if it cannot."""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

from broker.errors import InputError

_SIOCGIFADDR = 0x8915


class AddressError(InputError):
    """A bind/connect URI that does not name a usable address."""


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of a network interface, or None when there is no such interface (or no IPv4)."""
    if name not in {iface for _, iface in socket.if_nameindex()}:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def split_tcp(uri: str) -> tuple[str, int]:
    """'tcp://host:port' -> (host, port)."""
    if not uri.startswith("tcp://"):
        raise AddressError(f"{uri!r}: only tcp:// URIs are supported for the overlay")
    host, sep, port = uri[len("tcp://") :].rpartition(":")
    if not sep or not host:
        raise AddressError(f"{uri!r}: expected tcp://HOST:PORT")
    try:
        number = int(port)
    except ValueError:
        raise AddressError(f"{uri!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise AddressError(f"{uri!r}: port {number} is out of range")
    return host.strip("[]"), number


def resolve_bind(uri: str) -> str:
    """Replace an interface or host name in a tcp bind URI with its IPv4 address ('*' and IPs pass)."""
    if uri.startswith(("ipc://", "inproc://")):
        return uri
    host, port = split_tcp(uri)
    if host == "*":
        return uri
    try:
        ipaddress.ip_address(host)
        return uri
    except ValueError:
        pass
    address = interface_ipv4(host)
    if address is None:
        try:
            address = socket.gethostbyname(host)
        except OSError:
            raise AddressError(f"{uri!r}: {host!r} is neither a network interface nor a resolvable host") from None
    return f"tcp://{address}:{port}"
