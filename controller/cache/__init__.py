"""client-go `tools/cache` for the controller: keys, indexed store, listers, reflector, RealFIFO,
shared informers. See each module's docstring for its contract."""

from controller.cache.backoff import Backoff
from controller.cache.cache_sync import named_wait_for_cache_sync, wait_for_cache_sync
from controller.cache.errors import (
    CacheError,
    IndexerConflictError,
    InformerStoppedError,
    KeyFuncError,
    NotInCacheError,
    UnknownIndexError,
)
from controller.cache.fifo import Delta, DeltaType, FIFOClosedError, RealFIFO
from controller.cache.handlers import (
    FilteringResourceEventHandler,
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
)
from controller.cache.informer_factory import SharedInformerFactory
from controller.cache.keys import (
    DeletedFinalStateUnknown,
    ExplicitKey,
    Object,
    deletion_handling_meta_namespace_key_func,
    meta_namespace_key_func,
    raw_field,
    split_meta_namespace_key,
    unwrap_tombstone,
)
from controller.cache.labels import Selector, SelectorError
from controller.cache.listers import Lister
from controller.cache.listwatch import (
    ListerWatcher,
    ListOptions,
    ListResult,
    ListWatch,
    Watcher,
    WatchEvent,
    WatchOptions,
)
from controller.cache.processor_listener import ResourceEventHandlerRegistration
from controller.cache.reflector import Reflector
from controller.cache.shared_informer import SharedIndexInformer, strip_managed_fields
from controller.cache.store import (
    NAMESPACE_INDEX,
    Indexer,
    ThreadSafeStore,
    meta_namespace_index_func,
)
from controller.queues.clock import REAL_CLOCK, Clock, RealClock

__all__ = [
    "NAMESPACE_INDEX",
    "REAL_CLOCK",
    "Backoff",
    "CacheError",
    "Clock",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaType",
    "ExplicitKey",
    "FIFOClosedError",
    "FilteringResourceEventHandler",
    "Indexer",
    "IndexerConflictError",
    "InformerStoppedError",
    "KeyFuncError",
    "ListOptions",
    "ListResult",
    "ListWatch",
    "Lister",
    "ListerWatcher",
    "NotInCacheError",
    "Object",
    "RealClock",
    "RealFIFO",
    "Reflector",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "ResourceEventHandlerRegistration",
    "Selector",
    "SelectorError",
    "SharedIndexInformer",
    "SharedInformerFactory",
    "ThreadSafeStore",
    "UnknownIndexError",
    "WatchEvent",
    "WatchOptions",
    "Watcher",
    "deletion_handling_meta_namespace_key_func",
    "meta_namespace_index_func",
    "meta_namespace_key_func",
    "named_wait_for_cache_sync",
    "raw_field",
    "split_meta_namespace_key",
    "strip_managed_fields",
    "unwrap_tombstone",
    "wait_for_cache_sync",
]
