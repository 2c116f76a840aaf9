"""The typed read view over the informer caches (`CacheView`), its parse-once cache and the
owner lookup of deleting StatefulSet / VM pods."""

from controller.view.cache_view import CacheView, OwnerGets
from controller.view.owner import OwnerLookup
from controller.view.parse_cache import ParseCache, ParsedSubnet, parse_subnet

__all__ = ["CacheView", "OwnerGets", "OwnerLookup", "ParseCache", "ParsedSubnet", "parse_subnet"]
