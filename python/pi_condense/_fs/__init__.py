"""The file-system helpers under every writer and reader of the package: durable writes and
bounded reads (:mod:`.atomic`), advisory locks between processes (:mod:`.lock`), spill blobs
written atomically and the leftovers of killed writers (:mod:`.blob`)."""
