"""Where the HTTP target may connect: the server-side request forgery (SSRF) policy.

A member who starts a run chooses the URL the workers POST to, and what it answers is stored
and shown. So every target URL is checked, at run creation (a 400 saying why) and again in
the worker before each batch connects:

- The host is resolved and **every** address it resolves to is checked (a name with one
  good and one bad address is refused).
- Refused by default: link-local addresses (169.254.0.0/16 and fe80::/10, where the cloud
  metadata services answer), the other metadata addresses (100.100.100.200,
  fd00:ec2::254), unspecified, multicast, broadcast and reserved addresses (240.0.0.0/4
  included, which Python also counts as private). An IPv6 address that carries an IPv4
  address (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96 and
  64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) is refused when that IPv4 address is.
  IPv4 written the way inet_aton reads it (`0251.254.169.254`, `0xa9fea9fe`, `127.1`) is read
  as that address here, not handed to a resolver.
- A URL that cannot be parsed is refused with the parser's reason (never an error page).
- Allowed by default: loopback and private networks. A team server's agents usually live on
  its own network, and the built-in demo agent is served by evalsite itself on 127.0.0.1.
  A server that must not reach them denies them explicitly (below).
- `EVALSITE_TARGET_DENY`: comma-separated networks (`10.0.0.0/8`, `127.0.0.1`) and host names
  (`internal.example.com`, or `.example.com` for a domain and its subdomains) always refused.
- `EVALSITE_TARGET_ALLOW`: when set, only these networks and host names are allowed (an
  allow-list); an entry there also lifts the built-in refusals for its addresses (an agent
  that really is on a link-local address). The deny list wins over it.
- DNS rebinding: the worker connects to the address it checked (pinned), not to whatever a
  second lookup returns; the host name still goes in the Host header and, over HTTPS, in
  SNI and the certificate check.
- Redirects are never followed: a 3xx is recorded as the turn's error, so a redirect to a
  refused address reaches nothing.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

import httpx
from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_HOST_NAME = re.compile(r"(\*\.|\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")
METADATA = [ipaddress.ip_network(n) for n in ("169.254.169.254/32", "100.100.100.200/32", "fd00:ec2::254/128")]


class EgressRefused(Exception):
    """The URL may not be called; the message says why and which setting changes it."""


@dataclass(frozen=True)
class Rules:
    networks: tuple[Network, ...]
    names: tuple[str, ...]  # exact host names, or ".domain" for the domain and its subdomains

    @classmethod
    def parse(cls, entries: list[str], setting: str) -> Rules:
        networks: list[Network] = []
        names: list[str] = []
        for entry in entries:
            entry = entry.strip().lower()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                if not _HOST_NAME.fullmatch(entry):
                    raise ValueError(f"{setting}: {entry!r} is neither a network nor a host name") from None
                names.append(entry[1:] if entry.startswith("*.") else entry)
        return cls(tuple(networks), tuple(names))

    def matches_name(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return any(host == n or (n.startswith(".") and (host.endswith(n) or host == n[1:])) for n in self.names)

    def matches_address(self, address: Address, *, carried: bool = True) -> bool:
        """The address, or (with `carried`) an IPv4 address its IPv6 form carries, is listed."""
        inner, same_destination = embedded_ipv4(address)
        candidates = [address, *(inner if carried or same_destination else [])]
        return any(a in net for a in candidates for net in self.networks if net.version == a.version)


def _rules(name: str) -> Rules:
    value = getattr(settings, name, [])
    return Rules.parse(list(value), name)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


# RFC 6052 section 2.2: where the IPv4 octets sit for each prefix length allowed inside
# 64:ff9b:1::/48, and the octets that must then be zero (octet 8 always, and the suffix).
_NAT64_LAYOUTS = (((6, 7, 9, 10), (8, 11, 12, 13, 14, 15)), ((7, 9, 10, 11), (8, 12, 13, 14, 15)),
                  ((9, 10, 11, 12), (8, 13, 14, 15)), ((12, 13, 14, 15), (8, 9, 10, 11)))


def _nat64_local_candidates(value: int) -> list[ipaddress.IPv4Address]:
    """The IPv4 address inside 64:ff9b:1::/48 for each layout the address fits: which prefix
    length a network uses is not in the address, so every consistent reading is checked (all
    of them when none fits)."""
    octets = value.to_bytes(16, "big")
    fitting = [where for where, zero in _NAT64_LAYOUTS if not any(octets[i] for i in zero)]
    return [ipaddress.IPv4Address(bytes(octets[i] for i in where))
            for where in fitting or [where for where, _ in _NAT64_LAYOUTS]]


def embedded_ipv4(address: Address) -> tuple[list[ipaddress.IPv4Address], bool]:
    """(the IPv4 addresses an IPv6 address carries, whether the first one is where the packets
    go): IPv4-mapped, -compatible and NAT64 addresses stand for their IPv4 address; 6to4 and
    Teredo addresses are reached through theirs (a relay, a NAT), so those must pass too."""
    if not isinstance(address, ipaddress.IPv6Address):
        return [], False
    value = int(address)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped], True
    if address in _NAT64:
        return [ipaddress.IPv4Address(value & 0xFFFFFFFF)], True
    if address in _NAT64_LOCAL:
        return _nat64_local_candidates(value), False
    if value >> 32 == 0 and value > 1:  # ::a.b.c.d, IPv4-compatible (not :: or ::1)
        return [ipaddress.IPv4Address(value)], True
    if address.sixtofour is not None:
        return [address.sixtofour], False
    if address.teredo is not None:
        server, client = address.teredo
        return [server, client], False
    return [], False


def builtin_refusal(address: Address) -> str | None:
    """Why an address is refused by default, or None."""
    inner, same_destination = embedded_ipv4(address)
    for ipv4 in inner:
        why = builtin_refusal(ipv4)
        if why is not None:
            return why if same_destination else f"{why} ({ipv4}, carried in that IPv6 address)"
    if same_destination:
        return None  # the IPv4 address it stands for decides
    if any(address in net for net in METADATA if net.version == address.version):
        return "a cloud metadata address"
    if address.is_link_local:
        return "a link-local address (where cloud metadata services answer)"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    if address.is_loopback:
        return None  # ::1 counts as "reserved" too; loopback is allowed
    # Before the private check: Python counts 240.0.0.0/4 (reserved) as private as well.
    if address.is_reserved:
        return "a reserved address"
    return None  # private networks and public addresses


_INET_ATON_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host written as inet_aton reads it stands for (`127.1`, `0x7f000001`,
    `0251.254.169.254`, `2130706433`), or None when it is not such a form."""
    parts = host.rstrip(".").split(".") if host else []
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.fullmatch(part) for part in parts):
        return None
    numbers = [int(part, 16) if part[:2].lower() == "0x" else int(part, 8) if part.startswith("0") else int(part)
               for part in parts]  # "0x" alone is 0, as inet_aton reads it
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to (an IP literal is itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    numeric = inet_aton(host)
    if numeric is not None:
        return [numeric]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressRefused(f"cannot resolve the host {host!r}: {exc}") from None
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def check(url: str) -> tuple[httpx.URL, Address]:
    """(the URL, the address to connect to), or EgressRefused saying why."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:  # InvalidURL is no ValueError
        raise EgressRefused(f"not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise EgressRefused("the target must be an http:// or https:// URL")
    host = parsed.host
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    deny, allow = _rules("EVALSITE_TARGET_DENY"), _rules("EVALSITE_TARGET_ALLOW")
    if deny.matches_name(host):
        raise EgressRefused(f"the host {host!r} is refused by EVALSITE_TARGET_DENY")
    name_allowed = allow.matches_name(host)
    addresses = resolve(host, port)
    if not addresses:
        raise EgressRefused(f"the host {host!r} resolves to no address")
    for address in addresses:
        if deny.matches_address(address):
            raise EgressRefused(f"{host} ({address}) is refused by EVALSITE_TARGET_DENY")
        # An allow-list entry admits an IPv6 form only where it stands for the listed IPv4 address.
        allowed = name_allowed or allow.matches_address(address, carried=False)
        if allow.networks or allow.names:
            if not allowed:
                raise EgressRefused(f"{host} ({address}) is not in EVALSITE_TARGET_ALLOW")
            continue
        why = builtin_refusal(address)
        if why is not None:
            raise EgressRefused(f"{host} ({address}) is {why}; evalsite does not call it unless "
                                "EVALSITE_TARGET_ALLOW lists it")
    return parsed, addresses[0]


def refusal(url: str) -> str | None:
    """Why `url` may not be a target, or None (for run creation)."""
    try:
        check(url)
    except EgressRefused as exc:
        return str(exc)
    return None


def pinned_request(url: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """(the URL with its host replaced by the checked address, headers, request extensions)
    for one connection: Host keeps the name, and HTTPS verifies the certificate for it."""
    parsed, address = check(url)
    if parsed.host.strip("[]") == str(address):
        return url, {}, {}
    pinned = parsed.copy_with(host=str(address))
    host_header = parsed.host if parsed.port is None else f"{parsed.host}:{parsed.port}"
    extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
    return str(pinned), {"Host": host_header}, extensions
