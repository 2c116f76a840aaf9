"""The typed read view over the informer caches (`CacheView`), its parse-once cache and the
owner lookup of deleting StatefulSet / VM pods."""

from controller.view.cache_view import MAY_WAIT_INDEX, CacheView, OwnerGets, may_wait_index
from controller.view.owner import OwnerLookup
from controller.view.parse_cache import ParseCache, ParsedSubnet, parse_subnet

__all__ = [
    "MAY_WAIT_INDEX",
    "CacheView",
    "OwnerGets",
    "OwnerLookup",
    "ParseCache",
    "ParsedSubnet",
    "may_wait_index",
    "parse_subnet",
]
