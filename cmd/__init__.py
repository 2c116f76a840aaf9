"""Entry points. Keep this package import-free: it shadows the standard library's `cmd`."""
