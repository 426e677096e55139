"""Where the `http_request` task may connect: the SSRF guard.

A job's URL is chosen by an operator, but the request leaves from inside the deployment, where the
database, the cloud's metadata service and other internal services answer. So the guard checks
the address a name *resolves to* (not the name: `localhost.example.com` may resolve to 127.0.0.1,
and `2130706433` is 127.0.0.1 to the resolver) and the task then connects to that very address, so
a second, different DNS answer (rebinding) is never used. Each redirect is checked the same way.

Refused unless the deployer allows them in `HTTP_TASK_ALLOW`: loopback, private (RFC 1918,
unique-local), link-local (which holds the cloud metadata services), multicast, unspecified and
other reserved addresses. Schemes other than http and https are always refused.

Standard library only: this module is imported into the worker's zygote.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

ALLOW_VARIABLE = "HTTP_TASK_ALLOW"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]

# The cloud metadata services: AWS, GCP, Azure and others on IPv4 (inside link-local), AWS on
# IPv6 (inside unique-local, so named before the private rule catches it).
_METADATA = (ipaddress.ip_network("169.254.169.254/32"), ipaddress.ip_network("fd00:ec2::254/128"))
_PRIVATE = tuple(
    ipaddress.ip_network(cidr)
    for cidr in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)


class RefusedTarget(ValueError):
    """A URL the guard will not connect to; the message is one line that names the rule."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message if f"(rule {rule!r}" in message else f"{message} (rule {rule!r})")
        self.rule = rule


@dataclass(frozen=True)
class Allowance:
    """What `HTTP_TASK_ALLOW` lets through: host names, networks, and `private` for every
    private range."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()
    private: bool = False

    def allows_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def allows_address(self, address: IPAddress, rule: str) -> bool:
        if rule == "private" and self.private:
            return True
        return any(address.version == network.version and address in network for network in self.networks)


def parse_allowance(raw: str | None) -> Allowance:
    """Parse `HTTP_TASK_ALLOW` (comma list of host names, addresses or CIDRs, and `private`).

    Raises ValueError naming the entry that is none of those."""
    hosts: set[str] = set()
    networks: list[Network] = []
    private = False
    for entry in (part.strip() for part in (raw or "").split(",")):
        if not entry:
            continue
        if entry.lower() == "private":
            private = True
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        name = entry.lower().rstrip(".")
        if not name or any(not (char.isalnum() or char in "-.") for char in name) or not name.isascii():
            raise ValueError(f"{ALLOW_VARIABLE}: {entry!r} is not a host name, an address, a CIDR or 'private'")
        hosts.add(name)
    return Allowance(frozenset(hosts), tuple(networks), private)


def refused_rule(address: IPAddress) -> str | None:
    """The rule that refuses `address`, or None for an ordinary public address."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:  # ::ffff:10.0.0.1 reaches 10.0.0.1
        address = mapped
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if any(address.version == net.version and address in net for net in _METADATA):
        return "metadata"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if any(address.version == net.version and address in net for net in _PRIVATE):
        return "private"
    if address.is_reserved or address.is_private or not address.is_global:
        # Documentation, benchmarking, "this network" (0.0.0.0/8), broadcast, 240.0.0.0/4...
        return "reserved"
    return None


@dataclass(frozen=True)
class CheckedTarget:
    """A URL that passed the guard, with the address the request must connect to."""

    url: str
    scheme: str
    host: str  # the name as written (what Host and TLS SNI carry)
    port: int
    addresses: tuple[str, ...]  # every checked IP address, in the resolver's order: connect only to these
    path: str  # path and query, as sent on the request line

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    @property
    def address(self) -> str:
        """The first checked address (the one tried first)."""
        return self.addresses[0]

    def connect_url(self, address: str | None = None) -> str:
        """The URL naming a checked address (default the first) instead of the host."""
        address = address or self.address
        if address not in self.addresses:
            raise ValueError(f"{address} was not checked")
        literal = f"[{address}]" if ":" in address else address
        return f"{self.scheme}://{literal}:{self.port}{self.path}"

    def host_header(self) -> str:
        literal = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return literal if self.port == default else f"{literal}:{self.port}"


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (TCP), in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def check_url(url: str, allowance: Allowance, resolve: Resolver = system_resolver) -> CheckedTarget:
    """Resolve `url`'s host and return where to connect, or raise RefusedTarget naming the rule.

    Every address the name resolves to must pass (a name that answers with one public and one
    private address is refused); the request may use any of them, and only them."""
    parts = _split(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        addresses = [ipaddress.ip_address(host)] if _is_literal(host) else _resolved(host, port, resolve)
    except OSError as exc:
        raise RefusedTarget(f"cannot resolve host {host!r} of {url}: {exc.strerror or exc}", "dns") from None
    if not allowance.allows_host(host):
        for address in addresses:
            rule = refused_rule(address)
            if rule is not None and not allowance.allows_address(address, rule):
                shown = "" if str(address) == host else f" resolves to {address}, which"
                raise RefusedTarget(
                    f"refused {url}: {host}{shown} is a {rule} address (rule {rule!r}; "
                    f"a deployer may allow it in {ALLOW_VARIABLE})",
                    rule,
                )
    checked = tuple(dict.fromkeys(str(address) for address in addresses))
    return CheckedTarget(url, parts.scheme, host, port, checked, path)


def _split(url: str) -> SplitResult:
    if not url.isascii() or any(char.isspace() or not char.isprintable() for char in url):
        raise RefusedTarget(f"refused {url!r}: a URL must be ASCII without spaces or control characters", "url")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise RefusedTarget(f"refused {url}: not a valid URL ({exc})", "url") from None
    if parts.scheme not in ("http", "https"):
        raise RefusedTarget(f"refused {url}: scheme {parts.scheme or 'missing'!r} is not http or https", "scheme")
    if "@" in parts.netloc:
        # Credentials in the URL would be sent, and logged with it; secret_headers carries them.
        raise RefusedTarget(f"refused {url}: a URL must not hold a user name or password ('@')", "url")
    if not parts.hostname:
        raise RefusedTarget(f"refused {url}: no host", "url")
    return parts


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _resolved(host: str, port: int, resolve: Resolver) -> list[IPAddress]:
    addresses = [ipaddress.ip_address(found.split("%", 1)[0]) for found in resolve(host, port)]
    if not addresses:
        raise OSError(f"no address for {host!r}")
    return addresses


def validate_url_shape(url: str) -> None:
    """Refuse, at job creation, a URL that no deployment could ever fetch (bad scheme, user info,
    no host). Addresses are checked when the task runs, where the resolver and the allowance are
    the worker's."""
    _split(url)
