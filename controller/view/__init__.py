"""The typed read view over the informer caches (`CacheView`), its parse-once cache and the
owner lookup of deleting StatefulSet / VM pods."""

from controller.view.cache_view import (
    IP_INDEX,
    MAY_WAIT_INDEX,
    NODE_INDEX,
    CacheView,
    OwnerGets,
    ip_index,
    may_wait_index,
    node_index,
)
from controller.view.owner import ListedOwners, OwnerApi, OwnerLookup, OwnerSource
from controller.view.parse_cache import ParseCache, ParsedSubnet, parse_subnet

__all__ = [
    "IP_INDEX",
    "MAY_WAIT_INDEX",
    "NODE_INDEX",
    "CacheView",
    "ListedOwners",
    "OwnerApi",
    "OwnerGets",
    "OwnerLookup",
    "OwnerSource",
    "ParseCache",
    "ParsedSubnet",
    "ip_index",
    "may_wait_index",
    "node_index",
    "parse_subnet",
]
