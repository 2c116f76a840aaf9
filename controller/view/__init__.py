"""The typed read view over the informer caches (`CacheView`, `CachedObject`), its parse-once
cache and the owner lookup (`OwnerLookup`) every keep decision reads owners through."""

from controller.view.cache_view import (
    IP_INDEX,
    MAY_WAIT_INDEX,
    NODE_INDEX,
    NODE_IP_INDEX,
    CacheView,
    OwnerGets,
    ip_index,
    may_wait_index,
    node_index,
    node_ip_index,
)
from controller.view.objects import CachedObject
from controller.view.owner import ListedOwners, OwnerApi, OwnerLookup, OwnerSource
from controller.view.parse_cache import ParseCache, ParsedSubnet, parse_subnet

__all__ = [
    "IP_INDEX",
    "MAY_WAIT_INDEX",
    "NODE_INDEX",
    "NODE_IP_INDEX",
    "CacheView",
    "CachedObject",
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
    "node_ip_index",
    "parse_subnet",
]
