"""IPAM error tree: kube-ovn's sentinel errors as exception classes.

kube-ovn (pkg/ipam/ipam.go) compares errors by identity; here each sentinel is a class, so
callers write ``except AddressConflictError``. Every instance carries the subnet and the address
it is about and a ``reason`` equal to kube-ovn's sentinel string ("AddressConflict", ...), which
is what kube-ovn puts in the ``AcquireAddressFailed`` event message.
"""

from __future__ import annotations

from controller.core.errors import ControllerError


class IPAMError(ControllerError):
    """Base of every error the ipam package raises."""

    #: kube-ovn's sentinel string; a class constant each subclass sets, also the instance's.
    reason: str = "IPAMError"

    def __init__(self, detail: str, *, subnet: str = "", address: str = "") -> None:
        self.detail = detail
        self.subnet = subnet
        self.address = address
        where = []
        if subnet:
            where.append(f"subnet {subnet}")
        if address:
            where.append(f"address {address}")
        suffix = f" ({', '.join(where)})" if where else ""
        super().__init__(f"{self.reason}: {detail}{suffix}", reason=type(self).reason)


class OutOfRangeError(IPAMError):
    """A requested address is outside the subnet's CIDR ("AddressOutOfRange")."""

    reason = "AddressOutOfRange"


class AddressConflictError(IPAMError):
    """A requested address or MAC is held by another key, or every candidate was skipped."""

    reason = "AddressConflict"


class NoAvailableError(IPAMError):
    """Nothing left to hand out, or the request cannot be satisfied ("NoAvailableAddress")."""

    reason = "NoAvailableAddress"


class SubnetNotFoundError(NoAvailableError):
    """The subnet is not registered. A NoAvailableError, as kube-ovn returns for unknown subnets."""


class InvalidCIDRError(IPAMError):
    """A subnet's CIDR block or exclude list does not parse ("CIDRInvalid")."""

    reason = "CIDRInvalid"


class InvalidAddressError(IPAMError):
    """A requested IP or MAC string does not parse (kube-ovn: "failed to parse IP")."""

    reason = "InvalidAddress"
