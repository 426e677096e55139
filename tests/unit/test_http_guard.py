"""The SSRF guard of the http_request task: which addresses it refuses, and HTTP_TASK_ALLOW."""

from __future__ import annotations

import ipaddress

import pytest

from app.tasks.catalog.http_guard import Allowance, RefusedTarget, check_url, parse_allowance, refused_rule

NOTHING_ALLOWED = Allowance()


def resolver(table: dict[str, list[str]]):
    """A resolver answering from `table` (as getaddrinfo would), for names only tests control."""

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]

    return resolve


@pytest.mark.parametrize(
    "address,rule",
    [
        ("127.0.0.1", "loopback"),
        ("127.9.8.7", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12:3456::1", "private"),
        ("::ffff:10.1.2.3", "private"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("0.1.2.3", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.10", "reserved"),
        ("240.0.0.1", "reserved"),
    ],
)
def test_each_internal_address_is_refused_by_its_rule(address, rule):
    assert refused_rule(ipaddress.ip_address(address)) == rule


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "8.8.8.8"])
def test_public_addresses_pass(address):
    assert refused_rule(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "url,rule",
    [
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[::1]:8080/", "loopback"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("https://0.0.0.0/", "unspecified"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://127.0.0.1:6379/_INFO", "scheme"),
        ("ftp://example.org/", "scheme"),
        ("http://user:pw@example.org/", "url"),
        ("http://exa mple.org/", "url"),
        ("http://example.org:99999/", "url"),
    ],
)
def test_refusals_name_their_rule_in_one_line(url, rule):
    with pytest.raises(RefusedTarget) as refused:
        check_url(url, NOTHING_ALLOWED, resolver({}))
    assert refused.value.rule == rule
    assert "\n" not in str(refused.value)
    if rule not in ("scheme", "url"):
        assert f"rule {rule!r}" in str(refused.value) and "HTTP_TASK_ALLOW" in str(refused.value)


def test_a_name_is_judged_by_every_address_it_resolves_to():
    names = {"mixed.test": ["93.184.216.34", "10.0.0.5"], "public.test": ["93.184.216.34"]}
    with pytest.raises(RefusedTarget, match=r"mixed\.test resolves to 10\.0\.0\.5.*'private'"):
        check_url("http://mixed.test/", NOTHING_ALLOWED, resolver(names))
    target = check_url("https://public.test:8443/a?b=1", NOTHING_ALLOWED, resolver(names))
    assert (target.address, target.host, target.port, target.path) == ("93.184.216.34", "public.test", 8443, "/a?b=1")
    assert target.connect_url() == "https://93.184.216.34:8443/a?b=1"
    assert target.host_header() == "public.test:8443"


def test_the_connection_goes_to_the_address_that_was_checked():
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])  # a rebinding name: public first, loopback next
    target = check_url("http://rebind.test/", NOTHING_ALLOWED, lambda host, port: next(answers))
    assert target.connect_url() == "http://93.184.216.34:80/"  # one lookup; the second answer is never used


def test_an_ipv6_address_is_bracketed_in_the_url_it_connects_to():
    target = check_url("http://[2606:4700:4700::1111]/", NOTHING_ALLOWED, resolver({}))
    assert target.connect_url() == "http://[2606:4700:4700::1111]:80/"
    assert target.host_header() == "[2606:4700:4700::1111]"


def test_an_unresolvable_name_fails_with_the_name():
    with pytest.raises(RefusedTarget, match="cannot resolve host 'nowhere.test'") as refused:
        check_url("http://nowhere.test/", NOTHING_ALLOWED, resolver({}))
    assert refused.value.rule == "dns"


def test_the_allowance_lets_through_hosts_networks_and_private_ranges():
    allowance = parse_allowance(" 127.0.0.1 , internal.example.com., 10.20.0.0/16,private,[::1]")
    assert allowance.hosts == frozenset({"internal.example.com"})
    assert allowance.private
    names = {"internal.example.com": ["169.254.10.10"], "other.test": ["127.0.0.2"]}
    assert check_url("http://127.0.0.1:9/", allowance, resolver(names)).address == "127.0.0.1"
    assert check_url("http://[::1]:9/", allowance, resolver(names)).address == "::1"
    assert check_url("http://10.20.3.4/", allowance, resolver(names)).address == "10.20.3.4"
    assert check_url("http://192.168.0.9/", allowance, resolver(names)).address == "192.168.0.9"  # `private`
    assert check_url("http://INTERNAL.example.com/", allowance, resolver(names)).address == "169.254.10.10"
    with pytest.raises(RefusedTarget, match="'loopback'"):
        check_url("http://other.test/", allowance, resolver(names))  # 127.0.0.2 is outside 127.0.0.1/32
    with pytest.raises(RefusedTarget, match="'metadata'"):
        check_url("http://169.254.169.254/", allowance, resolver(names))  # `private` is not metadata
    with pytest.raises(RefusedTarget, match="'scheme'"):
        check_url("file:///etc/passwd", allowance, resolver(names))  # never allowed


@pytest.mark.parametrize("raw", ["exa mple.com", "http://x/", "10.0.0.0/33x", "a_b"])
def test_a_bad_allowance_entry_is_named(raw):
    with pytest.raises(ValueError, match="HTTP_TASK_ALLOW"):
        parse_allowance(raw)


def test_an_empty_allowance_allows_nothing():
    assert parse_allowance(None) == parse_allowance("") == parse_allowance(" , ") == NOTHING_ALLOWED
