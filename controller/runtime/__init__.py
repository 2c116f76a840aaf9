"""Process plumbing: worker pools, the key mutex, leader election, the metrics server, logging."""
