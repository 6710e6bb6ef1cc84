"""Where the HTTP target may connect: the server-side request forgery (SSRF) policy.

A member who starts a run chooses the URL the workers POST to, and what it answers is stored
and shown. So every target URL is checked, at run creation (a 400 saying why) and again in
the worker before each batch connects:

- The host is resolved and **every** address it resolves to is checked (a name with one
  good and one bad address is refused).
- Refused by default: link-local addresses (169.254.0.0/16 and fe80::/10, where the cloud
  metadata services answer), the other metadata addresses (100.100.100.200,
  fd00:ec2::254), unspecified, multicast, broadcast and reserved addresses, in IPv4 and in
  IPv4-mapped IPv6 form.
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

    def matches_address(self, address: Address) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)


def _rules(name: str) -> Rules:
    value = getattr(settings, name, [])
    return Rules.parse(list(value), name)


def builtin_refusal(address: Address) -> str | None:
    """Why an address is refused by default, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return builtin_refusal(address.ipv4_mapped)
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
    if address.is_loopback or address.is_private:
        return None  # ::1 counts as "reserved" too; loopback and private networks are allowed
    if address.is_reserved:
        return "a reserved address"
    return None


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to (an IP literal is itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
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
    parsed = httpx.URL(url)
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
        allowed = name_allowed or allow.matches_address(address)
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
    except ValueError as exc:  # httpx.InvalidURL
        return f"not a valid URL: {exc}"
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
